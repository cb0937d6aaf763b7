//! The REST verbs against an in-process kore-apiserver, through the `kube` crate.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service, ServiceAccount};
use kore_testenv::TestEnv;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use serde_json::json;

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "data": data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    }))
    .expect("valid ConfigMap")
}

fn api_error(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn configmap_crud_keeps_server_owned_metadata() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let created = cms
        .create(&PostParams::default(), &cm("a", &[("k", "1")]))
        .await
        .expect("create");
    let meta = &created.metadata;
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("numeric");
    assert_eq!(meta.generation, None, "ConfigMaps do not track generation");

    let got = cms.get("a").await.expect("get");
    assert_eq!(got, created);

    let mut changed = got.clone();
    changed.data = Some([("k".to_string(), "2".to_string())].into());
    let replaced = cms
        .replace("a", &PostParams::default(), &changed)
        .await
        .expect("replace");
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("numeric");
    assert!(rv2 > rv1);
    assert_eq!(replaced.metadata.uid, created.metadata.uid);
    assert_eq!(
        replaced.metadata.creation_timestamp,
        created.metadata.creation_timestamp
    );

    // A write that changes nothing keeps the revision.
    let same = cms
        .replace("a", &PostParams::default(), &replaced)
        .await
        .expect("no-op replace");
    assert_eq!(
        same.metadata.resource_version,
        replaced.metadata.resource_version
    );

    let patched = cms
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"extra": "x"}})),
        )
        .await
        .expect("merge patch");
    assert_eq!(
        patched
            .data
            .as_ref()
            .and_then(|d| d.get("extra"))
            .map(String::as_str),
        Some("x")
    );

    let deleted = cms
        .delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        deleted.is_right(),
        "a ConfigMap delete answers with a Status"
    );
    let err = api_error(cms.get("a").await.expect_err("gone"));
    assert_eq!((err.code, err.reason.as_str()), (404, "NotFound"));
    assert_eq!(err.message, "configmaps \"a\" not found");
}

#[tokio::test]
async fn every_builtin_kind_can_be_created_read_listed_and_deleted() {
    let env = TestEnv::start().await.expect("start");
    let client = env.client();
    let objects = [
        (
            "v1",
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}),
        ),
        (
            "v1",
            "secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}, "stringData": {"a": "b"}}),
        ),
        (
            "v1",
            "serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x"}}),
        ),
        (
            "v1",
            "services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": [{"port": 80}]}}),
        ),
        (
            "v1",
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}),
        ),
        (
            "v1",
            "events",
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"}, "involvedObject": {"kind": "Pod", "name": "x", "namespace": "default"}, "reason": "Test", "message": "hello"}),
        ),
        (
            "apps/v1",
            "deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        ),
        (
            "apps/v1",
            "replicasets",
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "x"}, "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
        ),
        (
            "coordination.k8s.io/v1",
            "leases",
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15, "renewTime": "2024-05-01T12:00:00.123456Z"}}),
        ),
        (
            "events.k8s.io/v1",
            "events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "y"}, "eventTime": "2024-05-01T12:00:00.000000Z", "reason": "Synced", "note": "ok", "action": "Sync", "reportingController": "ctl", "reportingInstance": "ctl-1", "regarding": {"kind": "Pod", "name": "x", "namespace": "default"}, "type": "Normal"}),
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "x"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "x"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"}, "subjects": [{"kind": "ServiceAccount", "name": "x", "namespace": "default"}]}),
        ),
    ];
    for (gv, plural, body) in objects {
        let (group, version) = gv.split_once('/').unwrap_or(("", gv));
        let ar = kube::discovery::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: gv.into(),
            kind: body["kind"].as_str().expect("kind").into(),
            plural: plural.into(),
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(client.clone(), "default", &ar);
        let obj: kube::api::DynamicObject = serde_json::from_value(body.clone()).expect("object");
        let created = api
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| panic!("{gv} {plural}: {e}"));
        let name = created.metadata.name.clone().expect("name");
        api.get(&name)
            .await
            .unwrap_or_else(|e| panic!("get {plural}: {e}"));
        let list = api.list(&ListParams::default()).await.expect("list");
        assert!(
            list.items
                .iter()
                .any(|o| o.metadata.name.as_deref() == Some(name.as_str())),
            "{plural} listed"
        );
        api.delete(&name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("delete {plural}: {e}"));
        assert_eq!(
            api_error(api.get(&name).await.expect_err("deleted")).code,
            404,
            "{plural} gone"
        );
    }
    // Cluster-scoped kinds.
    let role_api = kube::discovery::ApiResource {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: "ClusterRole".into(),
        plural: "clusterroles".into(),
    };
    let roles: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &role_api);
    let role: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "system:test:reader"}, "rules": []}))
    .expect("object");
    roles
        .create(&PostParams::default(), &role)
        .await
        .expect("cluster role with a colon in its name");
    roles
        .delete("system:test:reader", &DeleteParams::default())
        .await
        .expect("delete");
}

