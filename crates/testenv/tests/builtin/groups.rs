//! The smaller built-in groups: policy/v1 PodDisruptionBudget, scheduling.k8s.io/v1
//! PriorityClass, networking.k8s.io/v1, discovery.k8s.io/v1 EndpointSlice, storage.k8s.io/v1,
//! node.k8s.io/v1 RuntimeClass, certificates.k8s.io/v1 and admissionregistration.k8s.io/v1 —
//! verbs, Kubernetes' defaults, common validation errors and Tables.

use crate::common::{assert_invalid, cell, crud, table};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass, NetworkPolicy};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use kore_testenv::TestEnv;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn from<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

#[tokio::test]
async fn pod_disruption_budgets() {
    let env = TestEnv::start().await.expect("start");
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    let pdb = |name: &str| -> PodDisruptionBudget {
        from(
            json!({"metadata": {"name": name}, "spec": {"minAvailable": 1,
            "selector": {"matchLabels": {"app": "web"}}}}),
        )
    };
    crud(&pdbs, &pdb("tmp"), json!({"spec": {"minAvailable": "50%"}})).await;
    let created = pdbs
        .create(&PostParams::default(), &pdb("web"))
        .await
        .expect("create");
    let v = serde_json::to_value(&created).expect("json");
    assert_eq!(
        v["status"],
        json!({"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0})
    );
    assert_eq!(v["metadata"]["generation"], 1);
    let err = pdbs
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bad"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}})),
        )
        .await
        .expect_err("both set");
    assert_invalid(
        err,
        "spec",
        "minAvailable and maxUnavailable cannot be both set",
    );
    let (columns, rows) = table(
        &env,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
    )
    .await;
    assert_eq!(
        columns,
        [
            "Name",
            "Min Available",
            "Max Unavailable",
            "Allowed Disruptions",
            "Age"
        ]
    );
    assert_eq!(cell(&columns, &rows, "Min Available"), "1");
    assert_eq!(cell(&columns, &rows, "Max Unavailable"), "N/A");
}

#[tokio::test]
async fn priority_classes() {
    let env = TestEnv::start().await.expect("start");
    let pcs: Api<PriorityClass> = Api::all(env.client());
    let pc = |name: &str, value: i64| -> PriorityClass {
        from(json!({"metadata": {"name": name}, "value": value}))
    };
    crud(&pcs, &pc("tmp", 10), json!({"description": "testing"})).await;
    let created = pcs
        .create(&PostParams::default(), &pc("high", 1000))
        .await
        .expect("create");
    assert_eq!(
        created.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );
    let err = pcs
        .create(&PostParams::default(), &pc("too-high", 2_000_000_000))
        .await
        .expect_err("above the user maximum");
    assert_invalid(
        err,
        "value",
        "maximum allowed value of a user defined priority is 1000000000",
    );
    let err = pcs
        .patch(
            "high",
            &PatchParams::default(),
            &Patch::Merge(json!({"value": 5})),
        )
        .await
        .expect_err("value is immutable");
    // Kubernetes words this one as Forbidden, on the Go field name.
    assert_invalid(err, "Value", "may not be changed in an update.");
    // Besides the two system classes every server has.
    let (columns, rows) = table(
        &env,
        "/apis/scheduling.k8s.io/v1/priorityclasses?fieldSelector=metadata.name%3Dhigh",
    )
    .await;
    assert_eq!(
        columns,
        ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"]
    );
    assert_eq!(cell(&columns, &rows, "Value"), &Value::from(1000));
    assert_eq!(cell(&columns, &rows, "Global-Default"), &Value::from(false));
    assert_eq!(
        cell(&columns, &rows, "PreemptionPolicy"),
        "PreemptLowerPriority"
    );
}

#[tokio::test]
async fn ingresses_classes_and_network_policies() {
    let env = TestEnv::start().await.expect("start");
    let ings: Api<Ingress> = Api::default_namespaced(env.client());
    let ing = |name: &str, path_type: Value| -> Ingress {
        from(
            json!({"metadata": {"name": name}, "spec": {"ingressClassName": "nginx", "rules": [{
            "host": "example.com", "http": {"paths": [{"path": "/", "pathType": path_type,
            "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
        )
    };
    crud(
        &ings,
        &ing("tmp", json!("Prefix")),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    ings.create(&PostParams::default(), &ing("web", json!("Prefix")))
        .await
        .expect("create");
    let err = ings
        .create(&PostParams::default(), &ing("bad", Value::Null))
        .await
        .expect_err("pathType is required");
    assert_invalid(
        err,
        "spec.rules[0].http.paths[0].pathType",
        "pathType must be specified",
    );
    let (columns, rows) = table(
        &env,
        "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
    )
    .await;
    assert_eq!(
        columns,
        ["Name", "Class", "Hosts", "Address", "Ports", "Age"]
    );
    assert_eq!(cell(&columns, &rows, "Class"), "nginx");
    assert_eq!(cell(&columns, &rows, "Hosts"), "example.com");
    assert_eq!(cell(&columns, &rows, "Ports"), "80");

    let classes: Api<IngressClass> = Api::all(env.client());
    crud(
        &classes,
        &from(
            json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}}),
        ),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    let err = classes
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bad"}, "spec": {}})),
        )
        .await
        .expect_err("controller is required");
    assert_invalid(err, "spec.controller", "Required value");

    let policies: Api<NetworkPolicy> = Api::default_namespaced(env.client());
    let created = crud(
        &policies,
        &from(
            json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {},
            "egress": [{"ports": [{"port": 53}]}]}}),
        ),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    let spec = created.spec.expect("spec");
    assert_eq!(
        spec.policy_types,
        Some(vec!["Ingress".to_owned(), "Egress".to_owned()])
    );
    let port = &spec.egress.expect("egress")[0]
        .ports
        .clone()
        .expect("ports")[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    policies
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "web"}, "spec": {
                "podSelector": {"matchLabels": {"app": "web"}}}})),
        )
        .await
        .expect("create");
    let (columns, rows) = table(
        &env,
        "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
    )
    .await;
    assert_eq!(columns, ["Name", "Pod-Selector", "Age"]);
    assert_eq!(cell(&columns, &rows, "Pod-Selector"), "app=web");
    classes
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx"}})),
        )
        .await
        .expect("create");
    let (columns, rows) = table(&env, "/apis/networking.k8s.io/v1/ingressclasses").await;
    assert_eq!(columns, ["Name", "Controller", "Parameters", "Age"]);
    assert_eq!(cell(&columns, &rows, "Controller"), "k8s.io/ingress-nginx");
    assert_eq!(cell(&columns, &rows, "Parameters"), "<none>");
}

