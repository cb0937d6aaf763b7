//! What kubectl expects of a kubelet, over the API and a real socket: `pods/log` told from
//! the pod's status (current, `previous`, `follow`, `container`), Kubernetes' answers for
//! pods without logs, and a clear 400 for exec/attach/portforward/proxy.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
use kore_testenv::{TestEnv, wait_for};
use kube::api::{Api, DeleteParams, LogParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn create(pods: &Api<Pod>, name: &str, meta: Value, spec: Value) {
    let mut metadata = meta;
    metadata["name"] = json!(name);
    let p: Pod = serde_json::from_value(json!({"metadata": metadata, "spec": spec})).expect("pod");
    pods.create(&PostParams::default(), &p)
        .await
        .expect("create");
}

async fn running(pods: &Api<Pod>, name: &str) {
    wait_for(WAIT, || async {
        let p = pods.get(name).await.ok()?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await
    .expect("running");
}

fn web() -> Value {
    json!({"containers": [{"name": "web", "image": "nginx"}]})
}

#[tokio::test]
async fn logs_tell_the_containers_lifecycle() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");

    // Not scheduled: an empty log, as Kubernetes answers when there is no kubelet to ask.
    create(&pods, "early", json!({}), web()).await;
    let log = pods
        .logs("early", &LogParams::default())
        .await
        .expect("log");
    assert_eq!(log, "");

    let _sim = env.start_simulation(1).await.expect("simulation");
    running(&pods, "early").await;
    let log = pods
        .logs("early", &LogParams::default())
        .await
        .expect("log");
    assert_eq!(
        log,
        "kore: container web started (image nginx; simulated, no process runs)\n"
    );
    let stamped = pods
        .logs(
            "early",
            &LogParams {
                timestamps: true,
                ..LogParams::default()
            },
        )
        .await
        .expect("log");
    assert!(
        stamped.contains("Z kore: container web started"),
        "{stamped}"
    );

    // A finished pod: started, then exited with its code.
    let fails = json!({"annotations": {"kore.dev/exit-after": "10ms", "kore.dev/exit-code": "3"}});
    let mut spec = web();
    spec["restartPolicy"] = json!("Never");
    create(&pods, "done", fails, spec).await;
    wait_for(WAIT, || async {
        let p = pods.get("done").await.ok()?;
        (p.status?.phase.as_deref() == Some("Failed")).then_some(())
    })
    .await
    .expect("failed");
    let log = pods.logs("done", &LogParams::default()).await.expect("log");
    assert!(
        log.ends_with("kore: container web exited with code 3 (Error)\n"),
        "{log}"
    );

    // previous: none yet, as the kubelet answers.
    let e = pods
        .logs(
            "early",
            &LogParams {
                previous: true,
                ..LogParams::default()
            },
        )
        .await
        .expect_err("no previous instance");
    let s = api_error(e);
    assert_eq!(s.code, 400);
    assert_eq!(
        s.message,
        "previous terminated container \"web\" in pod \"early\" not found"
    );
    // A previous instance in the status is told too.
    let last = json!({"status": {"containerStatuses": [{
        "name": "web", "image": "nginx", "imageID": "", "ready": true, "restartCount": 1,
        "state": {"running": {"startedAt": "2026-01-01T00:01:00Z"}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
            "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:59Z"}},
    }]}});
    pods.patch_status("early", &PatchParams::default(), &Patch::Merge(&last))
        .await
        .expect("status");
    let prev = pods
        .logs(
            "early",
            &LogParams {
                previous: true,
                ..LogParams::default()
            },
        )
        .await
        .expect("previous");
    assert!(
        prev.ends_with("kore: container web exited with code 137 (OOMKilled)\n"),
        "{prev}"
    );
}

#[tokio::test]
async fn logs_pick_a_container_as_kubernetes_does() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let spec = json!({
        "initContainers": [{"name": "setup", "image": "busybox"}],
        "containers": [{"name": "web", "image": "nginx"}, {"name": "side", "image": "envoy"}],
    });
    create(&pods, "two", json!({}), spec).await;
    running(&pods, "two").await;
    let s = api_error(
        pods.logs("two", &LogParams::default())
            .await
            .expect_err("which container?"),
    );
    assert_eq!(s.code, 400);
    assert_eq!(
        s.message,
        "a container name must be specified for pod two, choose one of: [setup web side]"
    );
    let s = api_error(
        pods.logs(
            "two",
            &LogParams {
                container: Some("nope".into()),
                ..LogParams::default()
            },
        )
        .await
        .expect_err("unknown container"),
    );
    assert_eq!(s.message, "container nope is not valid for pod two");
    let side = pods
        .logs(
            "two",
            &LogParams {
                container: Some("side".into()),
                ..LogParams::default()
            },
        )
        .await
        .expect("side");
    assert!(
        side.contains("container side started (image envoy"),
        "{side}"
    );
    let setup = pods
        .logs(
            "two",
            &LogParams {
                container: Some("setup".into()),
                ..LogParams::default()
            },
        )
        .await
        .expect("setup");
    assert!(
        setup.ends_with("container setup exited with code 0 (Completed)\n"),
        "{setup}"
    );
    let s = api_error(
        pods.logs(
            "two",
            &LogParams {
                tail_lines: Some(-1),
                ..LogParams::default()
            },
        )
        .await
        .expect_err("negative tail"),
    );
    assert_eq!(s.code, 422);
}

