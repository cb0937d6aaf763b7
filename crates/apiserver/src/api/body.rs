//! What a request body is encoded as: an object (JSON, YAML, protobuf) or a patch of one of
//! the four kinds. HTTP reads it from `Content-Type`; decoding and patching act on it.

/// The encoding of a request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyType {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
    /// `application/json-patch+json`.
    JsonPatch,
    /// `application/merge-patch+json`.
    MergePatch,
    /// `application/strategic-merge-patch+json`.
    StrategicMergePatch,
    /// `application/apply-patch+yaml`.
    ApplyPatch,
}
