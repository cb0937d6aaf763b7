//! kubectl 1.32 against kore-apiserver's RBAC over HTTPS: `create token`, `auth can-i` as a
//! ServiceAccount (via `--as` and via `--token`), `--as` impersonation and `create rolebinding`.
//!
//! If kubectl is not on `PATH` a test prints `skipping: kubectl not found` and returns. Every
//! kubectl process runs under [`kore_testenv::kubectl::COMMAND_TIMEOUT`]; every test under [`TEST_TIMEOUT`].

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kore_testenv::TestEnv;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
use kube::api::{Api, PostParams};
use serde_json::json;

/// How long a whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(180);

async fn within(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("the test finished within its time limit");
}

async fn env_with_account(ns: &str, name: &str) -> TestEnv {
    let env = TestEnv::builder().tcp().start().await.expect("start");
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).expect("ns"),
        )
        .await
        .expect("create namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), ns);
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).expect("sa"),
        )
        .await
        .expect("create serviceaccount");
    env
}

#[tokio::test]
async fn kubectl_create_token_prints_a_token_the_server_accepts() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = env_with_account("demo", "op").await;
        let kubectl = Kubectl::for_env(program, &env);
        let token = kubectl
            .ok(&["create", "token", "op", "-n", "demo", "--duration=20m"])
            .await;
        assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
        let who = kubectl
            .ok(&["auth", "whoami", "--token", &token, "-o", "json"])
            .await;
        let who: serde_json::Value = serde_json::from_str(&who).expect("json");
        assert_eq!(
            who["status"]["userInfo"]["username"],
            "system:serviceaccount:demo:op"
        );
        let missing = kubectl
            .run(&["create", "token", "nobody", "-n", "demo"])
            .await;
        assert!(!missing.status.success());
        assert_eq!(
            missing.stderr.trim(),
            r#"error: failed to create token: serviceaccounts "nobody" not found"#
        );
    })
    .await;
}

#[tokio::test]
async fn kubectl_auth_can_i_answers_for_a_service_account_via_as_and_via_its_token() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = env_with_account("demo", "op").await;
        let kubectl = Kubectl::for_env(program, &env);
        let sa = "system:serviceaccount:demo:op";
        let denied = kubectl
            .run(&[
                "auth",
                "can-i",
                "list",
                "configmaps",
                "-n",
                "demo",
                "--as",
                sa,
            ])
            .await;
        assert_eq!(denied.stdout.trim(), "no");
        assert_eq!(denied.status.code(), Some(1));

        kubectl
            .ok(&[
                "create",
                "role",
                "cm-reader",
                "-n",
                "demo",
                "--verb=list,get",
                "--resource=configmaps",
            ])
            .await;
        kubectl
            .ok(&[
                "create",
                "rolebinding",
                "op-reads",
                "-n",
                "demo",
                "--role=cm-reader",
                "--serviceaccount=demo:op",
            ])
            .await;
        let allowed = kubectl
            .ok(&[
                "auth",
                "can-i",
                "list",
                "configmaps",
                "-n",
                "demo",
                "--as",
                sa,
            ])
            .await;
        assert_eq!(allowed.trim(), "yes");

        let token = kubectl.ok(&["create", "token", "op", "-n", "demo"]).await;
        let with_token = kubectl
            .ok(&[
                "auth",
                "can-i",
                "get",
                "configmaps",
                "-n",
                "demo",
                "--token",
                &token,
            ])
            .await;
        assert_eq!(with_token.trim(), "yes");
        let elsewhere = kubectl
            .run(&[
                "auth",
                "can-i",
                "get",
                "configmaps",
                "-n",
                "default",
                "--token",
                &token,
            ])
            .await;
        assert_eq!(elsewhere.stdout.trim(), "no");

        let list = kubectl
            .ok(&["auth", "can-i", "--list", "-n", "demo", "--token", &token])
            .await;
        let row = list
            .lines()
            .find(|l| l.starts_with("configmaps "))
            .unwrap_or_else(|| panic!("no configmaps row in {list}"));
        assert!(row.ends_with("[list get]"), "{row}");
        assert!(
            list.contains("selfsubjectaccessreviews.authorization.k8s.io"),
            "{list}"
        );
    })
    .await;
}

#[tokio::test]
async fn kubectl_as_a_service_account_is_forbidden_until_a_rolebinding_allows_it() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = env_with_account("demo", "op").await;
        let kubectl = Kubectl::for_env(program, &env);
        let as_sa = "--as=system:serviceaccount:demo:op";
        let denied = kubectl.run(&[as_sa, "get", "cm", "-n", "demo"]).await;
        assert!(!denied.status.success());
        assert_eq!(
            denied.stderr.trim(),
            r#"Error from server (Forbidden): configmaps is forbidden: User "system:serviceaccount:demo:op" cannot list resource "configmaps" in API group "" in the namespace "demo""#
        );
        kubectl
            .ok(&[
                "create", "rolebinding", "op-view", "-n", "demo", "--clusterrole=view",
                "--serviceaccount=demo:op",
            ])
            .await;
        let out = kubectl.run(&[as_sa, "get", "cm", "-n", "demo", "-o", "name"]).await;
        assert!(out.status.success(), "{out:?}");
        // The one ConfigMap every namespace has.
        assert_eq!(out.stdout.trim(), "configmap/kube-root-ca.crt");
        // A ServiceAccount may not impersonate anyone.
        let token = kubectl.ok(&["create", "token", "op", "-n", "demo"]).await;
        let out = kubectl
            .run(&["--token", &token, "--as=alice", "get", "cm", "-n", "demo"])
            .await;
        assert!(out.stderr.contains(
            r#"users "alice" is forbidden: User "system:serviceaccount:demo:op" cannot impersonate resource "users" in API group "" at the cluster scope"#
        ), "{out:?}");
    })
    .await;
}