#[tokio::test]
async fn secrets_fold_string_data_and_default_their_type() {
    let env = TestEnv::start().await.expect("start");
    let secrets: Api<Secret> = Api::default_namespaced(env.client());
    let s: Secret = serde_json::from_value(
        json!({"metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}),
    )
    .expect("secret");
    let created = secrets
        .create(&PostParams::default(), &s)
        .await
        .expect("create");
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    assert!(created.string_data.is_none());
    let value = created
        .data
        .as_ref()
        .and_then(|d| d.get("password"))
        .expect("folded into data");
    assert_eq!(value.0, b"hunter2");
}

#[tokio::test]
async fn deployments_get_defaults_and_bump_generation_on_spec_changes_only() {
    let env = TestEnv::start().await.expect("start");
    let deploys: Api<Deployment> = Api::default_namespaced(env.client());
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}
    })).expect("deployment");
    let created = deploys
        .create(&PostParams::default(), &d)
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    let spec = created.spec.as_ref().expect("spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.revision_history_limit, Some(10));
    let container = &spec.template.spec.as_ref().expect("pod spec").containers[0];
    assert_eq!(container.image_pull_policy.as_deref(), Some("Always"));

    let labelled = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("label");
    assert_eq!(labelled.metadata.generation, Some(1), "labels are not spec");
    let scaled = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale through spec");
    assert_eq!(scaled.metadata.generation, Some(2));

    // The status subresource changes only status and never the generation.
    let status = deploys
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"availableReplicas": 3}, "spec": {"replicas": 9}})),
        )
        .await
        .expect("status patch");
    assert_eq!(
        status.status.as_ref().and_then(|s| s.available_replicas),
        Some(3)
    );
    assert_eq!(
        status.spec.as_ref().and_then(|s| s.replicas),
        Some(3),
        "spec ignored on /status"
    );
    assert_eq!(status.metadata.generation, Some(2));
    // And the main resource ignores status.
    let ignored = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"availableReplicas": 0}})),
        )
        .await
        .expect("main patch");
    assert_eq!(
        ignored.status.as_ref().and_then(|s| s.available_replicas),
        Some(3)
    );
    assert_eq!(
        ignored.metadata.resource_version, status.metadata.resource_version,
        "nothing changed"
    );

    // The scale subresource.
    let scale = deploys.get_scale("web").await.expect("get scale");
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(3));
    assert_eq!(
        scale.status.as_ref().map(|s| s.selector.clone()),
        Some(Some("app=web".into()))
    );
    deploys
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .expect("patch scale");
    let after = deploys.get("web").await.expect("get");
    assert_eq!(after.spec.as_ref().and_then(|s| s.replicas), Some(5));
    assert_eq!(after.metadata.generation, Some(3));
}

