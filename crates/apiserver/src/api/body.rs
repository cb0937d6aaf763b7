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

impl BodyType {
    /// Reads a `Content-Type` (absent means JSON); the media type itself when it is not one
    /// the server decodes.
    pub fn from_content_type(content_type: Option<&str>) -> Result<BodyType, String> {
        let raw = content_type.unwrap_or("application/json");
        let essence = raw
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        Ok(match essence.as_str() {
            "" | "application/json" => BodyType::Json,
            "application/yaml" | "application/x-yaml" | "text/yaml" => BodyType::Yaml,
            "application/vnd.kubernetes.protobuf" => BodyType::Protobuf,
            "application/json-patch+json" => BodyType::JsonPatch,
            "application/merge-patch+json" => BodyType::MergePatch,
            "application/strategic-merge-patch+json" => BodyType::StrategicMergePatch,
            "application/apply-patch+yaml" => BodyType::ApplyPatch,
            other => return Err(other.to_string()),
        })
    }
}
