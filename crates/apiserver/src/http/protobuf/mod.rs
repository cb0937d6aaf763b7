//! Decoding of `application/vnd.kubernetes.protobuf` request bodies into JSON.
//!
//! kubectl (`create namespace|configmap|secret|deployment|serviceaccount`, `auth can-i`) and
//! client-go's typed clients send built-in kinds as protobuf and never retry with JSON. The
//! server works on JSON, so [`decode`] turns such a body into the JSON Kubernetes would have
//! received: it checks the `k8s\0` magic, decodes the `runtime.Unknown` envelope, decodes `raw`
//! with the prost types of `k8s-pb` for the envelope's `apiVersion`/`kind`, and converts the
//! message with [`ToJson`]. Responses are not this module's business: they are always JSON.
//!
//! Where to start: [`decode`]. The per-message conversions live in `generated.rs`, written by
//! `tools/gen-protobuf-json.py` (run it after changing the list of kinds or upgrading `k8s-pb`);
//! the types whose JSON form is not an object of their fields (`Time`, `IntOrString`,
//! `Quantity`, embedded JSON, ...) are converted by hand below.
//!
//! # Supported types
//!
//! Every kind the server stores or accepts as a body, each in the version it is served in
//! (the list is `TOP_LEVEL_KINDS` in the generator):
//!
//! - core/v1: `Binding`, `ConfigMap`, `Endpoints`, `Event`, `LimitRange`, `Namespace`, `Node`,
//!   `PersistentVolume`, `PersistentVolumeClaim`, `Pod`, `PodTemplate`, `ReplicationController`,
//!   `ResourceQuota`, `Secret`, `Service`, `ServiceAccount`;
//! - admissionregistration.k8s.io/v1 `MutatingWebhookConfiguration`,
//!   `ValidatingWebhookConfiguration`, `ValidatingAdmissionPolicy(Binding)`;
//!   apiextensions.k8s.io/v1 `CustomResourceDefinition`; apiregistration.k8s.io/v1 `APIService`;
//! - apps/v1 `ControllerRevision`, `DaemonSet`, `Deployment`, `ReplicaSet`, `StatefulSet`;
//!   batch/v1 `CronJob`, `Job`; autoscaling/v1 `HorizontalPodAutoscaler` and `Scale` (the body
//!   of every scale subresource); autoscaling/v2 `HorizontalPodAutoscaler`; policy/v1
//!   `PodDisruptionBudget`, `Eviction` (also under policy/v1beta1, whose message is the same);
//! - authentication.k8s.io/v1 `SelfSubjectReview`, `TokenRequest`, `TokenReview`;
//!   authorization.k8s.io/v1 `LocalSubjectAccessReview`, `SelfSubjectAccessReview`,
//!   `SelfSubjectRulesReview`, `SubjectAccessReview`;
//! - certificates.k8s.io/v1 `CertificateSigningRequest`; coordination.k8s.io/v1 `Lease`;
//!   discovery.k8s.io/v1 `EndpointSlice`; events.k8s.io/v1 `Event`;
//!   flowcontrol.apiserver.k8s.io/v1 `FlowSchema`, `PriorityLevelConfiguration`;
//!   networking.k8s.io/v1 `Ingress`, `IngressClass`, `IPAddress`, `NetworkPolicy`,
//!   `ServiceCIDR`; node.k8s.io/v1 `RuntimeClass`; rbac.authorization.k8s.io/v1 `Role`,
//!   `ClusterRole`, `RoleBinding`, `ClusterRoleBinding`; scheduling.k8s.io/v1 `PriorityClass`;
//!   storage.k8s.io/v1 `CSIDriver`, `CSINode`, `CSIStorageCapacity`, `StorageClass`,
//!   `VolumeAttachment`;
//! - `DeleteOptions` under any `apiVersion` (client-go encodes it with the group version of the
//!   client that sends it).
//!
//! Anything else (custom resources, versions the server does not serve) is
//! [`ProtobufError::UnsupportedType`].
//!
//! # Omit-empty policy
//!
//! Go writes every non-pointer field to protobuf, zero or not, so "unset" and "zero" cannot be
//! told apart on the wire. The conversion therefore:
//!
//! - drops empty strings, empty `bytes`, empty repeated fields and empty maps, except the
//!   empty string of a Go `*string` field (the generator's `EMPTY_STRING_IS_SET`), which is
//!   only on the wire when set: `storageClassName: ""` stays, and means "no StorageClass";
//! - keeps numbers and booleans as sent, because pointer fields are only written when set and
//!   their zero is meaningful (`replicas: 0`, `automountServiceAccountToken: false`). The
//!   exception is the generator's `ZERO_IS_UNSET` table: non-pointer `omitempty` Go fields
//!   (`metadata.generation`, `minReadySeconds`, `paused`, `hostPort`, ...), whose zero is dropped
//!   exactly as Go's JSON encoder drops it;
//! - keeps empty messages (`emptyDir: {}`, `resources: {}`, `status: {}` are what Go's JSON
//!   encoder writes for non-pointer structs), except a zero `Time`/`MicroTime`, which is omitted.
//!
//! So `kubectl create namespace foo` becomes
//! `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"foo"},"spec":{},"status":{}}`.
//!
//! # Caveats
//!
//! - A pointer to a named string type set to `""` (`volumeMode`, `pathType`,
//!   `propagationPolicy`, ...) is dropped like a Go zero value; Kubernetes would reject it as
//!   not one of the supported values, kore applies the default instead.
//! - `RawExtension`, `FieldsV1` and apiextensions `JSON` values whose bytes are not JSON are
//!   omitted.
//! - A `Time`/`MicroTime` whose seconds and nanoseconds overflow when normalised is omitted.