#[tokio::test]
async fn a_stale_resource_version_conflicts() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let first = cms
        .create(&PostParams::default(), &cm("c", &[("k", "1")]))
        .await
        .expect("create");
    let mut newer = first.clone();
    newer.data = Some([("k".to_string(), "2".to_string())].into());
    cms.replace("c", &PostParams::default(), &newer)
        .await
        .expect("replace");
    let mut stale = first.clone();
    stale.data = Some([("k".to_string(), "3".to_string())].into());
    let err = api_error(
        cms.replace("c", &PostParams::default(), &stale)
            .await
            .expect_err("stale"),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        err.message,
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );
    assert_eq!(
        cms.get("c").await.expect("get").data.expect("data")["k"],
        "2",
        "the stale write was not applied"
    );
}

#[tokio::test]
async fn finalizers_hold_a_deleted_object_until_they_are_removed() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let mut held = cm("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held)
        .await
        .expect("create");
    let deleted = cms
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let pending = deleted
        .left()
        .expect("the object comes back while finalizers remain");
    assert!(pending.metadata.deletion_timestamp.is_some());
    // Deleting again changes nothing.
    let again = cms
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete again")
        .left()
        .expect("object");
    assert_eq!(
        again.metadata.resource_version,
        pending.metadata.resource_version
    );
    // No new finalizers once deleting.
    let err = api_error(
        cms.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
            ),
        )
        .await
        .expect_err("new finalizer"),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("no new finalizers can be added if the object is being deleted"),
        "{}",
        err.message
    );
    // Watch for the deletion, then remove the finalizer.
    let from = cms
        .get("held")
        .await
        .expect("still there")
        .metadata
        .resource_version
        .expect("rv");
    let mut events = cms
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch")
        .boxed();
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove finalizer");
    let event = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("in time")
        .expect("ok");
    assert!(matches!(event, Some(WatchEvent::Deleted(_))), "{event:?}");
    assert_eq!(
        api_error(cms.get("held").await.expect_err("gone")).code,
        404
    );
}

