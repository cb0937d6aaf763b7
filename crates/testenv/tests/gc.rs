//! Deletion semantics and the garbage collector, through the `kube` crate against an
//! in-process kore-apiserver: propagation policies, finalizers, owner references across kinds
//! and scopes.
//!
//! The collector works asynchronously, so tests poll with [`wait_for`]; every test runs under
//! [`TEST_TIMEOUT`].

use std::future::Future;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

/// How long a whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the collector may take to reach a state (it should take well under a second).
const SETTLE: Duration = Duration::from_secs(10);

async fn within(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("the test finished within its time limit");
}

/// An owner reference to `owner`.
fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K, block: Option<bool>) -> Value {
    let mut r = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "name": owner.meta().name,
        "uid": owner.meta().uid,
    });
    if let Some(b) = block {
        r["blockOwnerDeletion"] = json!(b);
    }
    r
}

fn cm(name: &str, owners: &[Value], finalizers: &[&str]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": owners, "finalizers": finalizers},
        "data": {"k": "v"},
    }))
    .expect("a valid ConfigMap")
}

fn api_error(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Waits until `name` is gone from `api`.
async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_for(SETTLE, || async {
        api.get_opt(name)
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{name} was not removed: {e}"));
}

async fn create_cm(api: &Api<ConfigMap>, name: &str, owners: &[Value]) -> ConfigMap {
    api.create(&PostParams::default(), &cm(name, owners, &[]))
        .await
        .expect("create ConfigMap")
}

async fn remove_finalizers(api: &Api<ConfigMap>, name: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove finalizers");
}

#[tokio::test]
async fn background_deletion_collects_dependents_after_the_owner_is_gone() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let owner = create_cm(&cms, "owner", &[]).await;
        create_cm(&cms, "dep", &[owner_ref(&owner, Some(true))]).await;
        cms.delete("owner", &DeleteParams::background())
            .await
            .expect("delete owner");
        assert!(
            cms.get_opt("owner").await.expect("get").is_none(),
            "owner removed at once"
        );
        wait_gone(&cms, "dep").await;
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_keeps_the_owner_until_blocking_dependents_are_gone() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let owner = create_cm(&cms, "owner", &[]).await;
        // The dependent is held by its own finalizer, so the owner must wait for it.
        cms.create(
            &PostParams::default(),
            &cm(
                "held",
                &[owner_ref(&owner, Some(true))],
                &["example.com/hold"],
            ),
        )
        .await
        .expect("create dependent");
        let deleted = cms
            .delete("owner", &DeleteParams::foreground())
            .await
            .expect("delete owner");
        let pending = deleted
            .left()
            .expect("the owner is returned, still present");
        assert!(pending.metadata.deletion_timestamp.is_some());
        assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(0));
        assert_eq!(pending.finalizers(), ["foregroundDeletion"]);

        // The dependent is being deleted, and the owner stays while it is there.
        let dep = wait_for(SETTLE, || async {
            let d = cms.get("held").await.expect("get dependent");
            d.metadata.deletion_timestamp.is_some().then_some(d)
        })
        .await
        .expect("the dependent gets a deletionTimestamp");
        assert_eq!(dep.finalizers(), ["example.com/hold"]);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let still = cms.get("owner").await.expect("owner still visible");
        assert!(still.metadata.deletion_timestamp.is_some());

        remove_finalizers(&cms, "held").await;
        wait_gone(&cms, "held").await;
        wait_gone(&cms, "owner").await;
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_does_not_wait_for_dependents_without_block_owner_deletion() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let owner = create_cm(&cms, "owner", &[]).await;
        cms.create(
            &PostParams::default(),
            &cm(
                "loose",
                &[owner_ref(&owner, Some(false))],
                &["example.com/hold"],
            ),
        )
        .await
        .expect("create dependent");
        cms.delete("owner", &DeleteParams::foreground())
            .await
            .expect("delete owner");
        wait_gone(&cms, "owner").await;
        // The dependent was still deleted (held by its own finalizer), just not waited for.
        let dep = wait_for(SETTLE, || async {
            let d = cms.get("loose").await.expect("get dependent");
            d.metadata.deletion_timestamp.is_some().then_some(d)
        })
        .await
        .expect("the dependent is being deleted");
        assert_eq!(dep.finalizers(), ["example.com/hold"]);
        remove_finalizers(&cms, "loose").await;
        wait_gone(&cms, "loose").await;
    })
    .await;
}

