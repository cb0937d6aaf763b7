//! What every sample-controller test needs: a server with the operator installed as its own
//! ServiceAccount, a manager with leader election running it, and helpers to read what it
//! did (Deployments, Foos, events, its own writes, its reconcile count).

#![allow(
    clippy::disallowed_names,
    dead_code,
    reason = "the custom resource is called Foo; each test binary uses a part of this module"
)]

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use kore_operator::Operator;
use kore_runtime::Manager;
use kore_runtime::manager::{LeaseConfig, ShutdownHandle};
use kore_runtime::metrics::Metrics;
use kore_sample_controller::{Foo, Options};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, ObjectMeta, PostParams};
use prometheus_client::registry::Registry;
use serde_json::Value;
use tokio::task::JoinHandle;

/// How long convergence may take.
pub(crate) const WAIT: Duration = Duration::from_secs(30);
/// Where the operator runs.
pub(crate) const OPERATOR_NS: &str = "kore-system";
/// Where the tests put their Foos.
pub(crate) const NS: &str = "demo";

/// The operator installed on a test server, not yet running: the test can make objects
/// the operator will find when it starts.
pub(crate) struct Prepared {
    /// The server.
    pub(crate) env: TestEnv,
    /// A client acting as the administrator (the tests' own requests).
    pub(crate) admin: kube::Client,
    client: kube::Client,
    operator: Operator,
}

impl Prepared {
    /// Installs `operator` (its CRDs and RBAC) and creates the test namespaces.
    pub(crate) async fn install(operator: Operator) -> anyhow::Result<Prepared> {
        Self::install_on(TestEnv::start().await?, operator).await
    }

    /// [`Prepared::install`] on a server of the test's making (over TCP, say).
    pub(crate) async fn install_on(env: TestEnv, operator: Operator) -> anyhow::Result<Prepared> {
        let admin = env.client();
        let client = kore_testenv::operator::install(&env, &operator, OPERATOR_NS).await?;
        for ns in [NS, "other"] {
            let namespaces: Api<Namespace> = Api::all(admin.clone());
            namespaces
                .create(
                    &PostParams::default(),
                    &Namespace {
                        metadata: ObjectMeta {
                            name: Some(ns.to_owned()),
                            ..ObjectMeta::default()
                        },
                        ..Namespace::default()
                    },
                )
                .await?;
        }
        Ok(Prepared {
            env,
            admin,
            client,
            operator,
        })
    }

    /// Runs the sample-controller as the operator's ServiceAccount, under a manager with
    /// leader election.
    pub(crate) fn run(self, options: Options) -> anyhow::Result<Running> {
        let lease = LeaseConfig::new(OPERATOR_NS, kore_sample_controller::NAME)
            .lease_duration(Duration::from_secs(3))
            .renew_deadline(Duration::from_secs(2))
            .retry_period(Duration::from_millis(200));
        let mut manager = Manager::builder(self.client)
            .leader_election(lease)
            .handle_signals(false)
            .build();
        let metrics = Metrics::new();
        metrics.register(manager.registry_mut());
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        kore_sample_controller::register(&mut manager, &metrics, &options);
        let stop = manager.shutdown_handle();
        let task = tokio::spawn(manager.run());
        Ok(Running {
            env: self.env,
            admin: self.admin,
            operator: self.operator,
            registry,
            stop,
            task,
        })
    }
}

/// The operator running against a test server.
pub(crate) struct Running {
    /// The server.
    pub(crate) env: TestEnv,
    /// A client acting as the administrator (the tests' own requests).
    pub(crate) admin: kube::Client,
    /// What the operator was installed as.
    pub(crate) operator: Operator,
    registry: Registry,
    stop: ShutdownHandle,
    task: JoinHandle<Result<(), kore_runtime::manager::Error>>,
}

impl Running {
    /// Installs the operator (its CRDs and RBAC from `operator()`) and runs it.
    pub(crate) async fn start(options: Options) -> anyhow::Result<Running> {
        Self::start_as(kore_sample_controller::operator(), options).await
    }

    /// Installs `operator` (the sample-controller's rules with other CRDs, say) and runs
    /// the sample-controller under it.
    pub(crate) async fn start_as(operator: Operator, options: Options) -> anyhow::Result<Running> {
        Prepared::install(operator).await?.run(options)
    }