#[tokio::test]
async fn list_pages_through_every_object_once() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    for i in 0..23 {
        cms.create(&PostParams::default(), &cm(&format!("cm-{i:02}"), &[]))
            .await
            .expect("create");
    }
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(5);
    let mut pages = 0;
    let mut first_rv = None;
    loop {
        let page = cms.list(&params).await.expect("list");
        pages += 1;
        let rv = page.metadata.resource_version.clone();
        first_rv.get_or_insert(rv.clone());
        assert_eq!(
            Some(rv),
            first_rv.clone(),
            "every page shows the first page's revision"
        );
        names.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        // Writes between pages do not show up in later pages.
        if pages == 1 {
            cms.create(&PostParams::default(), &cm("cm-99", &[]))
                .await
                .expect("create");
        }
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => params = params.continue_token(&c),
            _ => break,
        }
    }
    // Besides the 23, the `kube-root-ca.crt` every namespace has.
    let mut expected: Vec<String> = (0..23).map(|i| format!("cm-{i:02}")).collect();
    expected.push("kube-root-ca.crt".into());
    assert_eq!(names, expected);
    assert_eq!(pages, 5);
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    for (name, env_label, tier) in [
        ("a", "prod", "web"),
        ("b", "dev", "web"),
        ("c", "prod", "db"),
        ("d", "test", ""),
    ] {
        let mut c = cm(name, &[]);
        let mut labels =
            std::collections::BTreeMap::from([("env".to_string(), env_label.to_string())]);
        if !tier.is_empty() {
            labels.insert("tier".into(), tier.into());
        }
        c.metadata.labels = Some(labels);
        cms.create(&PostParams::default(), &c)
            .await
            .expect("create");
    }
    // Leaves out the `kube-root-ca.crt` every namespace has.
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .filter(|n| n != "kube-root-ca.crt")
            .collect()
    };
    let q = |s: &str| ListParams::default().labels(s);
    assert_eq!(
        names(cms.list(&q("env=prod")).await.expect("list")),
        ["a", "c"]
    );
    assert_eq!(
        names(cms.list(&q("env in (dev,test)")).await.expect("list")),
        ["b", "d"]
    );
    assert_eq!(
        names(cms.list(&q("env notin (prod),tier")).await.expect("list")),
        ["b"]
    );
    assert_eq!(names(cms.list(&q("!tier")).await.expect("list")), ["d"]);
    assert_eq!(
        names(cms.list(&q("env!=prod")).await.expect("list")),
        ["b", "d"]
    );
    let by_name = ListParams::default().fields("metadata.name=c");
    assert_eq!(names(cms.list(&by_name).await.expect("list")), ["c"]);
    let not_name = ListParams::default().fields("metadata.name!=c,metadata.namespace=default");
    assert_eq!(
        names(cms.list(&not_name).await.expect("list")),
        ["a", "b", "d"]
    );

    let err = api_error(
        cms.list(&ListParams::default().fields("data.x=1"))
            .await
            .expect_err("unknown field"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (400, "field label not supported: data.x")
    );
    let err = api_error(cms.list(&q("env in prod")).await.expect_err("bad selector"));
    assert_eq!(err.code, 400);
    assert!(
        err.message.starts_with("unable to parse requirement"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn namespaces_exist_at_start_and_creating_into_a_missing_one_fails() {
    let env = TestEnv::start().await.expect("start");
    let nss: Api<Namespace> = Api::all(env.client());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for ns in ["default", "kube-node-lease", "kube-public", "kube-system"] {
        assert!(names.iter().any(|n| n == ns), "{ns} in {names:?}");
    }
    let default = nss.get("default").await.expect("default");
    assert_eq!(
        default.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );
    assert_eq!(
        default.spec.and_then(|s| s.finalizers),
        Some(vec!["kubernetes".to_string()])
    );
    assert_eq!(
        default
            .metadata
            .labels
            .and_then(|l| l.get("kubernetes.io/metadata.name").cloned())
            .as_deref(),
        Some("default")
    );

    let missing: Api<ConfigMap> = Api::namespaced(env.client(), "nowhere");
    let err = api_error(
        missing
            .create(&PostParams::default(), &cm("x", &[]))
            .await
            .expect_err("no namespace"),
    );
    assert_eq!(
        (err.code, err.message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );

    let err = api_error(
        nss.delete("default", &DeleteParams::default())
            .await
            .expect_err("immortal"),
    );
    assert_eq!(err.code, 403);
}

#[tokio::test]
async fn deleting_a_namespace_removes_its_content_then_itself() {
    let env = TestEnv::start().await.expect("start");
    let nss: Api<Namespace> = Api::all(env.client());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "doomed"}})).expect("ns");
    nss.create(&PostParams::default(), &ns)
        .await
        .expect("create ns");
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "doomed");
    cms.create(&PostParams::default(), &cm("a", &[]))
        .await
        .expect("create");
    let mut held = cm("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held)
        .await
        .expect("create held");
    let sas: Api<ServiceAccount> = Api::namespaced(env.client(), "doomed");
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "sa"}})).expect("sa"),
    )
    .await
    .expect("create sa");

    let terminating = nss
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete")
        .left()
        .expect("namespace");
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let err = api_error(
        cms.create(&PostParams::default(), &cm("late", &[]))
            .await
            .expect_err("terminating"),
    );
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));

    kore_testenv::wait_for(Duration::from_secs(5), || async {
        let left = cms.list(&ListParams::default()).await.ok()?;
        (left.items.len() == 1).then_some(())
    })
    .await
    .expect("content without finalizers is removed");
    assert!(
        nss.get("doomed").await.is_ok(),
        "held content keeps the namespace"
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    kore_testenv::wait_for(Duration::from_secs(5), || async {
        nss.get("doomed").await.err()
    })
    .await
    .expect("namespace removed once empty");
}

#[tokio::test]
async fn generate_name_and_dry_run_store_what_they_should() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let mut generated = ConfigMap::default();
    generated.metadata.generate_name = Some("gen-".into());
    let created = cms
        .create(&PostParams::default(), &generated)
        .await
        .expect("create");
    let name = created.metadata.name.expect("name");
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let would = cms.create(&dry, &cm("dry", &[])).await.expect("dry run");
    assert!(would.metadata.uid.is_some());
    assert_eq!(
        api_error(cms.get("dry").await.expect_err("not stored")).code,
        404
    );
}

