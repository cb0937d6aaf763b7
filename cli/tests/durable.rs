//! Durable mode: every write acknowledged to a client survives SIGKILL of the server process,
//! also while the log is being compacted, and a log that lost acknowledged writes some other
//! way (truncated, cut to its header, deleted) stops the server at start instead of being
//! taken for a torn write; `--repair` accepts the loss and keeps the clock going forward.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use tokio::sync::Mutex;

/// How long a test waits for the server to start or to stop.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The write-ahead log in the data directory, and a compaction in progress.
const LOG: &str = "kore.wal";
const COMPACTION: &str = "kore.wal.tmp";

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// SIGKILL, and wait until the process is gone.
    fn kill(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

fn start(data_dir: &Path, kubeconfig: &Path, extra: &[&str]) -> Server {
    let _ = std::fs::remove_file(kubeconfig);
    let child = Command::new(env!("CARGO_BIN_EXE_kore"))
        .args(["apiserver", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kore starts");
    Server { child }
}

async fn client(kubeconfig: &PathBuf) -> kube::Client {
    for _ in 0..(TIMEOUT.as_millis() / 10) {
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

/// Waits for a server that must refuse to start, and returns what it wrote to stderr.
async fn refused(mut server: Server) -> String {
    let mut waited = Duration::ZERO;
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(waited < TIMEOUT, "the server did not refuse to start");
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    };
    let mut stderr = String::new();
    server
        .child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(
        !status.success(),
        "the server must exit with an error: {stderr}"
    );
    stderr
}

/// What the objects look like after a restart: name → (resourceVersion, payload).
async fn list(cms: &Api<ConfigMap>) -> HashMap<String, (u64, String)> {
    cms.list(&ListParams::default())
        .await
        .expect("list after restart")
        .items
        .into_iter()
        .map(|c| {
            let rv = c.metadata.resource_version.expect("rv");
            let payload = c
                .data
                .and_then(|d| d.get("payload").cloned())
                .unwrap_or_default();
            (
                c.metadata.name.expect("name"),
                (rv.parse().expect("numeric"), payload),
            )
        })
        .collect()
}

/// Creates one more object and returns its revision: the clock after a restart.
async fn next_rv(cms: &Api<ConfigMap>, name: &str) -> u64 {
    let mut after = ConfigMap::default();
    after.metadata.name = Some(name.into());
    cms.create(&PostParams::default(), &after)
        .await
        .expect("create after restart")
        .metadata
        .resource_version
        .expect("rv")
        .parse()
        .expect("numeric")
}

fn rv_of(cm: &ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("numeric")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill_and_the_clock_continues() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut server = start(&data, &kubeconfig, &[]);
    let cms: Api<ConfigMap> = Api::default_namespaced(client(&kubeconfig).await);

    // 16 writers create up to 1,000 ConfigMaps; the server is killed while they run.
    let acked: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
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
                            created.metadata.name.clone().expect("name"),
                            rv_of(&created),
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
    server.kill();
    for w in writers {
        w.await.expect("writer");
    }
    let acked = acked.lock().await.clone();
    assert!(acked.len() >= 600);

    let _restarted = start(&data, &kubeconfig, &[]);
    let cms: Api<ConfigMap> = Api::default_namespaced(client(&kubeconfig).await);
    let found = list(&cms).await;
    for (name, rv) in &acked {
        assert_eq!(
            found.get(name).map(|(rv, _)| *rv),
            Some(*rv),
            "{name} was acknowledged at {rv} and must survive"
        );
    }
    let max_rv = found.values().map(|(rv, _)| *rv).max().expect("objects");
    let rv = next_rv(&cms, "after-restart").await;
    assert!(rv > max_rv, "the clock continues above {max_rv}, got {rv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill_during_a_compaction() {
    // Issue 11, defect 6: the SIGKILL test again, with the log compacted every few MB and the
    // kill landing while a compaction writes its snapshot (`kore.wal.tmp` exists).
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let kubeconfig = dir.path().join("kubeconfig");
    let compact_early = ["--wal-compaction-floor", "262144"];
    // name → (revision, payload) of the last acknowledged write, over every kill.
    let acked: Arc<Mutex<HashMap<String, (u64, String)>>> = Arc::default();
    let mut hit = false;
    for round in 0..5 {
        let mut server = start(&data, &kubeconfig, &compact_early);
        let cms: Api<ConfigMap> = Api::default_namespaced(client(&kubeconfig).await);
        if round > 0 {
            // Everything acknowledged before the last kill is there.
            let found = list(&cms).await;
            for (name, (rv, payload)) in acked.lock().await.iter() {
                let (found_rv, found_payload) = found.get(name).expect("acknowledged, so kept");
                assert!(
                    found_rv >= rv,
                    "{name}: acknowledged at {rv}, found {found_rv}"
                );
                if found_rv == rv {
                    assert_eq!(found_payload, payload, "{name}");
                }
            }
        }
        // 16 writers keep updating 40 ConfigMaps each (about 2 MB live), so the log
        // outgrows four times the live data and is compacted again and again.
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..16)
            .map(|w| {
                let (cms, acked, stop) = (cms.clone(), acked.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut i = 0u64;
                    while !stop.load(Ordering::SeqCst) {
                        let name = format!("cm-{w:02}-{:02}", i % 40);
                        let payload = format!("{round}-{i}-{}", "y".repeat(3000));
                        let mut cm = ConfigMap::default();
                        cm.metadata.name = Some(name.clone());
                        cm.data = Some([("payload".to_string(), payload.clone())].into());
                        let written = match cms.get_opt(&name).await {
                            Ok(None) => cms.create(&PostParams::default(), &cm).await,
                            Ok(Some(_)) => cms.replace(&name, &PostParams::default(), &cm).await,
                            Err(e) => Err(e),
                        };
                        match written {
                            Ok(cm) => {
                                acked.lock().await.insert(name, (rv_of(&cm), payload));
                            }
                            Err(_) => return,
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        // Kill the moment a compaction is seen writing its snapshot.
        let mut waited = Duration::ZERO;
        while !data.join(COMPACTION).exists() {
            assert!(waited < TIMEOUT * 2, "no compaction started");
            tokio::time::sleep(Duration::from_micros(300)).await;
            waited += Duration::from_micros(300);
        }
        server.kill();
        stop.store(true, Ordering::SeqCst);
        for w in writers {
            w.await.expect("writer");
        }
        // The snapshot was still being written when the process died.
        if data.join(COMPACTION).exists() {
            hit = true;
            break;
        }
    }
    assert!(hit, "no kill landed inside a compaction");

    let _restarted = start(&data, &kubeconfig, &compact_early);
    let cms: Api<ConfigMap> = Api::default_namespaced(client(&kubeconfig).await);
    assert!(
        !data.join(COMPACTION).exists(),
        "the unfinished compaction is removed"
    );
    let found = list(&cms).await;
    let acked = acked.lock().await.clone();
    assert!(
        acked.len() >= 16 * 40 / 2,
        "{} objects written",
        acked.len()
    );
    let mut max_rv = 0;
    for (name, (rv, payload)) in &acked {
        let (found_rv, found_payload) = found.get(name).expect("acknowledged, so kept");
        assert!(
            found_rv >= rv,
            "{name}: acknowledged at {rv}, found {found_rv}"
        );
        if found_rv == rv {
            assert_eq!(found_payload, payload, "{name}");
        }
        max_rv = max_rv.max(*found_rv);
    }
    let rv = next_rv(&cms, "after-restart").await;
    assert!(rv > max_rv, "the clock continues above {max_rv}, got {rv}");
}

/// Copies the files of a data directory (it has no subdirectories).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        assert!(entry.file_type().expect("type").is_file(), "{entry:?}");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open")
        .set_len(len)
        .expect("truncate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_that_lost_acknowledged_writes_is_refused_at_start_until_repaired() {
    // Issue 11, defect 6: a log truncated in the middle, cut to its header, or deleted while
    // the certificates and tokens remain used to start with a warning or none, drop
    // acknowledged objects, and hand out their revisions again.
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut server = start(&data, &kubeconfig, &[]);
    let cms: Api<ConfigMap> = Api::default_namespaced(client(&kubeconfig).await);
    let mut acked = HashMap::new();
    for i in 0..200 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm-{i:03}"));
        cm.data = Some([("payload".to_string(), "z".repeat(300))].into());
        let created = cms
            .create(&PostParams::default(), &cm)
            .await
            .expect("create");
        acked.insert(format!("cm-{i:03}"), rv_of(&created));
    }
    let max_acked = *acked.values().max().expect("acked");
    server.kill();
    // Where the frames end; preallocated zeros follow up to the end of the file.
    let log = std::fs::read(data.join(LOG)).expect("log");
    let frames_end = log.iter().rposition(|&b| b != 0).expect("frames") as u64 + 1;

    let damaged = |name: &str, damage: &dyn Fn(&Path)| {
        let copy = dir.path().join(name);
        copy_dir(&data, &copy);
        damage(&copy);
        copy
    };
    let cases = [
        damaged("middle", &|d: &Path| truncate(&d.join(LOG), frames_end / 2)),
        damaged("header", &|d: &Path| truncate(&d.join(LOG), 8)),
        damaged("deleted", &|d: &Path| {
            std::fs::remove_file(d.join(LOG)).expect("rm")
        }),
        damaged("deleted-with-mark", &|d: &Path| {
            std::fs::remove_file(d.join(LOG)).expect("rm");
            std::fs::remove_file(d.join("kore.wal.mark")).expect("rm mark");
        }),
    ];
    for case in &cases {
        let before: Vec<_> = std::fs::read_dir(case)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        let stderr = refused(start(case, &kubeconfig, &[])).await;
        let log = case.join(LOG).display().to_string();
        assert!(stderr.contains(&log), "{case:?} names the log: {stderr}");
        assert!(
            stderr.contains("--repair"),
            "{case:?} says what to do: {stderr}"
        );
        let after: Vec<_> = std::fs::read_dir(case)
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .filter(|name| name != "kore.lock")
            .collect();
        let before: Vec<_> = before
            .into_iter()
            .filter(|name| name != "kore.lock")
            .collect();
        assert_eq!(
            after.len(),
            before.len(),
            "{case:?}: nothing was created or removed"
        );
    }
    let middle = refused(start(&cases[0], &kubeconfig, &[])).await;
    assert!(
        middle.contains("truncated") && middle.contains("at byte"),
        "{middle}"
    );
    let deleted = refused(start(&cases[3], &kubeconfig, &[])).await;
    assert!(deleted.contains("used before"), "{deleted}");

    // `--repair` accepts the loss: what is left is what was acknowledged, unchanged, and no
    // revision handed out before is handed out again.
    for case in &cases[..3] {
        let _repaired = start(case, &kubeconfig, &["--repair"]);
        let cms: Api<ConfigMap> = Api::default_namespaced(client(&kubeconfig).await);
        let found = list(&cms).await;
        for (name, (rv, _)) in found.iter().filter(|(name, _)| name.starts_with("cm-")) {
            assert_eq!(
                acked.get(name),
                Some(rv),
                "{case:?}: {name} as acknowledged"
            );
        }
        assert!(found.len() < acked.len(), "{case:?}: writes were lost");
        let rv = next_rv(&cms, "after-repair").await;
        assert!(
            rv > max_acked,
            "{case:?}: the clock continues above {max_acked}, got {rv}"
        );
    }
}
