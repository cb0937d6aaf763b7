//! apiregistration.k8s.io/v1 APIServices against an in-process kore-apiserver: one local
//! APIService per served group/version, kept in step with CRDs; user-created ones stored.

use std::time::Duration;

use crate::common::assert_invalid;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kore_testenv::TestEnv;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn every_served_group_version_has_a_local_available_apiservice() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<APIService> = Api::all(env.client());
    let core = api.get("v1.").await.expect("v1. exists");
    let spec = core.spec.as_ref().expect("spec");
    assert!(spec.service.is_none());
    assert_eq!(spec.group_priority_minimum, 18000);
    assert_eq!(spec.version_priority, 1);
    let apps = api.get("v1.apps").await.expect("v1.apps exists");
    assert_eq!(
        apps.spec.as_ref().expect("spec").group_priority_minimum,
        17800
    );
    let hpa = api.get("v2.autoscaling").await.expect("v2.autoscaling");
    assert_eq!(hpa.spec.as_ref().expect("spec").version_priority, 30);
    let status = kore_testenv::wait_for(WAIT, || async {
        let s = api.get("v1.apps").await.ok()?;
        let conditions = s.status?.conditions?;
        conditions.into_iter().find(|c| c.type_ == "Available")
    })
    .await
    .expect("Available");
    assert_eq!(
        (status.status.as_str(), status.reason.as_deref()),
        ("True", Some("Local"))
    );
    let all = api.list(&ListParams::default()).await.expect("list");
    assert!(all.items.len() >= 20, "{}", all.items.len());

    // A CRD's group version comes and goes with the CRD.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let svc = kore_testenv::wait_for(WAIT, || async {
        api.get("v1alpha1.example.com").await.ok()
    })
    .await
    .expect("the CRD's APIService appears");
    let spec = svc.spec.as_ref().expect("spec");
    assert_eq!(
        (spec.group_priority_minimum, spec.version_priority),
        (1000, 100)
    );
    assert_eq!(
        svc.metadata.labels.as_ref().expect("labels")["kube-aggregator.kubernetes.io/automanaged"],
        "true"
    );
    crds.delete("gadgets.example.com", &DeleteParams::default())
        .await
        .expect("delete crd");
    kore_testenv::wait_for(WAIT, || async {
        api.get_opt("v1alpha1.example.com")
            .await
            .ok()
            .and_then(|o| o.is_none().then_some(()))
    })
    .await
    .expect("the CRD's APIService goes");
}

#[tokio::test]
async fn user_apiservices_are_stored_and_validated() {
    let env = TestEnv::start().await.expect("start");
    let api: Api<APIService> = Api::all(env.client());
    let svc: APIService = serde_json::from_value(json!({
        "metadata": {"name": "v1beta1.metrics.k8s.io"},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
            "service": {"namespace": "kube-system", "name": "metrics-server"},
            "insecureSkipTLSVerify": true, "groupPriorityMinimum": 100, "versionPriority": 100}
    }))
    .expect("apiservice");
    let created = api
        .create(&PostParams::default(), &svc)
        .await
        .expect("create");
    assert_eq!(
        created
            .spec
            .as_ref()
            .expect("spec")
            .service
            .as_ref()
            .expect("service")
            .name
            .as_deref(),
        Some("metrics-server")
    );
    let mut bad = svc.clone();
    bad.metadata.name = Some("v1.wrong".into());
    let err = api
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("name must be version.group");
    assert_invalid(
        err,
        "metadata.name",
        "must be `spec.version+\".\"+spec.group`",
    );
    let mut bad = svc;
    bad.metadata.name = Some("v1beta2.metrics.k8s.io".into());
    bad.spec.as_mut().expect("spec").version = Some("v1beta2".into());
    bad.spec.as_mut().expect("spec").group_priority_minimum = 0;
    let err = api
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("priority");
    assert_invalid(err, "spec.groupPriorityMinimum", "must be positive");
}