#[tokio::test]
async fn endpoint_slices() {
    let env = TestEnv::start().await.expect("start");
    let slices: Api<EndpointSlice> = Api::default_namespaced(env.client());
    let created = crud(
        &slices,
        &from(
            json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.1.2.3"]}], "ports": [{"port": 80}]}),
        ),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    assert_eq!(
        created.ports.expect("ports")[0].protocol.as_deref(),
        Some("TCP")
    );
    let (code, body) = crate::common::raw(
        &env,
        http::Method::POST,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        "application/json",
        Some(
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "bad"}, "addressType": "IPv5", "endpoints": []}),
        ),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["details"]["causes"][0]["field"], "addressType",
        "{body}"
    );
    slices
        .create(
            &PostParams::default(),
            &from(
                json!({"metadata": {"name": "web-xyz"}, "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]},
                    {"addresses": ["10.0.0.3"]}, {"addresses": ["10.0.0.4"]}],
                "ports": [{"port": 80}, {"port": 443}]}),
            ),
        )
        .await
        .expect("create");
    // Besides the `kubernetes` slice every server keeps.
    let (columns, rows) = table(
        &env,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?fieldSelector=metadata.name%21%3Dkubernetes",
    )
    .await;
    assert_eq!(
        columns,
        ["Name", "AddressType", "Ports", "Endpoints", "Age"]
    );
    assert_eq!(cell(&columns, &rows, "Ports"), "80,443");
    assert_eq!(
        cell(&columns, &rows, "Endpoints"),
        "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more..."
    );
}