mod generated;

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_pb::api::{authentication, authorization, certificates};
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions_v1;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta_v1;
use k8s_pb::apimachinery::pkg::runtime::{RawExtension, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message as _;
use serde_json::{Map, Value};

/// The four bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

/// The only `contentType` an envelope may name besides the empty string.
const PROTOBUF_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf request body could not be decoded.
///
/// None of these is worth retrying: the body is malformed or of a type this server does not
/// accept as protobuf. Answer 400 Bad Request for [`MissingMagic`](Self::MissingMagic),
/// [`BadEnvelope`](Self::BadEnvelope) and [`BadMessage`](Self::BadMessage), and 415 Unsupported
/// Media Type for the others.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("missing protobuf magic prefix")]
    MissingMagic,
    /// The `runtime.Unknown` envelope after the magic is not valid protobuf.
    #[error("bad protobuf envelope")]
    BadEnvelope(#[source] prost::DecodeError),
    /// The envelope names a type this server does not decode from protobuf.
    #[error("unsupported type {api_version}/{kind}")]
    UnsupportedType {
        /// The envelope's `apiVersion`.
        api_version: String,
        /// The envelope's `kind`.
        kind: String,
    },
    /// The envelope's `raw` bytes are not a valid message of the named type.
    #[error("bad protobuf message for {api_version}/{kind}")]
    BadMessage {
        /// The envelope's `apiVersion`.
        api_version: String,
        /// The envelope's `kind`.
        kind: String,
        /// What prost found wrong.
        #[source]
        source: prost::DecodeError,
    },
    /// The envelope says `raw` is compressed or otherwise encoded.
    #[error("content encoding {0:?} not supported")]
    ContentEncodingNotSupported(String),
    /// The envelope says `raw` is not protobuf.
    #[error("content type {0:?} not supported")]
    ContentTypeNotSupported(String),
}

/// Decodes a protobuf request body into its JSON form, with `apiVersion` and `kind` set from the envelope.
///
/// The result is always a JSON object. `apiVersion` and `kind` are those of the envelope (for
/// `DeleteOptions` possibly `v1`, `meta.k8s.io/v1` or the group version of the sending client)
/// and are left out only if the envelope has them empty.
///
/// # Errors
///
/// A [`ProtobufError`] naming the step that failed: magic, envelope, content encoding or type,
/// an unsupported `apiVersion`/`kind`, or a malformed message.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or(ProtobufError::MissingMagic)?;
    let unknown = Unknown::decode(envelope).map_err(ProtobufError::BadEnvelope)?;
    match unknown.content_encoding.as_deref() {
        None | Some("") => {}
        Some(other) => return Err(ProtobufError::ContentEncodingNotSupported(other.to_owned())),
    }
    match unknown.content_type.as_deref() {
        None | Some("" | PROTOBUF_CONTENT_TYPE) => {}
        Some(other) => return Err(ProtobufError::ContentTypeNotSupported(other.to_owned())),
    }
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();

    let Some(decoded) = generated::decode_object(&api_version, &kind, &raw) else {
        return Err(ProtobufError::UnsupportedType { api_version, kind });
    };
    let mut value = match decoded {
        Ok(value) => value,
        Err(source) => {
            return Err(ProtobufError::BadMessage {
                api_version,
                kind,
                source,
            });
        }
    };
    if let Value::Object(fields) = &mut value {
        for (key, field) in [("apiVersion", api_version), ("kind", kind)] {
            if !field.is_empty() {
                fields.insert(key.to_owned(), Value::String(field));
            }
        }
    }
    Ok(value)
}

