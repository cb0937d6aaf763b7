//! `kore run`: the operators alone, against an API server in another process, through a
//! kubeconfig; and a clear refusal of operators it does not know. Also the kubeconfig
//! `kore apiserver --kubeconfig-client-cert` writes for such clients.

mod common;

use std::time::Duration;

use common::{Process, kore};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kore_sample_controller::{Foo, FooSpec};
use kore_testenv::wait_for;
use kube::api::{Api, PostParams};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kore_apiserver_writes_a_client_certificate_kubeconfig_on_request() {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let server = Process::start("apiserver", &["--kubeconfig-client-cert"]).await;
    let yaml = std::fs::read_to_string(&server.kubeconfig).expect("the kubeconfig");
    assert!(yaml.contains("client-certificate-data"), "{yaml}");
    assert!(!yaml.contains("token:"), "no token: {yaml}");
    let review = Api::<SelfSubjectReview>::all(server.client().await)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("the certificate authenticates");
    let user = review.status.and_then(|s| s.user_info).expect("user info");
    assert_eq!(user.username.as_deref(), Some("kubernetes-admin"));
    assert!(
        user.groups
            .unwrap_or_default()
            .contains(&"system:masters".to_owned())
    );
}

const CONVERGE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kore_run_reconciles_a_foo_on_a_separate_api_server_with_leader_election() {
    let server = Process::start("apiserver", &[]).await;
    let client = server.client().await;
    kore_operator::install::crds(&client, &kore_sample_controller::operator())
        .await
        .expect("the CRD is installed and Established");

    let probes = free_port();
    let probe_addr = format!("127.0.0.1:{probes}");
    let mut operator = kore()
        .arg("run")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args([
            "--operators",
            "sample-controller",
            "--leader-election-namespace",
            "default",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            &probe_addr,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kore run starts");

    let foos: Api<Foo> = Api::namespaced(client.clone(), "default");
    let foo = Foo::new(
        "example",
        FooSpec {
            deployment_name: "example-deploy".into(),
            replicas: Some(2),
        },
    );
    foos.create(&PostParams::default(), &foo)
        .await
        .expect("Foo created");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    wait_for(CONVERGE, || async {
        let d = deployments.get_opt("example-deploy").await.ok()??;
        (d.spec?.replicas == Some(2)).then_some(())
    })
    .await
    .expect("the Foo's Deployment exists with its replicas");
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let lease = leases
        .get("sample-controller")
        .await
        .expect("the Lease is taken");
    assert!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| !h.is_empty())
    );
    assert!(
        operator.try_wait().expect("polled").is_none(),
        "kore run still runs"
    );

    // The probes and the metrics are served where the flag says.
    let ready = http_get(&probe_addr, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let metrics = http_get(&probe_addr, "/metrics").await;
    assert!(
        metrics.contains("controller_runtime_reconcile_total{")
            && metrics.contains("leader_election_master_status"),
        "{metrics}"
    );

    // SIGTERM stops it cleanly and gives the Lease up.
    let pid = operator.id().expect("running").to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("kill runs");
    assert!(killed.success());
    let status = tokio::time::timeout(CONVERGE, operator.wait())
        .await
        .expect("kore run stops after SIGTERM")
        .expect("waited");
    assert!(status.success(), "{status:?}");
    let lease = leases
        .get("sample-controller")
        .await
        .expect("the Lease stays");
    assert!(
        lease
            .spec
            .and_then(|s| s.holder_identity)
            .is_none_or(|h| h.is_empty()),
        "the Lease was released"
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await {
            stream
                .write_all(
                    format!("GET {path} HTTP/1.1\r\nHost: kore\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await
                .expect("request sent");
            let mut text = String::new();
            stream
                .read_to_string(&mut text)
                .await
                .expect("response read");
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing serves {addr}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_unknown_operator_name_is_refused_with_the_known_ones() {
    let out = kore()
        .args(["run", "--operators", "configmap-sync,nope"])
        .output()
        .await
        .expect("kore runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown operator `nope`"), "{stderr}");
    assert!(
        stderr.contains("known operators: configmap-sync, sample-controller"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kore_run_without_the_crds_installed_says_which_to_install() {
    let server = Process::start("apiserver", &[]).await;
    let out = kore()
        .arg("run")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args([
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        ])
        .output()
        .await
        .expect("kore runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "does not serve the CRDs configmapsyncs.sync.kore.dev, foos.samplecontroller.k8s.io"
        ) && stderr.contains("kubectl apply -f deploy/crds/"),
        "{stderr}"
    );
}
