//! The reconcile of one Foo: its Deployment exists, is controlled by the Foo, has the Foo's
//! replicas, and the Foo's status holds the Deployment's available replicas.
//!
//! Reads come from the caches (Foos and Deployments); writes go through
//! [`CachedClient`]s, so a reconcile that runs again before the watch events of its own
//! writes arrive sees them and does not repeat them.
//!
//! # Guarantees
//! - A reconcile that finds everything in step sends nothing: no write, no event.
//! - A Deployment not controlled by the Foo (by UID, as the Go controller's
//!   `metav1.IsControlledBy`) is never written: the Foo gets a Warning event
//!   [`REASON_RESOURCE_EXISTS`] and the reconcile fails with [`Error::ResourceExists`], so
//!   it is retried with the controller's exponential backoff, as the Go controller does.
//! - A Foo without `spec.deploymentName` is logged, gets a Warning event
//!   [`REASON_INVALID_SPEC`] and is dropped (not retried) until it changes.
//! - A Normal [`REASON_SYNCED`] event is recorded only by a reconcile that wrote something
//!   (created or scaled the Deployment, or wrote the status); the Go controller records one
//!   per reconcile, which here would mean one per watch event of every Foo and Deployment.
//!
//! # Caveats
//! - Only the replicas are kept in step, as in the Go controller: other edits of the
//!   Deployment (its image, its labels) are left alone.
//! - Events are best effort: a failure to record one is logged, not retried.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kore_runtime::controller::{Action, ReconcileError, Reconciler, Request};
use kore_runtime::events::{Event, EventType, Recorder};
use kore_runtime::{CachedClient, ObjectKey};
use kube::Resource as _;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::types::{Foo, FooStatus};

/// The field manager of every write, the Go controller's.
pub const FIELD_MANAGER: &str = "sample-controller";
/// Reason of the Normal event a reconcile that changed something records.
pub const REASON_SYNCED: &str = "Synced";
/// Its note.
pub const MESSAGE_SYNCED: &str = "Foo synced successfully";
/// Reason of the Warning event when a Deployment of the Foo's name is not the Foo's.
pub const REASON_RESOURCE_EXISTS: &str = "ErrResourceExists";
/// Reason of the Warning event when a Foo names no Deployment.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// The action every event of this controller names.
pub const ACTION_SYNC: &str = "Sync";

/// The image of the Deployment's only container.
pub const IMAGE: &str = "nginx:latest";

/// Why a reconcile failed. Every variant is retried with the controller's backoff.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A Deployment of the Foo's name exists and is not controlled by the Foo; it is left
    /// alone, and the Foo is retried with backoff until it goes away or is handed over.
    #[error("Resource {name:?} already exists and is not managed by Foo")]
    ResourceExists {
        /// The Deployment's name.
        name: String,
    },
    /// Creating the Deployment failed (a 409 means the cache had not seen it yet).
    #[error("creating deployment {name}")]
    CreateDeployment {
        /// The Deployment's name.
        name: String,
        /// The client's error.
        #[source]
        source: kore_runtime::client::Error,
    },
    /// Scaling the Deployment failed (a 409 means the cache was stale).
    #[error("updating the replicas of deployment {name}")]
    ScaleDeployment {
        /// The Deployment's name.
        name: String,
        /// The client's error.
        #[source]
        source: kore_runtime::client::Error,
    },
    /// Writing the Foo's status failed (a 409 means the cache was stale).
    #[error("writing the status of foo {name}")]
    WriteStatus {
        /// The Foo's name.
        name: String,
        /// The client's error.
        #[source]
        source: kore_runtime::client::Error,
    },
}

