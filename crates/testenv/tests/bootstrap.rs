//! What every real API server bootstraps, and kore now does too: the `default/kubernetes`
//! Service with its Endpoints and EndpointSlice, `kube-root-ca.crt` in every namespace, the
//! system PriorityClasses, the initial namespaces, the default RBAC policy and a default
//! StorageClass — created at start (also on a data directory that already has them) and kept
//! in step.

use std::time::Duration;

use base64::Engine as _;
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, PersistentVolumeClaim, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(5);

fn from<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("valid object")
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The Service, Endpoints and EndpointSlice point at `ip:port`.
async fn assert_kubernetes_service(env: &TestEnv, ip: &str, port: i32) {
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let svc = services
        .get("kubernetes")
        .await
        .expect("kubernetes service");
    let labels = svc.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("component").map(String::as_str),
        Some("apiserver")
    );
    assert_eq!(
        labels.get("provider").map(String::as_str),
        Some("kubernetes")
    );
    let spec = svc.spec.expect("spec");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.1"));
    let ports = spec.ports.expect("ports");
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].name.as_deref(), Some("https"));
    assert_eq!(ports[0].port, 443);
    assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
    assert_eq!(
        serde_json::to_value(&ports[0].target_port).expect("json"),
        json!(port)
    );

    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), "default");
    let ep = endpoints.get("kubernetes").await.expect("endpoints");
    let subset = &ep.subsets.expect("subsets")[0];
    assert_eq!(subset.addresses.as_ref().expect("addresses")[0].ip, ip);
    let ep_port = &subset.ports.as_ref().expect("ports")[0];
    assert_eq!(
        (ep_port.name.as_deref(), ep_port.port),
        (Some("https"), port)
    );

    let slices: Api<EndpointSlice> = Api::namespaced(env.client(), "default");
    let slice = slices.get("kubernetes").await.expect("endpointslice");
    assert_eq!(slice.address_type, "IPv4");
    assert_eq!(slice.endpoints[0].addresses, vec![ip.to_string()]);
    assert_eq!(
        slice.metadata.labels.unwrap_or_default()["kubernetes.io/service-name"],
        "kubernetes"
    );
    assert_eq!(slice.ports.expect("ports")[0].port, Some(port));
}

#[tokio::test]
async fn an_in_process_server_has_what_every_server_bootstraps() {
    let env = TestEnv::start().await.expect("start");
    // Not listening on a socket: kube-apiserver's default secure port on loopback.
    assert_kubernetes_service(&env, "127.0.0.1", 6443).await;

    let namespaces: Api<Namespace> = Api::all(env.client());
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        namespaces.get(ns).await.expect(ns);
        let cms: Api<ConfigMap> = Api::namespaced(env.client(), ns);
        let cm = cms.get("kube-root-ca.crt").await.expect("kube-root-ca.crt");
        let ca = &cm.data.expect("data")["ca.crt"];
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    }

    let classes: Api<PriorityClass> = Api::all(env.client());
    for (name, value) in [
        ("system-node-critical", 2_000_001_000),
        ("system-cluster-critical", 2_000_000_000),
    ] {
        let pc = classes.get(name).await.expect(name);
        assert_eq!(pc.value, value);
        assert_eq!(
            pc.preemption_policy.as_deref(),
            Some("PreemptLowerPriority")
        );
    }

    let sc: Api<StorageClass> = Api::all(env.client());
    let standard = sc.get("standard").await.expect("default storage class");
    assert_eq!(standard.provisioner, "kore.dev/simulated");
    assert_eq!(
        standard.metadata.annotations.unwrap_or_default()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );

    let roles: Api<ClusterRole> = Api::all(env.client());
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
    ] {
        roles.get(name).await.expect(name);
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(env.client());
    for name in [
        "cluster-admin",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
    ] {
        bindings.get(name).await.expect(name);
    }
}

