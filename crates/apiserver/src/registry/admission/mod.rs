//! Admission: the stages a write passes after it is decoded and before it is stored.
//!
//! Every create, update, patch and apply runs, in this order (see `registry/rest/`):
//!
//! 1. **mutating admission** ([`Admission::mutate`]): stages that may change the object. The
//!    built-in ones are Kubernetes' default plugins that shape pods and claims: container
//!    defaults from LimitRanges ([`limit_ranger`]), the pod's
//!    ServiceAccount and token volume ([`service_account`]), its priority ([`priority`]), the
//!    default not-ready/unreachable tolerations ([`tolerations`]) and a claim's default
//!    StorageClass ([`storage_class`]); mutating webhooks and policies will be added here.
//! 2. **defaults, pruning and validation**: the resource's [`Strategy`](super::Strategy)
//!    (and a custom resource's structural schema and CEL rules).
//! 3. **validating admission** ([`Admission::validate`]): stages that may only refuse. The one
//!    stage built in is RBAC escalation prevention ([`escalation`]), which needs the object as it
//!    will be stored and the user who writes it; validating webhooks and policies come after it.
//!
//! Then the verb writes to storage. A stage refuses with an [`ApiError`] that the client sees
//! as the request's answer. Stages see a dry run like any other write and must not act on it
//! outside the object.

pub mod escalation;
pub mod limit_ranger;
mod pods;
pub mod priority;
pub mod service_account;
pub mod storage_class;
pub mod tolerations;

use std::sync::Arc;

use serde_json::Value;

use super::resource::Resource;
use crate::api::error::ApiError;
use crate::api::user::User;

/// What a write does to its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `create` (also an update or apply that creates).
    Create,
    /// `update`, `patch`, `apply` of an existing object.
    Update,
}

/// One write as the admission stages see it.
#[derive(Clone, Copy, Debug)]
pub struct Attributes<'a> {
    /// Who writes; `None` for the server's own writes (its controllers), which are not admitted
    /// against a user.
    pub user: Option<&'a User>,
    /// The resource written.
    pub res: &'a Resource,
    /// What the write does.
    pub operation: Operation,
    /// The namespace from the request.
    pub namespace: Option<&'a str>,
    /// The name from the request's path (empty for a create, which names the object in its body).
    pub name: &'a str,
    /// The stored object an update replaces.
    pub old: Option<&'a Value>,
}

/// A stage that may change the object being written.
pub trait Mutating: Send + Sync {
    /// The stage's name, for logs and errors.
    fn name(&self) -> &'static str;
    /// Changes `object` or refuses the write.
    fn admit(&self, attrs: &Attributes<'_>, object: &mut Value) -> Result<(), ApiError>;
}

/// A stage that may only refuse the write.
pub trait Validating: Send + Sync {
    /// The stage's name, for logs and errors.
    fn name(&self) -> &'static str;
    /// Refuses the write of `object` (as it will be stored: after the mutating stages,
    /// defaults and validation), or lets it through.
    fn validate(&self, attrs: &Attributes<'_>, object: &Value) -> Result<(), ApiError>;
}

/// The admission stages of a registry, in the order they run.
#[derive(Clone, Default)]
pub struct Admission {
    mutating: Vec<Arc<dyn Mutating>>,
    validating: Vec<Arc<dyn Validating>>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field(
                "mutating",
                &self.mutating.iter().map(|s| s.name()).collect::<Vec<_>>(),
            )
            .field(
                "validating",
                &self.validating.iter().map(|s| s.name()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Admission {
    /// No stages.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a mutating stage; stages run in the order they were added.
    pub fn with_mutating(mut self, stage: Arc<dyn Mutating>) -> Self {
        self.mutating.push(stage);
        self
    }

    /// Appends a validating stage; stages run in the order they were added.
    pub fn with_validating(mut self, stage: Arc<dyn Validating>) -> Self {
        self.validating.push(stage);
        self
    }

    /// The names of the stages, mutating then validating.
    pub fn stage_names(&self) -> Vec<&'static str> {
        self.mutating
            .iter()
            .map(|s| s.name())
            .chain(self.validating.iter().map(|s| s.name()))
            .collect()
    }

    /// Runs the mutating stages over `object`.
    pub fn mutate(&self, attrs: &Attributes<'_>, object: &mut Value) -> Result<(), ApiError> {
        for stage in &self.mutating {
            stage.admit(attrs, object)?;
        }
        Ok(())
    }

    /// Runs the validating stages; the first refusal is the answer.
    pub fn validate(&self, attrs: &Attributes<'_>, object: &Value) -> Result<(), ApiError> {
        for stage in &self.validating {
            stage.validate(attrs, object)?;
        }
        Ok(())
    }
}