/// Conversion of a decoded message into the JSON Kubernetes uses for it.
trait ToJson {
    /// The JSON form; `Value::Null` means "omit this field".
    fn to_json(&self) -> Value;
}

/// Decodes `raw` as a `T` and converts it to JSON.
fn decode_as<T: prost::Message + Default + ToJson>(
    raw: &[u8],
) -> Result<Value, prost::DecodeError> {
    T::decode(raw).map(|message| message.to_json())
}

/// A JSON object under construction that applies the omit-empty policy of the module doc.
struct Obj(Map<String, Value>);

impl Obj {
    fn new() -> Self {
        Obj(Map::new())
    }

    fn finish(self) -> Value {
        Value::Object(self.0)
    }

    fn put(&mut self, key: &str, value: Value) {
        self.0.insert(key.to_owned(), value);
    }

    /// A string field; empty strings are dropped.
    fn string(&mut self, key: &str, value: Option<&str>) {
        if let Some(value) = value.filter(|value| !value.is_empty()) {
            self.put(key, Value::String(value.to_owned()));
        }
    }

    /// A string Go holds in a pointer: on the wire only when set, so an empty one is kept.
    fn set_string(&mut self, key: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.put(key, Value::String(value.to_owned()));
        }
    }

    /// A number or boolean, kept as sent (a non-finite double has no JSON form and is dropped).
    fn scalar<T: Into<Value>>(&mut self, key: &str, value: Option<T>) {
        if let Some(value) = value.map(Into::into).filter(|value| !value.is_null()) {
            self.put(key, value);
        }
    }

    /// A number or boolean whose zero value means "unset" (a non-pointer `omitempty` Go field).
    fn nonzero<T: Into<Value> + Default + PartialEq>(&mut self, key: &str, value: Option<T>) {
        self.scalar(key, value.filter(|value| *value != T::default()));
    }

    /// A `bytes` field, as standard base64; empty values are dropped.
    fn bytes(&mut self, key: &str, value: Option<&[u8]>) {
        if let Some(value) = value.filter(|value| !value.is_empty()) {
            self.put(key, Value::String(BASE64.encode(value)));
        }
    }

    /// A message field; kept even when empty, unless its JSON form is `null`.
    fn message<T: ToJson>(&mut self, key: &str, value: Option<&T>) {
        if let Some(value) = value.map(ToJson::to_json).filter(|value| !value.is_null()) {
            self.put(key, value);
        }
    }

    /// A message Go embeds with `json:",inline"`: its fields become fields of this object.
    fn inline<T: ToJson>(&mut self, value: Option<&T>) {
        if let Some(Value::Object(fields)) = value.map(ToJson::to_json) {
            self.0.extend(fields);
        }
    }

    fn strings(&mut self, key: &str, values: &[String]) {
        if !values.is_empty() {
            self.put(key, values.iter().map(String::as_str).collect());
        }
    }

    fn scalars<T: Into<Value> + Copy>(&mut self, key: &str, values: &[T]) {
        if !values.is_empty() {
            self.put(key, values.iter().copied().collect());
        }
    }

    fn messages<T: ToJson>(&mut self, key: &str, values: &[T]) {
        if !values.is_empty() {
            self.put(key, values.iter().map(ToJson::to_json).collect());
        }
    }

    fn string_map(&mut self, key: &str, map: &BTreeMap<String, String>) {
        self.map(key, map, |value| Value::String(value.clone()));
    }

    fn bytes_map(&mut self, key: &str, map: &BTreeMap<String, Vec<u8>>) {
        self.map(key, map, |value| Value::String(BASE64.encode(value)));
    }

    fn message_map<T: ToJson>(&mut self, key: &str, map: &BTreeMap<String, T>) {
        self.map(key, map, ToJson::to_json);
    }

    fn map<T>(&mut self, key: &str, map: &BTreeMap<String, T>, convert: impl Fn(&T) -> Value) {
        if !map.is_empty() {
            let object = map.iter().map(|(k, v)| (k.clone(), convert(v))).collect();
            self.put(key, Value::Object(object));
        }
    }
}