#[tokio::test]
async fn services_and_pods_get_their_defaults() {
    let env = TestEnv::start().await.expect("start");
    let svcs: Api<Service> = Api::default_namespaced(env.client());
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "web"}}})).expect("svc");
    let created = svcs
        .create(&PostParams::default(), &svc)
        .await
        .expect("create");
    let spec = created.spec.expect("spec");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert!(
        spec.cluster_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10."))
    );
    let port = &spec.ports.expect("ports")[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80))
    );

    let pods: Api<Pod> = Api::default_namespaced(env.client());
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}})).expect("pod");
    let created = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("create");
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let spec = created.spec.expect("spec");
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
    let deleted = pods
        .delete("p", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(deleted.is_left(), "pods answer a delete with the object");
}

#[tokio::test]
async fn core_and_events_api_events_are_the_same_objects() {
    let env = TestEnv::start().await.expect("start");
    let v1 = kube::discovery::ApiResource {
        group: "events.k8s.io".into(),
        version: "v1".into(),
        api_version: "events.k8s.io/v1".into(),
        kind: "Event".into(),
        plural: "events".into(),
    };
    let new_api: Api<kube::api::DynamicObject> = Api::namespaced_with(env.client(), "default", &v1);
    let ev: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "eventTime": "2024-05-01T12:00:00.000000Z", "reason": "Synced", "note": "all good",
        "action": "Sync", "reportingController": "ctl", "reportingInstance": "ctl-1",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}, "type": "Normal"
    }))
    .expect("event");
    new_api
        .create(&PostParams::default(), &ev)
        .await
        .expect("create through events.k8s.io");
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::default_namespaced(env.client());
    let seen = core.get("e1").await.expect("visible through core/v1");
    assert_eq!(seen.message.as_deref(), Some("all good"));
    assert_eq!(seen.involved_object.name.as_deref(), Some("p"));
    assert_eq!(seen.reporting_component.as_deref(), Some("ctl"));
    let back = new_api.get("e1").await.expect("and back");
    assert_eq!(back.data["note"], "all good");
}

#[tokio::test]
async fn delete_collection_removes_only_what_the_selector_matches() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let mut c = cm(name, &[]);
        c.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        cms.create(&PostParams::default(), &c)
            .await
            .expect("create");
    }
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .expect("delete collection");
    let left: Vec<String> = cms
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(left, ["c", "kube-root-ca.crt"]);
}

#[tokio::test]
async fn discovery_works_legacy_and_aggregated() {
    let env = TestEnv::start().await.expect("start");
    let legacy = kube::Discovery::new(env.client())
        .run()
        .await
        .expect("legacy discovery");
    let aggregated = kube::Discovery::new(env.client())
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    for d in [&legacy, &aggregated] {
        let apps = d.get("apps").expect("apps group");
        let (ar, caps) = apps.recommended_kind("Deployment").expect("deployments");
        assert_eq!(ar.plural, "deployments");
        assert!(caps.supports_operation(kube::discovery::verbs::WATCH));
        assert!(d.has_group("coordination.k8s.io") && d.has_group("rbac.authorization.k8s.io"));
    }
    let version = env.client().apiserver_version().await.expect("version");
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "32")
    );
}