#[tokio::test]
async fn a_waiting_container_answers_the_kubelets_400() {
    let env = TestEnv::start().await.expect("start");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    create(&pods, "w", json!({}), web()).await;
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "w"},
        "target": {"kind": "Node", "name": "elsewhere"}});
    pods.create_subresource::<Value, Value>("binding", "w", &PostParams::default(), &binding)
        .await
        .expect("bind");
    let waiting = json!({"status": {"containerStatuses": [{"name": "web", "image": "nginx",
        "imageID": "", "ready": false, "restartCount": 0,
        "state": {"waiting": {"reason": "ContainerCreating"}}}]}});
    pods.patch_status("w", &PatchParams::default(), &Patch::Merge(&waiting))
        .await
        .expect("status");
    let s = api_error(
        pods.logs("w", &LogParams::default())
            .await
            .expect_err("waiting"),
    );
    assert_eq!(s.code, 400);
    assert_eq!(
        s.message,
        "container \"web\" in pod \"w\" is waiting to start: ContainerCreating"
    );
}

#[tokio::test]
async fn a_followed_log_ends_when_the_container_stops() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let mut spec = web();
    spec["restartPolicy"] = json!("Never");
    create(
        &pods,
        "job",
        json!({"annotations": {"kore.dev/exit-after": "2s"}}),
        spec,
    )
    .await;
    running(&pods, "job").await;
    let followed = tokio::time::timeout(
        WAIT,
        pods.logs(
            "job",
            &LogParams {
                follow: true,
                ..LogParams::default()
            },
        ),
    )
    .await
    .expect("the stream ends")
    .expect("log");
    assert!(followed.contains("container web started"), "{followed}");
    assert!(
        followed.ends_with("container web exited with code 0 (Completed)\n"),
        "{followed}"
    );
}

#[tokio::test]
async fn exec_attach_portforward_and_proxy_say_containers_are_simulated() {
    let env = TestEnv::start().await.expect("start");
    let _sim = env.start_simulation(1).await.expect("simulation");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    create(&pods, "p", json!({}), web()).await;
    for sub in ["exec", "attach", "portforward", "proxy"] {
        let req = http::Request::post(format!("/api/v1/namespaces/default/pods/p/{sub}"))
            .body(Vec::new())
            .expect("request");
        let s = api_error(
            env.client()
                .request::<Value>(req)
                .await
                .expect_err("refused"),
        );
        assert_eq!(s.code, 400, "{sub}");
        assert!(
            s.message.contains("kore simulates this pod's containers"),
            "{sub}: {}",
            s.message
        );
    }
    let req = http::Request::get("/api/v1/nodes/kore-node-0/proxy")
        .body(Vec::new())
        .expect("request");
    let s = api_error(
        env.client()
            .request::<Value>(req)
            .await
            .expect_err("refused"),
    );
    assert_eq!(s.code, 400);
    assert!(s.message.contains("node \"kore-node-0\""), "{}", s.message);
    // A pod that does not exist is a 404, as Kubernetes answers.
    let req = http::Request::post("/api/v1/namespaces/default/pods/nope/exec")
        .body(Vec::new())
        .expect("request");
    let s = api_error(
        env.client()
            .request::<Value>(req)
            .await
            .expect_err("absent"),
    );
    assert_eq!(s.code, 404);
    let _: Api<Node> = Api::all(env.client());
    pods.delete("p", &DeleteParams::default())
        .await
        .expect("delete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_exec_and_nodes_over_a_socket() {
    let Some(program) = kubectl_or_skip() else {
        return;
    };
    let env = TestEnv::builder().tcp().start().await.expect("server");
    let _sim = env.start_simulation(2).await.expect("simulation");
    let kubectl = Kubectl::for_env(program, &env);
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    create(&pods, "web", json!({}), web()).await;
    running(&pods, "web").await;

    let out = kubectl.ok(&["logs", "web"]).await;
    assert_eq!(
        out,
        "kore: container web started (image nginx; simulated, no process runs)\n"
    );
    let out = tokio::time::timeout(WAIT, kubectl.run(&["exec", "web", "--", "ls"]))
        .await
        .expect("exec does not hang");
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("kore simulates this pod's containers"),
        "{}",
        out.stderr
    );

    let out = kubectl.ok(&["get", "nodes", "-o", "wide"]).await;
    assert!(out.contains("kore-node-0"), "{out}");
    assert!(out.contains("Ready"), "{out}");
    let out = kubectl.ok(&["describe", "node", "kore-node-1"]).await;
    assert!(out.contains("kubernetes.io/hostname=kore-node-1"), "{out}");
    let out = kubectl.ok(&["get", "pods", "-o", "wide"]).await;
    assert!(out.contains("Running"), "{out}");
    assert!(out.contains("10.244."), "{out}");
}