#[tokio::test]
async fn storage_classes_and_csi_drivers() {
    let env = TestEnv::start().await.expect("start");
    let classes: Api<StorageClass> = Api::all(env.client());
    let sc = |name: &str| -> StorageClass {
        from(json!({"metadata": {"name": name, "annotations": {
            "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "rancher.io/local-path"}))
    };
    crud(&classes, &sc("tmp"), json!({"allowVolumeExpansion": true})).await;
    let created = classes
        .create(&PostParams::default(), &sc("local"))
        .await
        .expect("create");
    assert_eq!(created.reclaim_policy.as_deref(), Some("Delete"));
    assert_eq!(created.volume_binding_mode.as_deref(), Some("Immediate"));
    let err = classes
        .patch(
            "local",
            &PatchParams::default(),
            &Patch::Merge(json!({"parameters": {"x": "y"}})),
        )
        .await
        .expect_err("parameters are immutable");
    let status = crate::common::api_error(err);
    assert_eq!(status.code, 422, "{status:?}");
    // Besides the default `standard` every server has.
    let (columns, rows) = table(
        &env,
        "/apis/storage.k8s.io/v1/storageclasses?fieldSelector=metadata.name%3Dlocal",
    )
    .await;
    assert_eq!(
        columns,
        [
            "Name",
            "Provisioner",
            "ReclaimPolicy",
            "VolumeBindingMode",
            "AllowVolumeExpansion",
            "Age"
        ]
    );
    assert_eq!(cell(&columns, &rows, "Name"), "local (default)");

    let drivers: Api<CSIDriver> = Api::all(env.client());
    let created = crud(
        &drivers,
        &from(json!({"metadata": {"name": "csi.example.com"}, "spec": {}})),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    let spec = created.spec;
    assert_eq!(spec.attach_required, Some(true));
    assert_eq!(spec.pod_info_on_mount, Some(false));
    assert_eq!(
        spec.fs_group_policy.as_deref(),
        Some("ReadWriteOnceWithFSType")
    );
    assert_eq!(
        spec.volume_lifecycle_modes,
        Some(vec!["Persistent".to_owned()])
    );
}

#[tokio::test]
async fn runtime_classes_csrs_and_webhook_configurations() {
    let env = TestEnv::start().await.expect("start");
    let rcs: Api<RuntimeClass> = Api::all(env.client());
    crud(
        &rcs,
        &from(json!({"metadata": {"name": "gvisor"}, "handler": "runsc"})),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    let err = rcs
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bad"}, "handler": ""})),
        )
        .await
        .expect_err("handler is required");
    assert_invalid(err, "handler", "Required value");
    rcs.create(
        &PostParams::default(),
        &from(json!({"metadata": {"name": "kata"}, "handler": "kata"})),
    )
    .await
    .expect("create");
    let (columns, rows) = table(&env, "/apis/node.k8s.io/v1/runtimeclasses").await;
    assert_eq!(columns, ["Name", "Handler", "Age"]);
    assert_eq!(cell(&columns, &rows, "Handler"), "kata");

    let csrs: Api<CertificateSigningRequest> = Api::all(env.client());
    crud(
        &csrs,
        &from(json!({"metadata": {"name": "alice"}, "spec": {
            "request": crate::common::request_b64("alice"),
            "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}})),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;

    csrs.create(
        &PostParams::default(),
        &from(json!({"metadata": {"name": "bob"}, "spec": {
            "request": crate::common::request_b64("bob"),
            "signerName": "kubernetes.io/kube-apiserver-client", "expirationSeconds": 86400,
            "usages": ["client auth"]}})),
    )
    .await
    .expect("create");
    let (columns, rows) = table(
        &env,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
    )
    .await;
    assert_eq!(
        columns,
        [
            "Name",
            "Age",
            "SignerName",
            "Requestor",
            "RequestedDuration",
            "Condition"
        ]
    );
    assert_eq!(cell(&columns, &rows, "RequestedDuration"), "24h");
    assert_eq!(cell(&columns, &rows, "Condition"), "Pending");

    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(env.client());
    let created = crud(
        &hooks,
        &from(json!({"metadata": {"name": "check"}, "webhooks": [{
            "name": "check.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"service": {"namespace": "default", "name": "hook"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"]}]}]})),
        json!({"metadata": {"annotations": {"a": "b"}}}),
    )
    .await;
    let hook = serde_json::to_value(&created.webhooks.expect("webhooks")[0]).expect("json");
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["matchPolicy"], "Equivalent");
    assert_eq!(hook["timeoutSeconds"], 10);
    assert_eq!(hook["namespaceSelector"], json!({}));
    assert_eq!(hook["clientConfig"]["service"]["port"], 443);
    assert_eq!(hook["rules"][0]["scope"], "*");
    let err = hooks
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bad"}, "webhooks": [{
                "name": "bad.example.com", "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": "https://hook.example.com"}}]})),
        )
        .await
        .expect_err("sideEffects is required in v1");
    assert_invalid(
        err,
        "webhooks[0].sideEffects",
        "must specify one of None, NoneOnDryRun",
    );
}