#[tokio::test]
async fn a_listening_server_points_the_kubernetes_service_at_its_port_and_publishes_its_ca() {
    let env = TestEnv::builder().tcp().start().await.expect("start");
    let endpoint = env.endpoint().expect("endpoint").clone();
    assert_kubernetes_service(&env, "127.0.0.1", i32::from(endpoint.addr.port())).await;

    // kube-root-ca.crt holds the CA the kubeconfig trusts: the one that signed the serving
    // certificate.
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cm = cms.get("kube-root-ca.crt").await.expect("kube-root-ca.crt");
    let ca = cm.data.expect("data")["ca.crt"].clone();
    let encoded = base64::engine::general_purpose::STANDARD.encode(ca.as_bytes());
    assert!(
        endpoint.kubeconfig.contains(&encoded),
        "the kubeconfig trusts another CA than kube-root-ca.crt holds"
    );
    // And a client that trusts it talks to the server.
    let client = env.socket_client().await.expect("socket client");
    let services: Api<Service> = Api::namespaced(client, "default");
    services.get("kubernetes").await.expect("over TLS");
}

#[tokio::test]
async fn kube_root_ca_is_published_to_new_namespaces_and_kept_in_step() {
    let env = TestEnv::start().await.expect("start");
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "team-a"}})),
        )
        .await
        .expect("namespace");
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "team-a");
    let original = wait_for(WAIT, || async {
        cms.get_opt("kube-root-ca.crt").await.ok().flatten()
    })
    .await
    .expect("published to the new namespace");
    let ca = original.data.clone().expect("data")["ca.crt"].clone();
    let annotations = original.metadata.annotations.clone().unwrap_or_default();
    assert!(
        annotations["kubernetes.io/description"].contains("CA bundle"),
        "{annotations:?}"
    );

    // Changed: set back, keeping what the user added besides the data.
    cms.patch(
        "kube-root-ca.crt",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"mine": "yes"}},
                             "data": {"ca.crt": "forged", "extra": "x"}})),
    )
    .await
    .expect("patch");
    let repaired = wait_for(WAIT, || async {
        let cm = cms.get("kube-root-ca.crt").await.ok()?;
        let data = cm.data.clone()?;
        (data.len() == 1 && data.get("ca.crt") == Some(&ca)).then_some(cm)
    })
    .await
    .expect("data set back");
    assert_eq!(
        repaired.metadata.labels.unwrap_or_default()["mine"],
        "yes",
        "the user's label stays"
    );

    // Deleted: created again.
    cms.delete("kube-root-ca.crt", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for(WAIT, || async {
        let cm = cms.get_opt("kube-root-ca.crt").await.ok().flatten()?;
        (cm.metadata.uid != original.metadata.uid).then_some(())
    })
    .await
    .expect("created again");
}

#[tokio::test]
async fn the_kubernetes_service_and_its_endpoints_are_kept_in_step() {
    let env = TestEnv::start().await.expect("start");
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(env.client(), "default");

    services
        .delete("kubernetes", &DeleteParams::default())
        .await
        .expect("delete service");
    endpoints
        .delete("kubernetes", &DeleteParams::default())
        .await
        .expect("delete endpoints");
    services
        .patch(
            "kubernetes",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"mine": "yes"}}})),
        )
        .await
        .ok();
    slices
        .patch(
            "kubernetes",
            &PatchParams::default(),
            &Patch::Merge(json!({"endpoints": [{"addresses": ["10.0.0.9"]}]})),
        )
        .await
        .expect("patch slice");
    wait_for(WAIT, || async {
        let svc = services.get_opt("kubernetes").await.ok().flatten()?;
        let ep = endpoints.get_opt("kubernetes").await.ok().flatten()?;
        let slice = slices.get_opt("kubernetes").await.ok().flatten()?;
        let ok = svc.spec?.cluster_ip.as_deref() == Some("10.96.0.1")
            && ep.subsets?[0].addresses.as_ref()?[0].ip == "127.0.0.1"
            && slice.endpoints[0].addresses == vec!["127.0.0.1".to_string()];
        ok.then_some(())
    })
    .await
    .expect("service and endpoints restored");
    assert_kubernetes_service(&env, "127.0.0.1", 6443).await;

    // Ports set back; a label the user added stays.
    services
        .patch(
            "kubernetes",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"mine": "yes"}},
                                 "spec": {"ports": [{"name": "web", "port": 80}]}})),
        )
        .await
        .expect("patch service");
    let svc = wait_for(WAIT, || async {
        let svc = services.get("kubernetes").await.ok()?;
        (svc.spec.as_ref()?.ports.as_ref()?[0].port == 443).then_some(svc)
    })
    .await
    .expect("ports set back");
    assert_eq!(svc.metadata.labels.unwrap_or_default()["mine"], "yes");
}

