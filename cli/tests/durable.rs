//! Durable mode: every write acknowledged to a client survives SIGKILL of the server process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use tokio::sync::Mutex;

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(data_dir: &Path, kubeconfig: &Path) -> Server {
    let _ = std::fs::remove_file(kubeconfig);
    let child = Command::new(env!("CARGO_BIN_EXE_kore"))
        .args(["apiserver", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kore starts");
    Server { child }
}

async fn client(kubeconfig: &PathBuf) -> kube::Client {
    for _ in 0..500 {
        if let Ok(kc) = kube::config::Kubeconfig::read_from(kubeconfig) {
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .expect("kubeconfig is usable");
            return kube::Client::try_from(config).expect("client");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the server did not write its kubeconfig");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill_and_the_clock_continues() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut server = start(&data, &kubeconfig);
    let cms: Api<ConfigMap> = Api::default_namespaced(client(&kubeconfig).await);

    // 16 writers create up to 1,000 ConfigMaps; the server is killed while they run.
    let acked: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..16)
        .map(|_| {
            let (cms, acked, next) = (cms.clone(), acked.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= 1000 {
                        return;
                    }
                    let mut cm = ConfigMap::default();
                    cm.metadata.name = Some(format!("cm-{i:04}"));
                    cm.data = Some([("payload".to_string(), "x".repeat(200))].into());
                    match cms.create(&PostParams::default(), &cm).await {
                        Ok(created) => acked.lock().await.push((
                            created.metadata.name.expect("name"),
                            created.metadata.resource_version.expect("rv"),
                        )),
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    while acked.lock().await.len() < 600 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.child.kill().expect("SIGKILL");
    server.child.wait().expect("reaped");
    for w in writers {
        w.await.expect("writer");
    }
    let acked = acked.lock().await.clone();
    assert!(acked.len() >= 600);

    let _restarted = start(&data, &kubeconfig);
    let cms: Api<ConfigMap> = Api::default_namespaced(client(&kubeconfig).await);
    let listed = cms
        .list(&ListParams::default())
        .await
        .expect("list after restart");
    let found: std::collections::HashMap<String, String> = listed
        .items
        .into_iter()
        .map(|c| {
            (
                c.metadata.name.expect("name"),
                c.metadata.resource_version.expect("rv"),
            )
        })
        .collect();
    for (name, rv) in &acked {
        assert_eq!(
            found.get(name),
            Some(rv),
            "{name} was acknowledged at {rv} and must survive"
        );
    }
    let max_rv: u64 = found
        .values()
        .map(|rv| rv.parse::<u64>().expect("numeric"))
        .max()
        .expect("objects");
    let mut after = ConfigMap::default();
    after.metadata.name = Some("after-restart".into());
    let created = cms
        .create(&PostParams::default(), &after)
        .await
        .expect("create after restart");
    let rv: u64 = created
        .metadata
        .resource_version
        .expect("rv")
        .parse()
        .expect("numeric");
    assert!(rv > max_rv, "the clock continues above {max_rv}, got {rv}");
}