/// The labels of the Deployment's selector and pod template for the Foo named `foo`.
pub fn labels(foo: &str) -> std::collections::BTreeMap<String, String> {
    [("app", "nginx"), ("controller", foo)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// The controller reference to `foo` that its Deployment carries.
pub fn owner_reference(foo: &Foo) -> OwnerReference {
    OwnerReference {
        api_version: Foo::api_version(&()).into_owned(),
        kind: Foo::kind(&()).into_owned(),
        name: foo.metadata.name.clone().unwrap_or_default(),
        uid: foo.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The Deployment the Go controller makes for `foo`: named `spec.deploymentName` in the
/// Foo's namespace, controlled by it, one `nginx` container, the Foo's replicas.
pub fn new_deployment(foo: &Foo) -> Deployment {
    let labels = labels(foo.metadata.name.as_deref().unwrap_or_default());
    Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.metadata.namespace.clone(),
            owner_references: Some(vec![owner_reference(foo)]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: foo.spec.replicas,
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".to_owned(),
                        image: Some(IMAGE.to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// Whether `deployment`'s controller reference names `foo` (by UID, as
/// `metav1.IsControlledBy` decides).
pub fn is_controlled_by(deployment: &Deployment, foo: &Foo) -> bool {
    let Some(uid) = foo.metadata.uid.as_deref() else {
        return false;
    };
    deployment
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// The status `foo` should have given its Deployment.
pub fn desired_status(deployment: &Deployment) -> FooStatus {
    FooStatus {
        available_replicas: deployment
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0),
    }
}

/// Reconciles Foos; see the [module docs](self).
#[derive(Clone, Debug)]
pub struct FooReconciler {
    foos: CachedClient<Foo>,
    deployments: CachedClient<Deployment>,
    recorder: Recorder,
}

impl FooReconciler {
    /// A reconciler reading and writing Foos and Deployments through these clients and
    /// recording events with `recorder`.
    pub fn new(
        foos: CachedClient<Foo>,
        deployments: CachedClient<Deployment>,
        recorder: Recorder,
    ) -> Self {
        FooReconciler {
            foos,
            deployments,
            recorder,
        }
    }

    async fn event(&self, foo: &Foo, type_: EventType, reason: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            action: ACTION_SYNC.to_owned(),
            note: Some(note),
            related: None,
        };
        if let Err(error) = self.recorder.publish(&event, &foo.object_ref(&())).await {
            tracing::warn!(%error, reason, "recording an event failed");
        }
    }

    async fn sync(&self, foo: &Foo) -> Result<Action, Error> {
        let foo_name = foo.metadata.name.clone().unwrap_or_default();
        let namespace = foo.metadata.namespace.clone().unwrap_or_default();
        let name = foo.spec.deployment_name.as_str();
        if name.is_empty() {
            // The Go controller logs and drops such a Foo; it comes back when it changes.
            tracing::warn!(foo = %foo_name, namespace, "spec.deploymentName must be specified");
            self.event(
                foo,
                EventType::Warning,
                REASON_INVALID_SPEC,
                "spec.deploymentName must be specified".to_owned(),
            )
            .await;
            return Ok(Action::done());
        }
        let key = ObjectKey::namespaced(namespace, name);
        let mut changed = false;
        let deployment: Arc<Deployment> = match self.deployments.get(&key) {
            None => {
                changed = true;
                let pp = PostParams {
                    field_manager: Some(FIELD_MANAGER.to_owned()),
                    ..PostParams::default()
                };
                self.deployments
                    .create(&new_deployment(foo), &pp)
                    .await
                    .map_err(|source| Error::CreateDeployment {
                        name: name.to_owned(),
                        source,
                    })?
            }
            Some(existing) if !is_controlled_by(&existing, foo) => {
                let error = Error::ResourceExists {
                    name: name.to_owned(),
                };
                self.event(
                    foo,
                    EventType::Warning,
                    REASON_RESOURCE_EXISTS,
                    error.to_string(),
                )
                .await;
                return Err(error);
            }
            Some(existing) => {
                let current = existing.spec.as_ref().and_then(|s| s.replicas);
                match foo.spec.replicas {
                    Some(wanted) if current != Some(wanted) => {
                        changed = true;
                        tracing::debug!(deployment = name, ?current, wanted, "scaling");
                        let patch = json!({
                            "metadata": {"resourceVersion": existing.metadata.resource_version},
                            "spec": {"replicas": wanted},
                        });
                        self.deployments
                            .patch(&key, &patch_params(), &Patch::Merge(&patch))
                            .await
                            .map_err(|source| Error::ScaleDeployment {
                                name: name.to_owned(),
                                source,
                            })?
                    }
                    _ => existing,
                }
            }
        };

        let status = desired_status(&deployment);
        if foo.status != Some(status) {
            changed = true;
            let patch = json!({
                "metadata": {"resourceVersion": foo.metadata.resource_version},
                "status": status,
            });
            self.foos
                .patch_status(&ObjectKey::of(foo), &patch_params(), &Patch::Merge(&patch))
                .await
                .map_err(|source| Error::WriteStatus {
                    name: foo_name,
                    source,
                })?;
        }
        if changed {
            self.event(
                foo,
                EventType::Normal,
                REASON_SYNCED,
                MESSAGE_SYNCED.to_owned(),
            )
            .await;
        }
        Ok(Action::done())
    }
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

impl Reconciler<Foo> for FooReconciler {
    type Error = Error;

    async fn reconcile(&self, request: Request<Foo>) -> Result<Action, ReconcileError<Error>> {
        // A deleted Foo's Deployment goes with it: the garbage collector follows the
        // controller reference.
        let Some(foo) = request.object() else {
            return Ok(Action::done());
        };
        if foo.metadata.deletion_timestamp.is_some() {
            return Ok(Action::done());
        }
        Ok(self.sync(&foo).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::FooSpec;

    fn foo(uid: &str) -> Foo {
        let mut foo = Foo::new(
            "example-foo",
            FooSpec {
                deployment_name: "example-dep".to_owned(),
                replicas: Some(3),
            },
        );
        foo.metadata.namespace = Some("ns".to_owned());
        foo.metadata.uid = Some(uid.to_owned());
        foo
    }

    #[test]
    fn the_deployment_is_the_go_controllers_template_with_a_blocking_controller_reference() {
        let d = serde_json::to_value(new_deployment(&foo("u1"))).expect("serializes");
        let labels = json!({"app": "nginx", "controller": "example-foo"});
        assert_eq!(d["metadata"]["name"], "example-dep");
        assert_eq!(d["metadata"]["namespace"], "ns");
        assert_eq!(
            d["metadata"]["ownerReferences"],
            json!([{
                "apiVersion": "samplecontroller.k8s.io/v1alpha1",
                "kind": "Foo",
                "name": "example-foo",
                "uid": "u1",
                "controller": true,
                "blockOwnerDeletion": true,
            }])
        );
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(d["spec"]["selector"], json!({"matchLabels": labels}));
        assert_eq!(d["spec"]["template"]["metadata"]["labels"], labels);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"],
            json!([{"name": "nginx", "image": "nginx:latest"}])
        );
    }

    #[test]
    fn control_is_decided_by_the_controller_references_uid_only() {
        let mine = new_deployment(&foo("u1"));
        assert!(is_controlled_by(&mine, &foo("u1")));
        assert!(!is_controlled_by(&mine, &foo("u2")));
        let mut not_controller = mine.clone();
        if let Some(r) = not_controller
            .metadata
            .owner_references
            .as_mut()
            .and_then(|r| r.first_mut())
        {
            r.controller = None;
        }
        assert!(!is_controlled_by(&not_controller, &foo("u1")));
    }

    #[test]
    fn the_status_is_the_deployments_available_replicas_or_zero() {
        let mut d = new_deployment(&foo("u1"));
        assert_eq!(desired_status(&d).available_replicas, 0);
        d.status = Some(k8s_openapi::api::apps::v1::DeploymentStatus {
            available_replicas: Some(2),
            ..Default::default()
        });
        assert_eq!(desired_status(&d).available_replicas, 2);
    }

    #[test]
    fn the_resource_exists_message_is_the_go_controllers() {
        let e = Error::ResourceExists {
            name: "web".to_owned(),
        };
        assert_eq!(
            e.to_string(),
            r#"Resource "web" already exists and is not managed by Foo"#
        );
    }
}