#[tokio::test]
async fn orphan_deletion_leaves_dependents_without_the_reference() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let secrets: Api<Secret> = Api::default_namespaced(env.client());
        let owner = create_cm(&cms, "owner", &[]).await;
        let other = create_cm(&cms, "other-owner", &[]).await;
        create_cm(&cms, "only", &[owner_ref(&owner, Some(true))]).await;
        create_cm(
            &cms,
            "shared",
            &[owner_ref(&owner, None), owner_ref(&other, None)],
        )
        .await;
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "s", "ownerReferences": [owner_ref(&owner, None)]},
        }))
        .expect("secret");
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .expect("create secret");

        cms.delete("owner", &DeleteParams::orphan())
            .await
            .expect("delete owner");
        wait_gone(&cms, "owner").await;
        let only = cms.get("only").await.expect("orphan kept");
        assert!(only.owner_references().is_empty(), "{only:?}");
        let shared = cms.get("shared").await.expect("orphan kept");
        assert_eq!(shared.owner_references().len(), 1);
        assert_eq!(shared.owner_references()[0].name, "other-owner");
        let s = secrets.get("s").await.expect("orphaned secret kept");
        assert!(s.owner_references().is_empty());
        // Nothing collects them later either.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(cms.get_opt("only").await.expect("get").is_some());
    })
    .await;
}

#[tokio::test]
async fn a_preset_orphan_finalizer_acts_as_the_orphan_policy() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let owner = cms
            .create(&PostParams::default(), &cm("owner", &[], &["orphan"]))
            .await
            .expect("create owner");
        create_cm(&cms, "dep", &[owner_ref(&owner, Some(true))]).await;
        cms.delete("owner", &DeleteParams::default())
            .await
            .expect("delete owner");
        wait_gone(&cms, "owner").await;
        let dep = cms.get("dep").await.expect("dependent kept");
        assert!(dep.owner_references().is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_preset_foreground_finalizer_acts_as_the_foreground_policy() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let owner = cms
            .create(
                &PostParams::default(),
                &cm("owner", &[], &["foregroundDeletion"]),
            )
            .await
            .expect("create owner");
        cms.create(
            &PostParams::default(),
            &cm(
                "held",
                &[owner_ref(&owner, Some(true))],
                &["example.com/hold"],
            ),
        )
        .await
        .expect("create dependent");
        let deleted = cms
            .delete("owner", &DeleteParams::default())
            .await
            .expect("delete owner");
        assert!(deleted.is_left(), "the owner waits for its dependent");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(cms.get_opt("owner").await.expect("get").is_some());
        remove_finalizers(&cms, "held").await;
        wait_gone(&cms, "owner").await;
    })
    .await;
}

#[tokio::test]
async fn an_explicit_policy_replaces_the_gc_finalizer_already_set() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let owner = cms
            .create(&PostParams::default(), &cm("owner", &[], &["orphan"]))
            .await
            .expect("create owner");
        create_cm(&cms, "dep", &[owner_ref(&owner, Some(true))]).await;
        cms.delete("owner", &DeleteParams::background())
            .await
            .expect("delete owner");
        wait_gone(&cms, "owner").await;
        wait_gone(&cms, "dep").await;
    })
    .await;
}

#[tokio::test]
async fn orphan_dependents_together_with_a_propagation_policy_is_invalid() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        create_cm(&cms, "a", &[]).await;
        let req = http::Request::delete("/api/v1/namespaces/default/configmaps/a")
            .header("content-type", "application/json")
            .body(
                serde_json::to_vec(
                    &json!({"propagationPolicy": "Foreground", "orphanDependents": true}),
                )
                .expect("json"),
            )
            .expect("request");
        let err = env
            .client()
            .request::<Value>(req)
            .await
            .map_err(api_error)
            .expect_err("422");
        assert_eq!(err.code, 422);
        assert_eq!(err.reason, "Invalid");

        // The deprecated flag alone still works: false means the dependents are deleted.
        let req = http::Request::delete("/api/v1/namespaces/default/configmaps/a")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&json!({"orphanDependents": false})).expect("json"))
            .expect("request");
        env.client()
            .request::<Value>(req)
            .await
            .expect("delete with orphanDependents");
        wait_gone(&cms, "a").await;
    })
    .await;
}

#[tokio::test]
async fn no_new_finalizers_can_be_added_once_deleting() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        cms.create(
            &PostParams::default(),
            &cm("held", &[], &["example.com/hold"]),
        )
        .await
        .expect("create");
        cms.delete("held", &DeleteParams::default())
            .await
            .expect("delete");
        let err = cms
            .patch(
                "held",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "x"]}})),
            )
            .await
            .map_err(api_error)
            .expect_err("a new finalizer is forbidden");
        assert_eq!(err.code, 422);
        assert!(
            err.message.contains(
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"x\"}"
            ),
            "{}",
            err.message
        );
        // Removing the one it has is fine, and removes the object.
        remove_finalizers(&cms, "held").await;
        wait_gone(&cms, "held").await;
    })
    .await;
}

