//! The protobuf encoding of `/openapi/v2` (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`),
//! what client-go's discovery client asks for.
//!
//! The messages are the part of the `openapi.v2` protobuf schema (gnostic's `OpenAPIv2.proto`)
//! that the document uses, with the same field numbers: the document's info, paths with their
//! operations and responses, and the definitions. Operation parameters are left out (kubectl
//! reads schemas and kinds from this encoding, not parameters). A `oneof` is written as
//! optional fields, which encode the same bytes. Vendor extensions (`x-kubernetes-...`) are
//! `NamedAny`s whose `yaml` holds the value as JSON, which is YAML.

use serde_json::Value;

#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    definitions: Option<Definitions>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Paths {
    #[prost(message, repeated, tag = "2")]
    path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamedPathItem {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<PathItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PathItem {
    #[prost(message, optional, tag = "2")]
    get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    delete: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    patch: Option<Operation>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Operation {
    #[prost(string, tag = "5")]
    operation_id: String,
    #[prost(string, repeated, tag = "7")]
    consumes: Vec<String>,
    #[prost(message, optional, tag = "9")]
    responses: Option<Responses>,
    #[prost(message, repeated, tag = "13")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Responses {
    #[prost(message, repeated, tag = "1")]
    response_code: Vec<NamedResponseValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamedResponseValue {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<ResponseValue>,
}

/// `oneof { Response response = 1; JsonReference json_reference = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
struct ResponseValue {
    #[prost(message, optional, tag = "1")]
    response: Option<Response>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Response {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(message, optional, tag = "2")]
    schema: Option<SchemaItem>,
}

/// `oneof { Schema schema = 1; FileSchema file_schema = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
struct SchemaItem {
    #[prost(message, optional, tag = "1")]
    schema: Option<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Definitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Schema {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(string, tag = "3")]
    title: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(string, repeated, tag = "19")]
    required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    r#enum: Vec<Any>,
    #[prost(message, optional, tag = "21")]
    additional_properties: Option<AdditionalPropertiesItem>,
    #[prost(message, optional, tag = "22")]
    r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    properties: Option<Properties>,
    #[prost(message, repeated, tag = "31")]
    vendor_extension: Vec<NamedAny>,
}

/// `oneof { Schema schema = 1; bool boolean = 2; }`.
#[derive(Clone, PartialEq, prost::Message)]
struct AdditionalPropertiesItem {
    #[prost(message, optional, boxed, tag = "1")]
    schema: Option<Box<Schema>>,
    #[prost(bool, optional, tag = "2")]
    boolean: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Properties {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamedAny {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Any>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "2")]
    yaml: String,
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn extensions(v: &Value) -> Vec<NamedAny> {
    v.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny {
            name: k.clone(),
            value: Some(Any {
                yaml: format!("{v}\n"),
            }),
        })
        .collect()
}

fn named_schemas(v: Option<&Value>) -> Vec<NamedSchema> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, s)| NamedSchema {
            name: name.clone(),
            value: Some(schema(s)),
        })
        .collect()
}

fn schema(v: &Value) -> Schema {
    let r#type = match v.get("type") {
        Some(Value::String(t)) => Some(TypeItem {
            value: vec![t.clone()],
        }),
        Some(Value::Array(ts)) => Some(TypeItem {
            value: ts
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        }),
        _ => None,
    };
    let additional_properties = match v.get("additionalProperties") {
        Some(Value::Bool(b)) => Some(AdditionalPropertiesItem {
            schema: None,
            boolean: Some(*b),
        }),
        Some(s @ Value::Object(_)) => Some(AdditionalPropertiesItem {
            schema: Some(Box::new(schema(s))),
            boolean: None,
        }),
        _ => None,
    };
    Schema {
        r#ref: text(v, "$ref"),
        format: text(v, "format"),
        title: text(v, "title"),
        description: text(v, "description"),
        required: v
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        r#enum: v
            .get("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|e| Any {
                yaml: format!("{e}\n"),
            })
            .collect(),
        additional_properties,
        r#type,
        items: v.get("items").filter(|i| i.is_object()).map(|i| ItemsItem {
            schema: vec![schema(i)],
        }),
        all_of: v
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(schema)
            .collect(),
        properties: v.get("properties").map(|p| Properties {
            additional_properties: named_schemas(Some(p)),
        }),
        vendor_extension: extensions(v),
    }
}

fn operation(v: Option<&Value>) -> Option<Operation> {
    let v = v?;
    let response_code = v
        .get("responses")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(code, r)| NamedResponseValue {
            name: code.clone(),
            value: Some(ResponseValue {
                response: Some(Response {
                    description: text(r, "description"),
                    schema: r.get("schema").map(|s| SchemaItem {
                        schema: Some(schema(s)),
                    }),
                }),
            }),
        })
        .collect();
    Some(Operation {
        operation_id: text(v, "operationId"),
        consumes: v
            .get("consumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        responses: Some(Responses { response_code }),
        vendor_extension: extensions(v),
    })
}

/// The protobuf form of a Swagger 2.0 document rendered as JSON.
pub(super) fn encode(doc: &Value) -> Vec<u8> {
    let path = doc
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, item)| NamedPathItem {
            name: name.clone(),
            value: Some(PathItem {
                get: operation(item.get("get")),
                put: operation(item.get("put")),
                post: operation(item.get("post")),
                delete: operation(item.get("delete")),
                patch: operation(item.get("patch")),
            }),
        })
        .collect();
    let document = Document {
        swagger: text(doc, "swagger"),
        info: doc.get("info").map(|i| Info {
            title: text(i, "title"),
            version: text(i, "version"),
        }),
        paths: Some(Paths { path }),
        definitions: Some(Definitions {
            additional_properties: named_schemas(doc.get("definitions")),
        }),
    };
    prost::Message::encode_to_vec(&document)
}
