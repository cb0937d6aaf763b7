//! sample-controller: for each `Foo`, a Deployment with the Foo's replicas, and the
//! Deployment's available replicas in the Foo's status. Wire-compatible with the Go
//! sample-controller: the same CRD, the same Deployment, the same events, so either
//! controller can run against objects the other wrote.
//!
//! Start with [`register`] (the controller on a [`kore_runtime::Manager`]) and
//! [`operator`] (CRD, RBAC rules and sample for manifests and tests). [`types`] holds the
//! CRD, [`reconcile`] the reconcile and its contract. The design and the compatibility
//! contract are in `docs/design/sample-controller.md`.

#![allow(
    clippy::disallowed_names,
    reason = "the custom resource is called Foo, so `foo` is its natural variable name"
)]

pub mod reconcile;
pub mod types;

use k8s_openapi::api::apps::v1::Deployment;
use kore_operator::rule;
use kore_runtime::events::{Recorder, Reporter};
use kore_runtime::{CachedClient, Controller, InformerConfig};

pub use reconcile::FooReconciler;
pub use types::{Foo, FooSpec, FooStatus, crd};

/// The operator's name.
pub const NAME: &str = "sample-controller";

/// The controller name events are reported under.
pub const REPORTING_CONTROLLER: &str = "samplecontroller.k8s.io/sample-controller";

/// What deployment and tests need to know about the operator. The rules are exactly the
/// requests [`register`]'s controller makes: list and watch of Foos and Deployments (its
/// informers; it never GETs), merge patches of Foo status and Deployment replicas,
/// Deployment creates, and events (created, then patched for repeats).
pub fn operator() -> kore_operator::Operator {
    kore_operator::Operator {
        name: NAME,
        crds: vec![crd()],
        rules: vec![
            rule("samplecontroller.k8s.io", &["foos"], &["list", "watch"]),
            rule("samplecontroller.k8s.io", &["foos/status"], &["patch"]),
            rule(
                "apps",
                &["deployments"],
                &["list", "watch", "create", "patch"],
            ),
            kore_operator::events_rule(),
        ],
        samples: vec![sample()],
    }
}

/// The Go sample-controller's example Foo: `example-foo`, one replica of a Deployment of
/// the same name.
pub fn sample() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "example-foo"},
        "spec": {"deploymentName": "example-foo", "replicas": 1},
    })
}

/// How the operator runs (shared by every kore operator).
pub use kore_operator::Options;

/// Adds the operator's controllers to `manager`, reporting to `metrics` (which the caller
/// registers once in the manager's registry). They run when the manager runs, on the leader.
///
/// One controller, `sample-controller`: Foos, and the Deployments they control, in
/// `options.namespace` or everywhere. The Foo informer it creates defaults a missing `spec`
/// to `{}`; if something registered a Foo informer of the same scope before, that one is
/// shared and the default does not apply to it.
///
/// ```no_run
/// # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use kore_runtime::Manager;
/// use kore_runtime::manager::LeaseConfig;
/// use kore_runtime::metrics::Metrics;
///
/// let mut manager = Manager::builder(client)
///     .leader_election(LeaseConfig::new("kore-system", kore_sample_controller::NAME))
///     .build();
/// let metrics = Metrics::new();
/// metrics.register(manager.registry_mut());
/// let options = kore_sample_controller::Options::default().namespace("demo");
/// kore_sample_controller::register(&mut manager, &metrics, &options);
/// manager.run().await?;
/// # Ok(())
/// # }
/// ```
pub fn register(
    manager: &mut kore_runtime::Manager,
    metrics: &kore_runtime::metrics::Metrics,
    options: &Options,
) {
    let scope = || match &options.namespace {
        Some(ns) => InformerConfig::default().namespace(ns.clone()),
        None => InformerConfig::default(),
    };
    // The Go CRD does not require `spec`; a Foo without one reads as an empty spec (and is
    // then refused for its missing deploymentName) instead of failing to decode.
    let foos = scope().transform(|obj| {
        if let Some(obj) = obj.as_object_mut() {
            let spec = obj.entry("spec").or_insert_with(|| serde_json::json!({}));
            if spec.is_null() {
                *spec = serde_json::json!({});
            }
        }
    });
    let client = manager.client();
    let deployments = manager.informers().get::<Deployment>(scope());
    let builder = Controller::for_with::<Foo>(manager.informers(), foos)
        .named(NAME)
        .owns_with::<Deployment>(scope())
        .max_concurrent_reconciles(options.max_concurrent_reconciles)
        .metrics(metrics.clone());
    let reconciler = FooReconciler::new(
        CachedClient::new(client.clone(), builder.informer().clone()),
        CachedClient::new(client.clone(), deployments),
        Recorder::new(client, Reporter::new(REPORTING_CONTROLLER)),
    );
    manager.add(Box::new(builder.build(reconciler)));
}