impl ToJson for meta_v1::Time {
    /// RFC 3339 in UTC with whole seconds (`2024-05-01T12:00:00Z`); the zero time is omitted.
    fn to_json(&self) -> Value {
        format_time(self.seconds, self.nanos, false).map_or(Value::Null, Value::String)
    }
}

impl ToJson for meta_v1::MicroTime {
    /// RFC 3339 in UTC with six fractional digits; the zero time is omitted.
    fn to_json(&self) -> Value {
        format_time(self.seconds, self.nanos, true).map_or(Value::Null, Value::String)
    }
}

impl ToJson for meta_v1::Duration {
    /// Go's `time.Duration` string (`1h0m0s`, `1.5s`, `300ms`).
    fn to_json(&self) -> Value {
        Value::String(format_duration(self.duration.unwrap_or_default()))
    }
}

impl ToJson for meta_v1::FieldsV1 {
    fn to_json(&self) -> Value {
        embedded_json(self.raw.as_deref())
    }
}

impl ToJson for RawExtension {
    fn to_json(&self) -> Value {
        embedded_json(self.raw.as_deref())
    }
}

impl ToJson for apiextensions_v1::Json {
    fn to_json(&self) -> Value {
        embedded_json(self.raw.as_deref())
    }
}

impl ToJson for IntOrString {
    /// `type` 1 is a string, anything else the integer.
    fn to_json(&self) -> Value {
        if self.r#type == Some(1) {
            Value::String(self.str_val.clone().unwrap_or_default())
        } else {
            Value::from(self.int_val.unwrap_or_default())
        }
    }
}

impl ToJson for Quantity {
    fn to_json(&self) -> Value {
        match self.string.as_deref() {
            None | Some("") => Value::Null,
            Some(quantity) => Value::String(quantity.to_owned()),
        }
    }
}

impl ToJson for authentication::v1::ExtraValue {
    /// Go's `type ExtraValue []string`: an array.
    fn to_json(&self) -> Value {
        self.items.iter().map(String::as_str).collect()
    }
}

impl ToJson for authorization::v1::ExtraValue {
    /// Go's `type ExtraValue []string`: an array.
    fn to_json(&self) -> Value {
        self.items.iter().map(String::as_str).collect()
    }
}

impl ToJson for certificates::v1::ExtraValue {
    /// Go's `type ExtraValue []string`: an array.
    fn to_json(&self) -> Value {
        self.items.iter().map(String::as_str).collect()
    }
}

impl ToJson for apiextensions_v1::JsonSchemaPropsOrArray {
    /// The array of schemas if there is one, else the single schema.
    fn to_json(&self) -> Value {
        if self.j_son_schemas.is_empty() {
            self.schema.as_deref().map_or(Value::Null, ToJson::to_json)
        } else {
            self.j_son_schemas.iter().map(ToJson::to_json).collect()
        }
    }
}