    /// Stops the operator and checks that it stopped cleanly.
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        self.stop.shutdown();
        tokio::time::timeout(WAIT, self.task).await???;
        Ok(())
    }

    /// Fails unless the operator's RBAC grants exactly what it used. Waits first for the
    /// leader to renew its Lease once (a test can finish within one retry period).
    pub(crate) async fn assert_least_privilege(&self) -> anyhow::Result<()> {
        let user = self.user();
        wait_for(WAIT, || async {
            self.env
                .server()
                .authorizations()
                .iter()
                .any(|s| {
                    s.user == user && s.verb == "update" && s.resource == "leases" && s.allowed > 0
                })
                .then_some(())
        })
        .await?;
        kore_testenv::operator::assert_least_privilege(&self.env, &self.operator, OPERATOR_NS)
    }

    fn user(&self) -> String {
        format!("system:serviceaccount:{OPERATOR_NS}:{}", self.operator.name)
    }

    /// Fails if the operator was ever refused a request.
    pub(crate) fn assert_no_denials(&self) -> anyhow::Result<()> {
        kore_testenv::operator::assert_no_denials(&self.env, &self.operator, OPERATOR_NS)
    }

    /// Foos in the test namespace.
    pub(crate) fn foos(&self) -> Api<Foo> {
        Api::namespaced(self.admin.clone(), NS)
    }

    /// Deployments in the test namespace.
    pub(crate) fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.admin.clone(), NS)
    }

    /// Writes the operator made so far, per `verb group/resource[/subresource]`, leaving out
    /// its leader election (the Lease renewals).
    pub(crate) fn writes(&self) -> BTreeMap<String, u64> {
        let user = self.user();
        self.env
            .server()
            .authorizations()
            .into_iter()
            .filter(|s| {
                s.user == user
                    && s.group != "coordination.k8s.io"
                    && !matches!(s.verb.as_str(), "get" | "list" | "watch")
            })
            .map(|s| {
                let sub = if s.subresource.is_empty() {
                    String::new()
                } else {
                    format!("/{}", s.subresource)
                };
                (
                    format!("{} {}/{}{sub}", s.verb, s.group, s.resource),
                    s.allowed,
                )
            })
            .collect()
    }

    /// Reconciles the controller finished so far, whatever their outcome.
    pub(crate) fn reconciles(&self) -> f64 {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            return 0.0;
        }
        text.lines()
            .filter(|l| {
                l.starts_with("controller_runtime_reconcile_total{")
                    && l.contains("controller=\"sample-controller\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// How often the event `reason` was recorded about the Foo `foo` in `ns` (Events and
    /// the repeats counted in their series), and the notes it carried.
    pub(crate) async fn events(&self, ns: &str, foo: &str, reason: &str) -> (i32, Vec<String>) {
        let api: Api<Event> = Api::namespaced(self.admin.clone(), ns);
        let Ok(list) = api.list(&Default::default()).await else {
            return (0, Vec::new());
        };
        let mut count = 0;
        let mut notes = Vec::new();
        for e in list.items {
            let about_foo = e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("Foo") && r.name.as_deref() == Some(foo)
            });
            if about_foo && e.reason.as_deref() == Some(reason) {
                count += e.series.as_ref().map_or(1, |s| s.count);
                notes.extend(e.note);
            }
        }
        (count, notes)
    }

    /// Creates a Foo from JSON as a client would send it.
    pub(crate) async fn create_foo(&self, ns: &str, body: Value) -> anyhow::Result<Value> {
        create_foo(&self.admin, ns, body).await
    }

    /// Waits until no reconcile has finished for 300 ms (the reconciles that earlier
    /// changes caused have run out) and returns the reconcile count.
    pub(crate) async fn settle(&self) -> anyhow::Result<f64> {
        wait_for(WAIT, || async {
            let before = self.reconciles();
            tokio::time::sleep(Duration::from_millis(300)).await;
            (self.reconciles() == before).then_some(before)
        })
        .await
    }

    /// The Foo `name` in the test namespace as JSON (whatever its shape).
    pub(crate) async fn foo_json(&self, name: &str) -> anyhow::Result<Value> {
        let request = kube::core::Request::new(format!(
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{NS}/foos"
        ))
        .get(name, &Default::default())?;
        Ok(self.admin.request(request).await?)
    }

    /// Waits until the Deployment `name` in `ns` exists and `check` accepts it.
    pub(crate) async fn wait_deployment(
        &self,
        ns: &str,
        name: &str,
        check: impl Fn(&Deployment) -> bool,
    ) -> anyhow::Result<Deployment> {
        let api: Api<Deployment> = Api::namespaced(self.admin.clone(), ns);
        wait_for(WAIT, || async {
            let d = api.get_opt(name).await.ok()??;
            check(&d).then_some(d)
        })
        .await
    }

    /// Waits until the Foo `name` in the test namespace satisfies `check`.
    pub(crate) async fn wait_foo(
        &self,
        name: &str,
        check: impl Fn(&Foo) -> bool,
    ) -> anyhow::Result<Foo> {
        let api = self.foos();
        wait_for(WAIT, || async {
            let foo = api.get_opt(name).await.ok()??;
            check(&foo).then_some(foo)
        })
        .await
    }
}

/// The replicas of a Deployment's spec.
pub(crate) fn replicas(d: &Deployment) -> Option<i32> {
    d.spec.as_ref().and_then(|s| s.replicas)
}

/// The available replicas of a Foo's status, if it has one.
pub(crate) fn available(foo: &Foo) -> Option<i32> {
    foo.status.map(|s| s.available_replicas)
}

/// Creates a Foo from JSON as a client would send it (only the fields in `body`), and
/// returns it as the server stored it.
pub(crate) async fn create_foo(
    admin: &kube::Client,
    ns: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let mut body = body;
    body["apiVersion"] = "samplecontroller.k8s.io/v1alpha1".into();
    body["kind"] = "Foo".into();
    let request = kube::core::Request::new(format!(
        "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{ns}/foos"
    ))
    .create(&PostParams::default(), serde_json::to_vec(&body)?)?;
    Ok(admin.request(request).await?)
}
