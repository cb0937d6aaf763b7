//! kubectl 1.32, unchanged, against kore-apiserver over a real socket.
//!
//! Every test starts its own server with `.tcp()` (HTTPS, token auth; one test uses plain HTTP),
//! runs kubectl with the handed-out kubeconfig and a fresh discovery cache, and checks both what
//! kubectl printed and what the server stored (read back through the `kube` crate). If kubectl
//! is not on `PATH` a test prints `skipping: kubectl not found` and returns.
//!
//! Every kubectl process runs under [`kore_testenv::kubectl::COMMAND_TIMEOUT`] and is killed when it overruns or when
//! the test ends; every test runs under [`TEST_TIMEOUT`].

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kore_testenv::TestEnv;
use kore_testenv::kubectl::{COMMAND_TIMEOUT, Kubectl, kubectl_or_skip};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader, Lines};

/// How long a whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(180);
/// How long to wait for one line of a long-running kubectl (`get -w`, a waiting `delete`).
const LINE_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs a test body under [`TEST_TIMEOUT`]; a hang is a failure.
async fn within(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("the test finished within its time limit");
}

/// Reads lines until one satisfies `wanted`, each within [`LINE_TIMEOUT`]; panics with every
/// line seen otherwise.
async fn line_where<R: AsyncRead + Unpin>(
    lines: &mut Lines<BufReader<R>>,
    seen: &mut Vec<String>,
    wanted: impl Fn(&str) -> bool,
) -> String {
    loop {
        match tokio::time::timeout(LINE_TIMEOUT, lines.next_line()).await {
            Ok(Ok(Some(line))) => {
                seen.push(line.clone());
                if wanted(&line) {
                    return line;
                }
            }
            Ok(Ok(None)) => panic!("output ended; lines so far: {seen:#?}"),
            Ok(Err(e)) => panic!("reading output failed: {e}; lines so far: {seen:#?}"),
            Err(_) => panic!("no expected line within {LINE_TIMEOUT:?}; lines so far: {seen:#?}"),
        }
    }
}