/// The deeper rules of `pkg/apis/{policy,networking,storage}/validation` that clients hit.
#[tokio::test]
async fn deeper_validation_of_budgets_ingresses_policies_and_storage() {
    let env = TestEnv::start().await.expect("start");
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    let err = pdbs
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "over"}, "spec": {"maxUnavailable": "101%"}})),
        )
        .await
        .expect_err("more than 100%");
    assert_invalid(err, "spec.maxUnavailable", "must not be greater than 100%");
    pdbs.create(
        &PostParams::default(),
        &from(json!({"metadata": {"name": "all"}, "spec": {"minAvailable": "100%"}})),
    )
    .await
    .expect("100% is allowed");

    let ings: Api<Ingress> = Api::default_namespaced(env.client());
    let ing = |name: &str, host: &str, path: &str, backend: Value| -> Ingress {
        from(
            json!({"metadata": {"name": name}, "spec": {"rules": [{"host": host,
            "http": {"paths": [{"path": path, "pathType": "Prefix", "backend": backend}]}}]}}),
        )
    };
    let web = json!({"service": {"name": "web", "port": {"number": 80}}});
    let err = ings
        .create(
            &PostParams::default(),
            &ing("ip", "10.0.0.1", "/", web.clone()),
        )
        .await
        .expect_err("an IP host");
    assert_invalid(
        err,
        "spec.rules[0].host",
        "must be a DNS name, not an IP address",
    );
    let err = ings
        .create(
            &PostParams::default(),
            &ing("dots", "example.com", "/a/../b", web.clone()),
        )
        .await
        .expect_err("a path with /../");
    assert_invalid(
        err,
        "spec.rules[0].http.paths[0].path",
        "must not contain '/../'",
    );
    let err = ings
        .create(
            &PostParams::default(),
            &ing(
                "both",
                "example.com",
                "/",
                json!({"service": {"name": "web",
                "port": {"name": "http", "number": 80}}}),
            ),
        )
        .await
        .expect_err("port name and number");
    assert_invalid(
        err,
        "spec.rules[0].http.paths[0].backend.service.port",
        "cannot set both port name & port number",
    );
    let err = ings
        .create(
            &PostParams::default(),
            &ing("none", "*.example.com", "/", json!({})),
        )
        .await
        .expect_err("no backend");
    assert_invalid(
        err,
        "spec.rules[0].http.paths[0].backend",
        "one of `resource` or `service` must be specified",
    );

    let classes: Api<IngressClass> = Api::all(env.client());
    let err = classes
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bare"}, "spec": {"controller": "nginx"}})),
        )
        .await
        .expect_err("not domain-prefixed");
    assert_invalid(err, "spec.controller", "must be a domain-prefixed path");
    let created = classes
        .create(
            &PostParams::default(),
            &from(
                json!({"metadata": {"name": "params"}, "spec": {"controller": "example.com/lb",
                "parameters": {"kind": "Config", "name": "lb"}}}),
            ),
        )
        .await
        .expect("create");
    let scope = created
        .spec
        .expect("spec")
        .parameters
        .expect("parameters")
        .scope;
    assert_eq!(
        scope.as_deref(),
        Some("Cluster"),
        "parameters default to cluster scope"
    );
    let err = classes
        .create(
            &PostParams::default(),
            &from(
                json!({"metadata": {"name": "ns"}, "spec": {"controller": "example.com/lb",
                "parameters": {"kind": "Config", "name": "lb", "scope": "Namespace"}}}),
            ),
        )
        .await
        .expect_err("namespace scope without a namespace");
    assert_invalid(
        err,
        "spec.parameters.namespace",
        "`parameters.scope` is set to 'Namespace'",
    );

    let policies: Api<NetworkPolicy> = Api::default_namespaced(env.client());
    let err = policies
        .create(
            &PostParams::default(),
            &from(
                json!({"metadata": {"name": "bad"}, "spec": {"podSelector": {},
                "policyTypes": ["Sideways"],
                "ingress": [{"ports": [{"protocol": "ICMP", "port": 70000}]}]}}),
            ),
        )
        .await
        .expect_err("bad types and ports");
    assert_invalid(err, "spec.policyTypes[0]", "Unsupported value");

    let scs: Api<StorageClass> = Api::all(env.client());
    let err = scs
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "odd"}, "provisioner": "no spaces/please no"})),
        )
        .await
        .expect_err("provisioner is a qualified name");
    assert_invalid(err, "provisioner", "");
    let drivers: Api<CSIDriver> = Api::all(env.client());
    let err = drivers
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "csi.example.com"},
                "spec": {"fsGroupPolicy": "Sometimes", "volumeLifecycleModes": ["Forever"]}})),
        )
        .await
        .expect_err("bad policy and mode");
    assert_invalid(err, "spec.volumeLifecycleModes[0]", "Unsupported value");
    let nodes: Api<CSINode> = Api::all(env.client());
    let err = nodes
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "n1"},
                "spec": {"drivers": [{"name": "csi.example.com"}]}})),
        )
        .await
        .expect_err("nodeID required");
    assert_invalid(err, "spec.drivers[0].nodeID", "Required value");
    let capacities: Api<CSIStorageCapacity> = Api::default_namespaced(env.client());
    let err = capacities
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "c"}, "storageClassName": "Not_A_Name"})),
        )
        .await
        .expect_err("class is a subdomain");
    assert_invalid(err, "storageClassName", "RFC 1123 subdomain");
}
