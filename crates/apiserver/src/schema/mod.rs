//! Structural schemas of CustomResourceDefinitions: parse and check, prune, default, validate.
//!
//! A CRD version's `openAPIV3Schema` is parsed once into a [`Structural`] tree (rejecting
//! schemas that are not structural, with one [`FieldError`] per reason). Every write of a
//! custom object then runs, in this order: [`prune`] (drop fields the schema does not
//! describe, and `null`s on non-nullable fields), [`apply_defaults`], [`validate`], then the
//! CEL rules with [`validate_rules`] (unless [`blocks_rules`] says a schema error stops
//! them). Reads
//! from storage run [`apply_defaults`] again, so a default added to a schema shows on old
//! objects.
//!
//! One module per algorithm, each with its own table tests:
//! - `structural`: parsing, the structural rules, and the checks on `default` values;
//! - `prune`, `default`, `validate` (which also checks list types and embedded resources);
//! - `format`: the string formats Kubernetes checks;
//! - `cel`: `x-kubernetes-validations`, compiled (and checked by `cel::check`) while parsing,
//!   evaluated per object.
//!
//! Everything a check needs (regexes, enum sets, sorted property tables) is compiled at
//! parse time; the per-object algorithms allocate only to report errors or pruned paths.
//! Field paths and messages are those of Kubernetes 1.32 (`spec.list[2].name`; map values
//! as `spec.labels.key`); `docs/design/crd-schema.md` lists where kore differs.

mod cel;
mod default;
mod format;
mod prune;
mod structural;
mod validate;

use serde_json::Value;

use crate::api::field::FieldError;

pub use self::validate::validate_with_base;

/// How the items of an array are identified (`x-kubernetes-list-type`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ListType {
    /// The list is replaced as a whole (the default).
    #[default]
    Atomic,
    /// Items are scalars, unique, merged as a set.
    Set,
    /// Items are objects identified by the values of these keys (`x-kubernetes-list-map-keys`).
    Map(Vec<String>),
}

/// The JSON type a schema node declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonType {
    /// `object`
    Object,
    /// `array`
    Array,
    /// `string`
    String,
    /// `integer`: JSON numbers with an integral value.
    Integer,
    /// `number`: any JSON number.
    Number,
    /// `boolean`
    Boolean,
}

impl JsonType {
    /// The name used in schemas and messages.
    pub fn name(self) -> &'static str {
        match self {
            JsonType::Object => "object",
            JsonType::Array => "array",
            JsonType::String => "string",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::Boolean => "boolean",
        }
    }

    fn parse(s: &str) -> Option<JsonType> {
        Some(match s {
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            "string" => JsonType::String,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "boolean" => JsonType::Boolean,
            _ => return None,
        })
    }
}

/// What `additionalProperties` allows at an object node.
#[derive(Clone, Debug, Default)]
pub(crate) enum Additional {
    /// Not set: only `properties` are known.
    #[default]
    Unset,
    /// `true` / `false`.
    Bool(bool),
    /// A schema for the values of every other key (a map).
    Schema(Box<Structural>),
}

/// A parsed structural schema node.
///
/// Nodes inside `allOf`/`anyOf`/`oneOf`/`not` use the same type; they carry value
/// validations only (the structural rules forbid `type`, `default` and the extensions there).
#[derive(Clone, Debug, Default)]
pub struct Structural {
    pub(crate) ty: Option<JsonType>,
    /// The `format` as written (also used in type messages), if any.
    pub(crate) format: Option<String>,
    pub(crate) nullable: bool,
    pub(crate) default: Option<Value>,
    /// Sorted by name, for binary search.
    pub(crate) properties: Vec<(String, Structural)>,
    pub(crate) additional: Additional,
    pub(crate) items: Option<Box<Structural>>,
    pub(crate) preserve_unknown: bool,
    pub(crate) embedded: bool,
    pub(crate) int_or_string: bool,
    pub(crate) list_type: ListType,
    /// `x-kubernetes-map-type: atomic`.
    pub(crate) map_atomic: bool,
    /// Whether a node below this one has a `default` (defaulting skips subtrees without).
    pub(crate) subtree_defaults: bool,
    /// Value validations; `None` when the node has none (the common case for objects).
    pub(crate) checks: Option<Box<validate::Checks>>,
    /// Compiled `x-kubernetes-validations`; `None` when the node has none.
    pub(crate) rules: Option<std::sync::Arc<[cel::Rule]>>,
    /// Whether a node below this one has rules (evaluation skips subtrees without).
    pub(crate) subtree_rules: bool,
}