#[tokio::test]
async fn leases_are_created_by_put_as_leader_election_does() {
    use k8s_openapi::api::coordination::v1::Lease;
    let env = TestEnv::start().await.expect("start");
    let leases: Api<Lease> = Api::default_namespaced(env.client());
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                 "acquireTime": "2024-05-01T12:00:00.000000Z", "renewTime": "2024-05-01T12:00:00.500000Z"}
    }))
    .expect("lease");
    let created = leases
        .replace("leader", &PostParams::default(), &lease)
        .await
        .expect("PUT creates a lease");
    assert_eq!(
        serde_json::to_value(&created).expect("json")["spec"]["renewTime"],
        "2024-05-01T12:00:00.500000Z",
        "MicroTime keeps its microseconds"
    );
    // A second candidate racing with the first one's stale revision loses with 409.
    let mut mine = created.clone();
    mine.spec.as_mut().expect("spec").holder_identity = Some("a".into());
    mine.spec.as_mut().expect("spec").lease_transitions = Some(0);
    let renewed = leases
        .replace("leader", &PostParams::default(), &mine)
        .await
        .expect("renew");
    let mut theirs = created.clone();
    theirs.spec.as_mut().expect("spec").holder_identity = Some("b".into());
    let err = api_error(
        leases
            .replace("leader", &PostParams::default(), &theirs)
            .await
            .expect_err("stale"),
    );
    assert_eq!(err.code, 409);
    assert_eq!(
        leases
            .get("leader")
            .await
            .expect("get")
            .spec
            .and_then(|s| s.holder_identity),
        renewed.spec.and_then(|s| s.holder_identity)
    );
}

#[tokio::test]
async fn the_event_recorder_patch_updates_counts() {
    use k8s_openapi::api::core::v1::Event;
    let env = TestEnv::start().await.expect("start");
    let events: Api<Event> = Api::default_namespaced(env.client());
    let ev: Event = serde_json::from_value(json!({
        "metadata": {"name": "web.17b0a1c2d3e4f5a6"},
        "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "default"},
        "reason": "Synced", "message": "synced", "count": 1, "type": "Normal",
        "firstTimestamp": "2024-05-01T12:00:00Z", "lastTimestamp": "2024-05-01T12:00:00Z",
        "source": {"component": "ctl"}
    }))
    .expect("event");
    events
        .create(&PostParams::default(), &ev)
        .await
        .expect("create");
    let patched = events
        .patch(
            "web.17b0a1c2d3e4f5a6",
            &PatchParams::default(),
            &Patch::Strategic(json!({"count": 2, "lastTimestamp": "2024-05-01T12:01:00Z", "message": "synced again"})),
        )
        .await
        .expect("strategic merge patch");
    assert_eq!(patched.count, Some(2));
    assert_eq!(patched.message.as_deref(), Some("synced again"));
    let by_reason = events
        .list(&ListParams::default().fields("reason=Synced,involvedObject.name=web"))
        .await
        .expect("list");
    assert_eq!(by_reason.items.len(), 1);
}