impl ToJson for apiextensions_v1::JsonSchemaPropsOrBool {
    /// The schema if there is one, else the boolean.
    fn to_json(&self) -> Value {
        match self.schema.as_deref() {
            Some(schema) => schema.to_json(),
            None => Value::Bool(self.allows.unwrap_or_default()),
        }
    }
}

impl ToJson for apiextensions_v1::JsonSchemaPropsOrStringArray {
    /// The property names if there are any, else the schema.
    fn to_json(&self) -> Value {
        if self.property.is_empty() {
            self.schema.as_ref().map_or(Value::Null, ToJson::to_json)
        } else {
            self.property.iter().map(String::as_str).collect()
        }
    }
}

/// Embedded JSON bytes as a value; `null` (omitted) if absent or not JSON.
fn embedded_json(raw: Option<&[u8]>) -> Value {
    raw.and_then(|raw| serde_json::from_slice(raw).ok())
        .unwrap_or(Value::Null)
}

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// Formats a protobuf timestamp as RFC 3339 in UTC, as Go's `metav1.Time` (whole seconds) or
/// `metav1.MicroTime` (six fractional digits) marshals it to JSON.
///
/// `None` for the zero time (both parts zero or absent), which Go reads back as "unset", and
/// for values that overflow when normalised.
fn format_time(seconds: Option<i64>, nanos: Option<i32>, micros: bool) -> Option<String> {
    let (seconds, nanos) = (
        seconds.unwrap_or_default(),
        i64::from(nanos.unwrap_or_default()),
    );
    if seconds == 0 && nanos == 0 {
        return None;
    }
    // Like Go's `time.Unix`, accept nanoseconds outside [0, 1e9) by carrying into seconds.
    let seconds = seconds.checked_add(nanos.div_euclid(NANOS_PER_SECOND))?;
    let nanos = nanos.rem_euclid(NANOS_PER_SECOND);

    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let second_of_day = seconds.rem_euclid(86_400);
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
    );
    // Go pads the year to four digits and puts a minus sign in front of negative years.
    let sign = if year < 0 { "-" } else { "" };
    let year = year.unsigned_abs();
    let fraction = if micros {
        format!(".{:06}", nanos / 1000)
    } else {
        String::new()
    };
    Some(format!(
        "{sign}{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{fraction}Z"
    ))
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01.
///
/// Works in 400-year eras (146 097 days each) of years that start on March 1st, so that the
/// leap day is the last day of a year and month lengths repeat in a 5-month pattern.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    // 0000-03-01 is 719 468 days before 1970-01-01.
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    // Every 4th year is a leap year, except every 100th, except every 400th; the last day of
    // an era is the 400th year's leap day.
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March: 31, 30, 31, 30, 31 | 31, 30, 31, 30, 31 | 31, 28/29 (153 days per five).
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + i64::from(month <= 2);
    (year, month, day)
}

/// Formats nanoseconds the way Go's `time.Duration.String` does.
fn format_duration(nanos: i64) -> String {
    let sign = if nanos < 0 { "-" } else { "" };
    let total = nanos.unsigned_abs();
    if total == 0 {
        return "0s".to_owned();
    }
    if total < 1_000 {
        return format!("{sign}{total}ns");
    }
    if total < 1_000_000 {
        return format!("{sign}{}µs", decimal(total, 1_000, 3));
    }
    if total < 1_000_000_000 {
        return format!("{sign}{}ms", decimal(total, 1_000_000, 6));
    }
    let seconds = decimal(total % 60_000_000_000, 1_000_000_000, 9);
    let whole_minutes = total / 60_000_000_000;
    let (hours, minutes) = (whole_minutes / 60, whole_minutes % 60);
    if hours > 0 {
        format!("{sign}{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{sign}{minutes}m{seconds}s")
    } else {
        format!("{sign}{seconds}s")
    }
}

/// `value / unit` with up to `digits` fractional digits, trailing zeros removed.
fn decimal(value: u64, unit: u64, digits: usize) -> String {
    let (whole, fraction) = (value / unit, value % unit);
    if fraction == 0 {
        return whole.to_string();
    }
    let fraction = format!("{fraction:0digits$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests;