#[tokio::test]
async fn a_dependent_whose_owner_never_existed_is_collected() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let ghost = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                           "uid": "00000000-0000-4000-8000-000000000001"});
        create_cm(&cms, "dep", &[ghost]).await;
        wait_gone(&cms, "dep").await;
    })
    .await;
}

#[tokio::test]
async fn a_recreated_owner_with_a_new_uid_does_not_keep_old_dependents() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let owner = create_cm(&cms, "owner", &[]).await;
        let stale = owner_ref(&owner, None);
        cms.delete("owner", &DeleteParams::default())
            .await
            .expect("delete owner");
        create_cm(&cms, "owner", &[]).await;
        create_cm(&cms, "dep", &[stale]).await;
        wait_gone(&cms, "dep").await;
        assert!(cms.get_opt("owner").await.expect("get").is_some());
    })
    .await;
}

#[tokio::test]
async fn only_the_dangling_references_are_stripped_when_another_owner_exists() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let owner = create_cm(&cms, "owner", &[]).await;
        let ghost = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost",
                           "uid": "00000000-0000-4000-8000-000000000002"});
        create_cm(&cms, "dep", &[owner_ref(&owner, None), ghost]).await;
        let dep = wait_for(SETTLE, || async {
            let d = cms.get("dep").await.expect("dependent stays");
            (d.owner_references().len() == 1).then_some(d)
        })
        .await
        .expect("the dangling reference is removed");
        assert_eq!(dep.owner_references()[0].name, "owner");
    })
    .await;
}

#[tokio::test]
async fn a_namespaced_owner_in_another_namespace_is_never_honoured() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let namespaces: Api<Namespace> = Api::all(env.client());
        for ns in ["a", "b"] {
            let body: Namespace =
                serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
            namespaces
                .create(&PostParams::default(), &body)
                .await
                .expect("create namespace");
        }
        let in_a: Api<ConfigMap> = Api::namespaced(env.client(), "a");
        let in_b: Api<ConfigMap> = Api::namespaced(env.client(), "b");
        let owner = create_cm(&in_a, "owner", &[]).await;
        let local = create_cm(&in_b, "local", &[]).await;
        // Only the cross-namespace reference: it counts as absent, so the object is collected
        // although the owner exists.
        create_cm(&in_b, "cross", &[owner_ref(&owner, None)]).await;
        // With a valid owner as well, only the cross-namespace reference goes.
        create_cm(
            &in_b,
            "mixed",
            &[owner_ref(&owner, None), owner_ref(&local, None)],
        )
        .await;
        wait_gone(&in_b, "cross").await;
        let mixed = wait_for(SETTLE, || async {
            let m = in_b.get("mixed").await.expect("kept by its local owner");
            (m.owner_references().len() == 1).then_some(m)
        })
        .await
        .expect("the cross-namespace reference is removed");
        assert_eq!(mixed.owner_references()[0].name, "local");
        assert!(in_a.get_opt("owner").await.expect("get").is_some());
    })
    .await;
}

#[tokio::test]
async fn cluster_scoped_owners_of_namespaced_dependents_work() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let roles: Api<ClusterRole> = Api::all(env.client());
        let namespaces: Api<Namespace> = Api::all(env.client());
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let role: ClusterRole =
            serde_json::from_value(json!({"metadata": {"name": "owner-role"}})).expect("role");
        let role = roles
            .create(&PostParams::default(), &role)
            .await
            .expect("create role");
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "owner-ns"}})).expect("ns");
        let ns = namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        create_cm(&cms, "by-role", &[owner_ref(&role, None)]).await;
        create_cm(&cms, "by-ns", &[owner_ref(&ns, None)]).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            cms.get_opt("by-role").await.expect("get").is_some(),
            "solid owner keeps it"
        );
        assert!(
            cms.get_opt("by-ns").await.expect("get").is_some(),
            "solid owner keeps it"
        );

        roles
            .delete("owner-role", &DeleteParams::default())
            .await
            .expect("delete role");
        wait_gone(&cms, "by-role").await;
        namespaces
            .delete("owner-ns", &DeleteParams::default())
            .await
            .expect("delete namespace");
        wait_gone(&cms, "by-ns").await;
    })
    .await;
}

#[tokio::test]
async fn a_cluster_scoped_object_naming_a_namespaced_owner_is_left_alone() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let roles: Api<ClusterRole> = Api::all(env.client());
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let owner = create_cm(&cms, "owner", &[]).await;
        let role: ClusterRole = serde_json::from_value(json!({
            "metadata": {"name": "odd", "ownerReferences": [owner_ref(&owner, None)]},
        }))
        .expect("role");
        roles
            .create(&PostParams::default(), &role)
            .await
            .expect("create role");
        cms.delete("owner", &DeleteParams::default())
            .await
            .expect("delete owner");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let kept = roles.get("odd").await.expect("never collected");
        assert_eq!(kept.owner_references().len(), 1, "and its reference stays");
    })
    .await;
}