impl Structural {
    /// Parses `schema` (a CRD version's `openAPIV3Schema`) and checks that it is structural.
    /// Error paths start with `base`, e.g. `spec.versions[0].schema.openAPIV3Schema`.
    pub fn from_json(schema: &Value, base: &str) -> Result<Structural, Vec<FieldError>> {
        let s = structural::parse(schema, base)?;
        // The rules' costs depend on where they sit (a rule under list items runs per item),
        // so they are checked on the whole tree.
        let errs = cel::cost_errors(&s, base);
        if errs.is_empty() { Ok(s) } else { Err(errs) }
    }

    /// The schema of property `name` of an object node (from `properties`, else from
    /// `additionalProperties`).
    pub fn property(&self, name: &str) -> Option<&Structural> {
        self.declared_property(name).or(match &self.additional {
            Additional::Schema(s) => Some(s),
            _ => None,
        })
    }

    /// The schema of property `name` from `properties` only.
    pub(crate) fn declared_property(&self, name: &str) -> Option<&Structural> {
        self.properties
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
            .ok()
            .map(|i| &self.properties[i].1)
    }

    /// The schema of the items of an array node.
    pub fn items(&self) -> Option<&Structural> {
        self.items.as_deref()
    }

    /// The list type of an array node.
    pub fn list_type(&self) -> ListType {
        self.list_type.clone()
    }

    /// Whether unknown fields are kept at this node (`x-kubernetes-preserve-unknown-fields`).
    pub fn preserves_unknown_fields(&self) -> bool {
        self.preserve_unknown
    }

    /// The declared type, if any (none for int-or-string and untyped preserving nodes).
    pub fn json_type(&self) -> Option<JsonType> {
        self.ty
    }

    /// Whether the node is `x-kubernetes-int-or-string: true`.
    pub fn is_int_or_string(&self) -> bool {
        self.int_or_string
    }

    /// Whether the node is `x-kubernetes-embedded-resource: true`.
    pub fn is_embedded_resource(&self) -> bool {
        self.embedded
    }

    /// Whether `null` is a valid value here (`nullable: true`).
    pub fn is_nullable(&self) -> bool {
        self.nullable
    }

    /// Whether an object node is replaced as a whole (`x-kubernetes-map-type: atomic`).
    pub fn is_atomic_map(&self) -> bool {
        self.map_atomic
    }

    /// The node's `default`, if any.
    pub fn default_value(&self) -> Option<&Value> {
        self.default.as_ref()
    }

    /// Whether this node or any node below it has CEL rules (`x-kubernetes-validations`).
    pub fn has_rules(&self) -> bool {
        self.rules.is_some() || self.subtree_rules
    }

    /// The names of the declared `properties`, sorted.
    pub fn property_names(&self) -> impl Iterator<Item = &str> {
        self.properties.iter().map(|(k, _)| k.as_str())
    }
}

/// Removes every field of `object` that the schema does not describe (never the root
/// `apiVersion`, `kind`, `metadata`; `metadata` is pruned to ObjectMeta fields) and every
/// `null` on a non-nullable field. Returns the paths of removed unknown fields
/// (`spec.foo`, `spec.items[0].bar`), sorted as Kubernetes sorts them, for the
/// `unknown field` warnings and for `fieldValidation=Strict`.
pub fn prune(schema: &Structural, object: &mut Value) -> Vec<String> {
    prune::prune_root(schema, object)
}

/// Fills absent fields that have a `default`, top-down (a default inside a missing parent
/// applies only when the parent itself is created by a default). A `null` on a
/// non-nullable field with a default is replaced by the default.
pub fn apply_defaults(schema: &Structural, object: &mut Value) {
    default::apply(schema, object)
}

/// Checks `object` against the schema; one error per failing field path, with
/// Kubernetes' messages and cause types. The root `metadata` is checked only against what
/// the schema says of it (name, generateName); ObjectMeta rules are the strategy's.
pub fn validate(schema: &Structural, object: &Value) -> Vec<FieldError> {
    validate::validate_with_base(schema, object, "")
}

/// Evaluates the CEL rules (`x-kubernetes-validations`) of the schema on `object`; `old` is
/// the stored object on update (transition rules, those mentioning `oldSelf`, run only then).
/// Run after [`validate`] found nothing that blocks it (see [`blocks_rules`]). One error per
/// failed rule, at the node's path (plus the rule's `fieldPath`).
pub fn validate_rules(schema: &Structural, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    cel::validate(schema, object, old)
}

/// When schema validation found an error of a kind that makes rules meaningless (a wrong
/// type, a missing required field, an unsupported value, a value too long or a list too
/// big), Kubernetes skips the rules and adds this error instead; `None` when rules may run.
pub fn blocks_rules(errs: &[FieldError]) -> Option<FieldError> {
    use crate::api::field::FieldErrorKind as K;
    errs.iter()
        .any(|e| {
            matches!(
                e.kind,
                K::NotSupported | K::Required | K::TooLong | K::TooMany | K::TypeInvalid
            )
        })
        .then(|| {
            FieldError::invalid(
                "<nil>",
                Value::String("null".to_string()),
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            )
        })
}