#[tokio::test]
async fn system_priority_classes_are_reserved_and_cannot_be_deleted() {
    let env = TestEnv::start().await.expect("start");
    let classes: Api<PriorityClass> = Api::all(env.client());
    let err = api_error(
        classes
            .delete("system-node-critical", &DeleteParams::default())
            .await
            .expect_err("system classes cannot be deleted"),
    );
    assert_eq!(err.code, 403, "{err:?}");
    assert!(
        err.message
            .contains("this is a system priority class and cannot be deleted"),
        "{}",
        err.message
    );

    let err = api_error(
        classes
            .create(
                &PostParams::default(),
                &from(json!({"metadata": {"name": "system-mine"}, "value": 10})),
            )
            .await
            .expect_err("system- is reserved"),
    );
    assert_eq!(err.code, 422, "{err:?}");
    assert!(
        err.message.contains(
            "priority class names with 'system-' prefix are reserved for system use only"
        ),
        "{}",
        err.message
    );
    let err = api_error(
        classes
            .create(
                &PostParams::default(),
                &from(json!({"metadata": {"name": "too-high"}, "value": 1_000_000_001})),
            )
            .await
            .expect_err("above the user maximum"),
    );
    assert_eq!(err.code, 422, "{err:?}");
    assert!(
        err.message
            .contains("maximum allowed value of a user defined priority is 1000000000"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_claim_without_a_class_gets_the_default_storage_class() {
    let env = TestEnv::start().await.expect("start");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), "default");
    let claim = |name: &str, class: Option<&str>| {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"],
                              "resources": {"requests": {"storage": "1Gi"}}});
        if let Some(class) = class {
            spec["storageClassName"] = json!(class);
        }
        from::<PersistentVolumeClaim>(json!({"metadata": {"name": name}, "spec": spec}))
    };
    let defaulted = claims
        .create(&PostParams::default(), &claim("data", None))
        .await
        .expect("create");
    assert_eq!(
        defaulted.spec.expect("spec").storage_class_name.as_deref(),
        Some("standard")
    );
    let none = claims
        .create(&PostParams::default(), &claim("static", Some("")))
        .await
        .expect("create");
    assert_eq!(
        none.spec.expect("spec").storage_class_name.as_deref(),
        Some(""),
        "an explicit empty class means none"
    );

    // No default class: left empty.
    let sc: Api<StorageClass> = Api::all(env.client());
    sc.delete("standard", &DeleteParams::default())
        .await
        .expect("delete");
    let plain = claims
        .create(&PostParams::default(), &claim("plain", None))
        .await
        .expect("create");
    assert_eq!(plain.spec.expect("spec").storage_class_name, None);
}

#[tokio::test]
async fn restarting_on_a_data_directory_keeps_one_of_each_and_the_same_ca() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = {
        let first = TestEnv::builder()
            .data_dir(dir.path())
            .start()
            .await
            .expect("first start");
        let cms: Api<ConfigMap> = Api::namespaced(first.client(), "kube-public");
        let ca = cms.get("kube-root-ca.crt").await.expect("published").data;
        let classes: Api<PriorityClass> = Api::all(first.client());
        classes
            .patch(
                "system-cluster-critical",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"mine": "yes"}}})),
            )
            .await
            .expect("label a system class");
        first.stop().await;
        ca
    };
    // The old server's storage lock goes when its last client handle does.
    let second = wait_for(WAIT, || async {
        TestEnv::builder().data_dir(dir.path()).start().await.ok()
    })
    .await
    .expect("second start on the same data directory");
    let cms: Api<ConfigMap> = Api::namespaced(second.client(), "kube-public");
    assert_eq!(
        cms.get("kube-root-ca.crt").await.expect("still there").data,
        ca,
        "the same CA"
    );
    let classes: Api<PriorityClass> = Api::all(second.client());
    let pc = classes.get("system-cluster-critical").await.expect("kept");
    assert_eq!(
        pc.metadata.labels.unwrap_or_default()["mine"],
        "yes",
        "an existing object is left as it is"
    );
    assert_kubernetes_service(&second, "127.0.0.1", 6443).await;
}