/// The whitespace-separated words of `line`.
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Paths of every `null` in `v` (Kubernetes omits unset fields instead).
fn null_paths(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Null => out.push(path.to_string()),
        Value::Object(m) => {
            for (k, child) in m {
                null_paths(child, &format!("{path}.{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                null_paths(child, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "data": data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    }))
    .expect("a valid ConfigMap")
}

fn data_of(cm: &ConfigMap) -> BTreeMap<String, String> {
    cm.data.clone().unwrap_or_default()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn tls_env() -> TestEnv {
    TestEnv::builder()
        .tcp()
        .start()
        .await
        .expect("the server starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_namespace_sends_protobuf_and_the_namespace_is_active() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let out = kubectl.ok(&["create", "namespace", "foo"]).await;
        assert_eq!(out, "namespace/foo created\n");

        let ns = Api::<Namespace>::all(env.client())
            .get("foo")
            .await
            .expect("the namespace exists");
        assert_eq!(ns.status.and_then(|s| s.phase).as_deref(), Some("Active"));
        assert_eq!(
            ns.spec.and_then(|s| s.finalizers),
            Some(vec!["kubernetes".to_string()])
        );
        let labels = ns.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels
                .get("kubernetes.io/metadata.name")
                .map(String::as_str),
            Some("foo")
        );

        // Creating it again is a conflict, reported the way kubectl reports server errors.
        let again = kubectl.run(&["create", "namespace", "foo"]).await;
        assert_eq!(again.status.code(), Some(1), "{again:?}");
        assert_eq!(
            again.stderr,
            "Error from server (AlreadyExists): namespaces \"foo\" already exists\n"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_creates_then_configures_through_a_strategic_merge_patch_then_is_unchanged() {
    within(async {
        let Some(program) = kubectl_or_skip() else { return };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());

        let first = kubectl.file(
            "cm1.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels:\n    app: demo\ndata:\n  a: \"1\"\n  b: \"2\"\n",
        );
        assert_eq!(kubectl.ok(&["apply", "-f", &first]).await, "configmap/demo created\n");
        let created = cms.get("demo").await.expect("created");
        assert_eq!(data_of(&created), map(&[("a", "1"), ("b", "2")]));
        let annotations = created.metadata.annotations.clone().unwrap_or_default();
        let last_applied = annotations
            .get("kubectl.kubernetes.io/last-applied-configuration")
            .expect("kubectl records what it applied");
        let last_applied: Value = serde_json::from_str(last_applied).expect("the annotation is JSON");
        assert_eq!(last_applied["data"], json!({"a": "1", "b": "2"}));

        // `b` removed, `c` added, `a` changed: kubectl computes a three-way strategic merge
        // patch from the last applied configuration.
        let second = kubectl.file(
            "cm2.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels:\n    app: demo\ndata:\n  a: \"10\"\n  c: \"3\"\n",
        );
        assert_eq!(kubectl.ok(&["apply", "-f", &second]).await, "configmap/demo configured\n");
        let configured = cms.get("demo").await.expect("still there");
        assert_eq!(data_of(&configured), map(&[("a", "10"), ("c", "3")]), "b is gone");
        assert_eq!(configured.metadata.uid, created.metadata.uid, "patched in place");
        assert_eq!(configured.metadata.labels, Some(map(&[("app", "demo")])));
        let rv = |cm: &ConfigMap| -> u64 {
            cm.metadata.resource_version.as_deref().expect("rv").parse().expect("numeric rv")
        };
        assert!(rv(&configured) > rv(&created));

        assert_eq!(kubectl.ok(&["apply", "-f", &second]).await, "configmap/demo unchanged\n");
        let unchanged = cms.get("demo").await.expect("still there");
        assert_eq!(rv(&unchanged), rv(&configured), "nothing was written");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_lists_across_namespaces_and_prints_yaml_and_json() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let client = env.client();
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "other"}})).expect("ns");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
        let here = Api::<ConfigMap>::default_namespaced(client.clone())
            .create(&PostParams::default(), &configmap("here", &[("k", "v")]))
            .await
            .expect("create");
        Api::<ConfigMap>::namespaced(client.clone(), "other")
            .create(
                &PostParams::default(),
                &configmap("there", &[("x", "1"), ("y", "2")]),
            )
            .await
            .expect("create");

        let table = kubectl.ok(&["get", "cm", "-A"]).await;
        let mut lines = table.lines();
        assert_eq!(
            words(lines.next().expect("a header")),
            ["NAMESPACE", "NAME", "DATA", "AGE"],
            "{table}"
        );
        let rows: Vec<Vec<&str>> = lines.map(words).collect();
        assert!(
            rows.iter().any(|r| r[..3] == ["default", "here", "1"]),
            "{table}"
        );
        assert!(
            rows.iter().any(|r| r[..3] == ["other", "there", "2"]),
            "{table}"
        );

        // One namespace (the kubeconfig's) without -A: no NAMESPACE column.
        let table = kubectl.ok(&["get", "configmaps"]).await;
        assert_eq!(
            words(table.lines().next().expect("a header")),
            ["NAME", "DATA", "AGE"],
            "{table}"
        );
        assert!(!table.contains("there"), "{table}");

        // -o json of one object: the stored object (kubectl hides managedFields).
        let json_out = kubectl.ok(&["get", "cm", "here", "-o", "json"]).await;
        let printed: Value = serde_json::from_str(&json_out).expect("kubectl printed JSON");
        let mut stored = serde_json::to_value(&here).expect("serializable");
        if let Some(meta) = stored["metadata"].as_object_mut() {
            meta.remove("managedFields");
        }
        stored["apiVersion"] = json!("v1");
        stored["kind"] = json!("ConfigMap");
        assert_eq!(printed, stored);

        // -o json of a list: kubectl's List of full objects.
        let list: Value =
            serde_json::from_str(&kubectl.ok(&["get", "cm", "-A", "-o", "json"]).await)
                .expect("JSON");
        assert_eq!(list["kind"], "List");
        let items = list["items"].as_array().expect("items");
        let there = items
            .iter()
            .find(|i| i["metadata"]["name"] == "there")
            .expect("there is listed");
        assert_eq!(
            (&there["apiVersion"], &there["kind"]),
            (&json!("v1"), &json!("ConfigMap"))
        );
        assert_eq!(there["metadata"]["namespace"], "other");
        assert_eq!(there["data"], json!({"x": "1", "y": "2"}));

        // -o yaml parses back to the same object.
        let yaml = kubectl.ok(&["get", "cm", "here", "-o", "yaml"]).await;
        let from_yaml: Value = serde_saphyr::from_str(&yaml).expect("kubectl printed YAML");
        assert_eq!(from_yaml, stored, "{yaml}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_prints_changes_made_during_the_watch() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        cms.create(&PostParams::default(), &configmap("before", &[("k", "v")]))
            .await
            .expect("create");

        let mut child = kubectl.spawn(&["get", "cm", "-w"]);
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let mut seen = Vec::new();
        let header = line_where(&mut lines, &mut seen, |_| true).await;
        assert_eq!(words(&header), ["NAME", "DATA", "AGE"]);
        line_where(&mut lines, &mut seen, |l| {
            words(l).first() == Some(&"before")
        })
        .await;

        // Made after kubectl printed the list: it watches from the list's resourceVersion, so
        // it shows both whether or not its watch request has arrived yet.
        cms.create(&PostParams::default(), &configmap("during", &[("k", "v")]))
            .await
            .expect("create");
        let added = line_where(&mut lines, &mut seen, |l| {
            words(l).first() == Some(&"during")
        })
        .await;
        assert_eq!(words(&added)[1], "1", "{added}");
        cms.patch(
            "during",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k2": "v2", "k3": "v3"}})),
        )
        .await
        .expect("patch");
        let modified = line_where(&mut lines, &mut seen, |l| {
            words(l).first() == Some(&"during")
        })
        .await;
        assert_eq!(
            words(&modified)[1],
            "3",
            "the row shows the new data count: {modified}"
        );

        assert_eq!(
            child.try_wait().expect("status"),
            None,
            "kubectl keeps watching"
        );
        child.kill().await.expect("kubectl stops");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watching_one_object_prints_each_event_type() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        cms.create(&PostParams::default(), &configmap("one", &[("k", "v")]))
            .await
            .expect("create");
        cms.create(&PostParams::default(), &configmap("other", &[]))
            .await
            .expect("create");

        let mut child = kubectl.spawn(&["get", "cm", "one", "-w", "--output-watch-events"]);
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let mut seen = Vec::new();
        let header = line_where(&mut lines, &mut seen, |_| true).await;
        assert_eq!(words(&header), ["EVENT", "NAME", "DATA", "AGE"]);
        let added = line_where(&mut lines, &mut seen, |_| true).await;
        assert_eq!(words(&added)[..3], ["ADDED", "one", "1"]);

        // For one object kubectl watches from resourceVersion 0 and drops the watch's initial
        // ADDED event (it printed the object already), so a change made before its watch
        // request arrives is never shown, as with any Kubernetes server. Change the object
        // until kubectl reports a change; from then on its watch is open.
        let mut first_change = None;
        for i in 0..50 {
            cms.patch(
                "one",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"n": i.to_string()}})),
            )
            .await
            .expect("patch one");
            if let Ok(Ok(Some(line))) =
                tokio::time::timeout(Duration::from_millis(200), lines.next_line()).await
            {
                seen.push(line.clone());
                first_change = Some(line);
                break;
            }
        }
        let first_change =
            first_change.unwrap_or_else(|| panic!("no change shown; lines so far: {seen:#?}"));
        assert_eq!(
            words(&first_change)[..3],
            ["MODIFIED", "one", "2"],
            "{seen:#?}"
        );

        // Changes to another object are not shown; changes to this one are.
        cms.patch(
            "other",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"x": "1"}})),
        )
        .await
        .expect("patch other");
        cms.patch(
            "one",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k2": "v2"}})),
        )
        .await
        .expect("patch one");
        let modified = line_where(&mut lines, &mut seen, |_| true).await;
        assert_eq!(words(&modified)[..3], ["MODIFIED", "one", "3"], "{seen:#?}");
        cms.delete("one", &Default::default())
            .await
            .expect("delete");
        let deleted = line_where(&mut lines, &mut seen, |_| true).await;
        assert_eq!(words(&deleted)[..3], ["DELETED", "one", "3"], "{seen:#?}");
        child.kill().await.expect("kubectl stops");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_apply_and_delete_handle_every_object_of_a_multi_document_file() {
    within(async {
        let Some(program) = kubectl_or_skip() else { return };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let file = kubectl.file(
            "all.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m1\ndata:\n  a: \"1\"\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: md\nspec:\n  selector:\n    matchLabels: {app: md}\n  \
             template:\n    metadata:\n      labels: {app: md}\n    spec:\n      containers: [{name: c, image: busybox}]\n---\n\
             apiVersion: v1\nkind: Service\nmetadata:\n  name: msvc\nspec:\n  ports: [{port: 80}]\n  selector: {app: md}\n",
        );
        assert_eq!(
            kubectl.ok(&["create", "-f", &file]).await,
            "configmap/m1 created\ndeployment.apps/md created\nservice/msvc created\n"
        );
        let svc = Api::<k8s_openapi::api::core::v1::Service>::default_namespaced(env.client())
            .get("msvc")
            .await
            .expect("service");
        let spec = svc.spec.expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert!(spec.cluster_ip.is_some_and(|ip| !ip.is_empty()));

        // Objects made by `create` get their last-applied annotation on the first apply.
        let out = kubectl.run(&["apply", "-f", &file]).await;
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, "configmap/m1 configured\ndeployment.apps/md configured\nservice/msvc configured\n");
        assert_eq!(kubectl.ok(&["apply", "-f", &file]).await, "configmap/m1 unchanged\ndeployment.apps/md unchanged\nservice/msvc unchanged\n");

        assert_eq!(
            kubectl.ok(&["delete", "-f", &file]).await,
            "configmap \"m1\" deleted\ndeployment.apps \"md\" deleted\nservice \"msvc\" deleted\n"
        );
        // What is left is what every server keeps in `default`.
        let left = kubectl.ok(&["get", "cm,deploy,svc", "-o", "name"]).await;
        assert_eq!(
            left, "configmap/kube-root-ca.crt\nservice/kubernetes\n",
            "everything from the file is gone"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_prints_deleted_and_the_object_is_gone() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        cms.create(&PostParams::default(), &configmap("x", &[("a", "b")]))
            .await
            .expect("create");

        assert_eq!(
            kubectl.ok(&["delete", "cm", "x"]).await,
            "configmap \"x\" deleted\n"
        );
        assert_eq!(cms.get_opt("x").await.expect("get"), None);

        let again = kubectl.run(&["delete", "cm", "x"]).await;
        assert_eq!(again.status.code(), Some(1), "{again:?}");
        assert_eq!(
            again.stderr,
            "Error from server (NotFound): configmaps \"x\" not found\n"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_waits_until_another_client_removes_the_finalizer() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
        let mut held = configmap("held", &[]);
        held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
        cms.create(&PostParams::default(), &held)
            .await
            .expect("create");

        let mut child = kubectl.spawn(&["delete", "cm", "held"]);
        let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let mut seen = Vec::new();
        line_where(&mut lines, &mut seen, |l| l == "configmap \"held\" deleted").await;

        // The object is only marked; kubectl waits for it to go away.
        let marked = cms.get("held").await.expect("still there");
        assert!(marked.metadata.deletion_timestamp.is_some());
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            child.try_wait().expect("status"),
            None,
            "kubectl waits while the finalizer remains"
        );

        cms.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("remove the finalizer");
        let status = tokio::time::timeout(COMMAND_TIMEOUT, child.wait())
            .await
            .expect("kubectl stops waiting once the object is gone")
            .expect("status");
        let mut stderr = String::new();
        if let Some(mut err) = child.stderr.take() {
            tokio::io::AsyncReadExt::read_to_string(&mut err, &mut stderr)
                .await
                .expect("stderr");
        }
        assert!(
            status.success(),
            "kubectl delete exited with {status}: {stderr}"
        );
        assert_eq!(cms.get_opt("held").await.expect("get"), None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_raw_version_reports_kubernetes_1_32() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let version: Value =
            serde_json::from_str(&kubectl.ok(&["get", "--raw", "/version"]).await).expect("JSON");
        assert_eq!(
            (&version["major"], &version["minor"]),
            (&json!("1"), &json!("32"))
        );
        assert_eq!(version["gitVersion"], "v1.32.0");
        assert_eq!(version["platform"], "linux/amd64");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_configmap_and_deployment_send_protobuf_and_get_kubernetes_defaults() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let client = env.client();

        let out = kubectl
            .ok(&[
                "create",
                "configmap",
                "x",
                "--from-literal=a=b",
                "--from-literal=c=d",
            ])
            .await;
        assert_eq!(out, "configmap/x created\n");
        let cm = Api::<ConfigMap>::default_namespaced(client.clone())
            .get("x")
            .await
            .expect("created");
        assert_eq!(data_of(&cm), map(&[("a", "b"), ("c", "d")]));

        let out = kubectl
            .ok(&["create", "deployment", "web", "--image=nginx"])
            .await;
        assert_eq!(out, "deployment.apps/web created\n");
        let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
        let d = deploys.get("web").await.expect("created");
        assert_eq!(d.metadata.generation, Some(1));
        assert_eq!(d.metadata.labels, Some(map(&[("app", "web")])));
        let spec = d.spec.as_ref().expect("spec");
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.revision_history_limit, Some(10));
        assert_eq!(spec.progress_deadline_seconds, Some(600));
        assert_eq!(spec.selector.match_labels, Some(map(&[("app", "web")])));
        let strategy = spec.strategy.as_ref().expect("strategy");
        assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
        let rolling = strategy.rolling_update.as_ref().expect("rollingUpdate");
        assert_eq!(rolling.max_surge, Some(IntOrString::String("25%".into())));
        assert_eq!(
            rolling.max_unavailable,
            Some(IntOrString::String("25%".into()))
        );
        let pod = spec.template.spec.as_ref().expect("pod spec");
        assert_eq!(pod.restart_policy.as_deref(), Some("Always"));
        assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirst"));
        assert_eq!(pod.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(pod.termination_grace_period_seconds, Some(30));
        let container = &pod.containers[0];
        assert_eq!(
            (container.name.as_str(), container.image.as_deref()),
            ("nginx", Some("nginx"))
        );
        assert_eq!(container.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            container.termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(
            container.termination_message_policy.as_deref(),
            Some("File")
        );

        // Unset fields are omitted, not stored as null. (Go writes the zero `creationTimestamp`
        // of the pod template as null, and so does Kubernetes 1.32.)
        let raw = client
            .request_text(
                http::Request::get("/apis/apps/v1/namespaces/default/deployments/web")
                    .body(Vec::new())
                    .expect("request"),
            )
            .await
            .expect("raw get");
        let raw: Value = serde_json::from_str(&raw).expect("JSON");
        let mut nulls = Vec::new();
        null_paths(&raw, "", &mut nulls);
        nulls.retain(|p| p != ".spec.template.metadata.creationTimestamp");
        assert!(nulls.is_empty(), "null fields {nulls:?} in {raw}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scale_label_patch_and_replace_change_the_stored_objects() {
    within(async {
        let Some(program) = kubectl_or_skip() else { return };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let client = env.client();
        let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
        let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
        kubectl.ok(&["create", "deployment", "web", "--image=nginx"]).await;
        cms.create(&PostParams::default(), &configmap("x", &[("a", "1"), ("b", "2")])).await.expect("create");

        assert_eq!(kubectl.ok(&["scale", "deploy", "web", "--replicas=3"]).await, "deployment.apps/web scaled\n");
        let scaled = deploys.get("web").await.expect("get");
        assert_eq!(scaled.spec.as_ref().and_then(|s| s.replicas), Some(3));
        assert_eq!(scaled.metadata.generation, Some(2), "a spec change");

        assert_eq!(kubectl.ok(&["label", "cm", "x", "env=prod"]).await, "configmap/x labeled\n");
        assert_eq!(cms.get("x").await.expect("get").metadata.labels, Some(map(&[("env", "prod")])));

        let out = kubectl.ok(&["patch", "cm", "x", "--type=merge", "-p", r#"{"data":{"a":null,"c":"3"}}"#]).await;
        assert_eq!(out, "configmap/x patched\n");
        assert_eq!(data_of(&cms.get("x").await.expect("get")), map(&[("b", "2"), ("c", "3")]));

        // The default patch type is strategic: containers merge by name, the rest stays.
        let out = kubectl
            .ok(&["patch", "deploy", "web", "-p", r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}"#])
            .await;
        assert_eq!(out, "deployment.apps/web patched\n");
        let patched = deploys.get("web").await.expect("get");
        let pod = patched.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod spec");
        assert_eq!(pod.containers.len(), 1);
        assert_eq!(pod.containers[0].image.as_deref(), Some("nginx:1.27"));
        assert_eq!(pod.containers[0].termination_message_policy.as_deref(), Some("File"), "merged, not replaced");
        assert_eq!(patched.spec.as_ref().and_then(|s| s.replicas), Some(3));

        // A patch that changes nothing.
        let out = kubectl.ok(&["patch", "cm", "x", "--type=merge", "-p", r#"{"data":{"c":"3"}}"#]).await;
        assert_eq!(out, "configmap/x patched (no change)\n");

        // replace sends the whole file (with the live resourceVersion): labels are gone.
        let file = kubectl.file(
            "x.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: default\ndata:\n  only: \"1\"\n",
        );
        assert_eq!(kubectl.ok(&["replace", "-f", &file]).await, "configmap/x replaced\n");
        let replaced = cms.get("x").await.expect("get");
        assert_eq!(data_of(&replaced), map(&[("only", "1")]));
        assert_eq!(replaced.metadata.labels, None);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_deployments_prints_the_deployment_columns() {
    within(async {
        let Some(program) = kubectl_or_skip() else { return };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        kubectl.ok(&["create", "deployment", "web", "--image=nginx", "--replicas=2"]).await;
        Api::<Deployment>::default_namespaced(env.client())
            .patch_status(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1}})),
            )
            .await
            .expect("status");

        let table = kubectl.ok(&["get", "deploy"]).await;
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2, "{table}");
        assert_eq!(words(lines[0]), ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
        assert_eq!(words(lines[1])[..4], ["web", "1/2", "2", "1"], "{table}");

        let wide = kubectl.ok(&["get", "deployments", "-o", "wide"]).await;
        let lines: Vec<&str> = wide.lines().collect();
        assert_eq!(
            words(lines[0]),
            ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
        );
        assert_eq!(words(lines[1])[5..], ["nginx", "nginx", "app=web"], "{wide}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_api_resources_lists_configmaps_deployments_and_leases() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let out = kubectl.ok(&["api-resources"]).await;
        let mut lines = out.lines();
        assert_eq!(
            words(lines.next().expect("a header")),
            ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
        );
        let rows: Vec<Vec<&str>> = lines.map(words).collect();
        for expected in [
            &["configmaps", "cm", "v1", "true", "ConfigMap"][..],
            &["deployments", "deploy", "apps/v1", "true", "Deployment"],
            &["leases", "coordination.k8s.io/v1", "true", "Lease"],
            &["namespaces", "ns", "v1", "false", "Namespace"],
        ] {
            assert!(rows.iter().any(|r| r == expected), "{expected:?} in\n{out}");
        }
        // Subresources are not resources of their own.
        assert!(!out.contains("deployments/"), "{out}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_with_a_wrong_token_is_told_to_log_in() {
    within(async {
        let Some(program) = kubectl_or_skip() else { return };
        let env = tls_env().await;
        let path = env.kubeconfig_path().expect("kubeconfig");
        let token = env.server().admin_token().expect("an admin token");
        let text = std::fs::read_to_string(path).expect("read kubeconfig");
        assert!(text.contains(token), "the kubeconfig carries the admin token");
        let dir = tempfile::tempdir().expect("tempdir");
        let bad_path = dir.path().join("bad-kubeconfig");
        std::fs::write(&bad_path, text.replace(token, "wrong-token")).expect("write");
        let good = Kubectl::new(program.clone(), path);
        let bad = Kubectl::new(program, &bad_path);

        // A request kubectl decodes the Status of.
        let out = bad.run(&["get", "--raw", "/version"]).await;
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(out.stderr, "error: You must be logged in to the server (Unauthorized)\n");

        // With a cold discovery cache the failure surfaces through discovery, whose error
        // kubectl does not decode.
        let out = bad.run(&["get", "cm"]).await;
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(
            out.stderr.ends_with("error: You must be logged in to the server (the server has asked for the client to provide credentials)\n"),
            "{out:?}"
        );

        // With a warm cache (the token was rotated after discovery) the list itself fails.
        good.ok(&["get", "cm"]).await;
        let rotated = good.with_kubeconfig(&bad_path);
        let out = rotated.run(&["get", "cm"]).await;
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(out.stderr, "error: You must be logged in to the server (Unauthorized)\n");
        assert_eq!(out.stdout, "");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_of_a_missing_object_reports_not_found() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let out = kubectl.run(&["get", "cm", "nothere"]).await;
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert_eq!(
            out.stderr,
            "Error from server (NotFound): configmaps \"nothere\" not found\n"
        );
        assert_eq!(out.stdout, "");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_works_over_plain_http_on_loopback() {
    within(async {
        let Some(program) = kubectl_or_skip() else { return };
        let env = TestEnv::builder().tcp().insecure_http().start().await.expect("the server starts");
        let url = env.endpoint().expect("an endpoint").url.clone();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let kubectl = Kubectl::for_env(program, &env);

        assert_eq!(kubectl.ok(&["create", "namespace", "plain"]).await, "namespace/plain created\n");
        let manifest = kubectl.file(
            "cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: plain\ndata:\n  a: \"1\"\n",
        );
        assert_eq!(kubectl.ok(&["apply", "-f", &manifest]).await, "configmap/demo created\n");
        let table = kubectl.ok(&["get", "cm", "-n", "plain"]).await;
        let rows: Vec<Vec<&str>> = table.lines().map(words).collect();
        assert_eq!(rows[0], ["NAME", "DATA", "AGE"]);
        assert_eq!(rows[1][..2], ["demo", "1"], "{table}");
        let stored = Api::<ConfigMap>::namespaced(env.client(), "plain").get("demo").await.expect("stored");
        assert_eq!(data_of(&stored), map(&[("a", "1")]));
        assert_eq!(kubectl.ok(&["delete", "cm", "demo", "-n", "plain"]).await, "configmap \"demo\" deleted\n");
    })
    .await;
}