#[tokio::test]
async fn metadata_only_clients_get_partial_object_metadata() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let mut c = cm("m", &[("big", "value")]);
    c.metadata.labels = Some([("app".to_string(), "m".to_string())].into());
    cms.create(&PostParams::default(), &c)
        .await
        .expect("create");
    let list = cms
        .list_metadata(&ListParams::default().labels("app=m"))
        .await
        .expect("metadata list");
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        list.items[0]
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .map(String::as_str),
        Some("m")
    );
    let one = cms.get_metadata("m").await.expect("metadata get");
    assert_eq!(one.metadata.name.as_deref(), Some("m"));
    let rv = list.metadata.resource_version.expect("rv");
    let mut events = cms
        .watch_metadata(&WatchParams::default(), &rv)
        .await
        .expect("metadata watch")
        .boxed();
    cms.patch(
        "m",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "n"}}})),
    )
    .await
    .expect("patch");
    let event = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .expect("in time")
        .expect("ok");
    match event {
        Some(WatchEvent::Modified(m)) => assert_eq!(
            m.metadata
                .labels
                .and_then(|l| l.get("app").cloned())
                .as_deref(),
            Some("n")
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn dry_run_updates_and_deletes_change_nothing() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let created = cms
        .create(&PostParams::default(), &cm("d", &[("k", "1")]))
        .await
        .expect("create");
    let dry = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let would = cms
        .patch("d", &dry, &Patch::Merge(json!({"data": {"k": "2"}})))
        .await
        .expect("dry patch");
    assert_eq!(would.data.expect("data")["k"], "2");
    let dry_delete = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    cms.delete("d", &dry_delete).await.expect("dry delete");
    let now = cms.get("d").await.expect("still there");
    assert_eq!(
        now.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(now.data.expect("data")["k"], "1");
}

#[tokio::test]
async fn a_terminating_namespace_waits_for_its_own_finalizers() {
    let env = TestEnv::start().await.expect("start");
    let nss: Api<Namespace> = Api::all(env.client());
    let ns: Namespace = serde_json::from_value(
        json!({"metadata": {"name": "stuck", "finalizers": ["example.com/keep"]}}),
    )
    .expect("ns");
    nss.create(&PostParams::default(), &ns)
        .await
        .expect("create");
    nss.delete("stuck", &DeleteParams::default())
        .await
        .expect("delete");
    // The namespace controller removed `kubernetes` from spec.finalizers; metadata.finalizers hold it.
    kore_testenv::wait_for(Duration::from_secs(5), || async {
        let n = nss.get("stuck").await.ok()?;
        n.spec
            .and_then(|s| s.finalizers)
            .is_none_or(|f| f.is_empty())
            .then_some(())
    })
    .await
    .expect("spec finalizers emptied");
    nss.patch(
        "stuck",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    kore_testenv::wait_for(Duration::from_secs(5), || async {
        nss.get("stuck").await.err()
    })
    .await
    .expect("gone once no finalizer is left");
}

#[tokio::test]
async fn a_resource_version_from_the_future_times_out() {
    let env = TestEnv::start().await.expect("start");
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    let params = ListParams::default()
        .at("999999")
        .matching(kube::api::VersionMatch::NotOlderThan);
    let err = api_error(cms.list(&params).await.expect_err("too large"));
    assert_eq!((err.code, err.reason.as_str()), (504, "Timeout"));
    assert!(
        err.message
            .starts_with("Timeout: Too large resource version: 999999"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn put_finalize_force_removes_a_stuck_namespace() {
    let env = TestEnv::start().await.expect("start");
    let nss: Api<Namespace> = Api::all(env.client());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "wedged"}})).expect("ns");
    nss.create(&PostParams::default(), &ns)
        .await
        .expect("create");
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "wedged");
    let mut held = cm("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/never".into()]);
    cms.create(&PostParams::default(), &held)
        .await
        .expect("create held");
    nss.delete("wedged", &DeleteParams::default())
        .await
        .expect("delete");
    // The content never goes; an operator clears spec.finalizers through /finalize.
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wedged"}, "spec": {"finalizers": []}});
    let req = http::Request::put("/api/v1/namespaces/wedged/finalize")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).expect("json"))
        .expect("request");
    env.client()
        .request::<serde_json::Value>(req)
        .await
        .expect("finalize");
    kore_testenv::wait_for(Duration::from_secs(5), || async {
        nss.get("wedged").await.err()
    })
    .await
    .expect("namespace removed");
}

#[tokio::test]
async fn the_namespaces_the_server_needs_refuse_deletion_and_stay_active() {
    let env = TestEnv::start().await.expect("start");
    let nss: Api<Namespace> = Api::all(env.client());
    for name in ["default", "kube-system", "kube-public"] {
        let err = api_error(
            nss.delete(name, &DeleteParams::default())
                .await
                .expect_err("immortal"),
        );
        assert_eq!(
            (err.code, err.reason.as_str(), err.message.as_str()),
            (
                403,
                "Forbidden",
                format!("namespaces {name:?} is forbidden: this namespace may not be deleted")
                    .as_str()
            )
        );
        let ns = nss.get(name).await.expect("still there");
        assert!(ns.metadata.deletion_timestamp.is_none());
        assert_eq!(
            ns.status.and_then(|s| s.phase).as_deref(),
            Some("Active"),
            "{name}"
        );
    }
    // Any other namespace may go.
    nss.delete("kube-node-lease", &DeleteParams::default())
        .await
        .expect("an ordinary namespace is deleted");
}