/// Creates `n` dependents of `owner`, cycling through ConfigMaps, Secrets and Deployments.
async fn create_dependents(client: &kube::Client, owner: &Value, n: usize) {
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let secrets: Api<Secret> = Api::default_namespaced(client.clone());
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    futures::stream::iter(0..n)
        .map(|i| {
            let meta = json!({"name": format!("dep-{i}"), "ownerReferences": [owner]});
            let (cms, secrets, deployments) = (cms.clone(), secrets.clone(), deployments.clone());
            async move {
                let pp = PostParams::default();
                match i % 3 {
                    0 => {
                        let o: ConfigMap =
                            serde_json::from_value(json!({"metadata": meta})).expect("cm");
                        cms.create(&pp, &o).await.map(drop)
                    }
                    1 => {
                        let o: Secret =
                            serde_json::from_value(json!({"metadata": meta})).expect("secret");
                        secrets.create(&pp, &o).await.map(drop)
                    }
                    _ => {
                        let o: Deployment = serde_json::from_value(json!({
                            "metadata": meta,
                            "spec": {
                                "selector": {"matchLabels": {"app": "x"}},
                                "template": {
                                    "metadata": {"labels": {"app": "x"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]},
                                },
                            },
                        }))
                        .expect("deployment");
                        deployments.create(&pp, &o).await.map(drop)
                    }
                }
            }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await
        .expect("create dependents");
}

#[tokio::test]
async fn deleting_an_owner_collects_a_thousand_dependents_across_kinds() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let client = env.client();
        let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
        let secrets: Api<Secret> = Api::default_namespaced(client.clone());
        let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
        let owner = create_cm(&cms, "owner", &[]).await;
        create_dependents(&client, &owner_ref(&owner, Some(true)), 1000).await;
        let lp = ListParams::default();
        // Besides the `kube-root-ca.crt` every namespace has.
        let own_cms = ListParams::default().fields("metadata.name!=kube-root-ca.crt");
        let count = || async {
            cms.list(&own_cms).await.expect("list").items.len()
                + secrets.list(&lp).await.expect("list").items.len()
                + deployments.list(&lp).await.expect("list").items.len()
        };
        // The owner's ConfigMap plus its 1,000 dependents.
        assert_eq!(count().await, 1001);
        cms.delete("owner", &DeleteParams::background())
            .await
            .expect("delete owner");
        wait_for(SETTLE, || async { (count().await == 0).then_some(()) })
            .await
            .expect("every dependent is collected");
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_removes_dependents_across_kinds_before_the_owner() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let client = env.client();
        let roles: Api<ClusterRole> = Api::all(client.clone());
        let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
        let role: ClusterRole =
            serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("role");
        let role = roles
            .create(&PostParams::default(), &role)
            .await
            .expect("create role");
        create_dependents(&client, &owner_ref(&role, Some(true)), 30).await;
        roles
            .delete("owner", &DeleteParams::foreground())
            .await
            .expect("delete owner");
        wait_gone(&roles, "owner").await;
        // Once the owner is gone, no blocking dependent may be left.
        assert!(
            cms.list(&ListParams::default().fields("metadata.name!=kube-root-ca.crt"))
                .await
                .expect("list")
                .items
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn orphan_and_foreground_finalizers_cannot_both_be_set() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let err = cms
            .create(
                &PostParams::default(),
                &cm("both", &[], &["orphan", "foregroundDeletion"]),
            )
            .await
            .map_err(api_error)
            .expect_err("422");
        assert_eq!(err.code, 422);
        assert!(
            err.message
                .contains("finalizer orphan and foregroundDeletion cannot be both set"),
            "{}",
            err.message
        );
    })
    .await;
}

#[tokio::test]
async fn an_explicit_orphan_dependents_false_that_must_wait_is_answered_202() {
    within(async {
        let env = TestEnv::start().await.expect("start");
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        cms.create(
            &PostParams::default(),
            &cm("held", &[], &["example.com/hold"]),
        )
        .await
        .expect("create");
        let req = http::Request::delete("/api/v1/namespaces/default/configmaps/held")
            .header("content-type", "application/json")
            .body(kube::client::Body::from(
                serde_json::to_vec(&json!({"orphanDependents": false})).expect("json"),
            ))
            .expect("request");
        let resp = env.client().send(req).await.expect("response");
        assert_eq!(resp.status().as_u16(), 202);
        let held = cms.get("held").await.expect("still held");
        assert!(held.metadata.deletion_timestamp.is_some());
        assert_eq!(
            held.finalizers(),
            ["example.com/hold"],
            "no GC finalizer for false"
        );
    })
    .await;
}
