//! Writes the binary seed inputs (protobuf bodies, write-ahead logs) that cannot be written by
//! hand. Run after a format change: `cargo test -p kore-fuzz --test seeds -- --ignored`.

use std::path::Path;
use std::sync::mpsc;

use bytes::Bytes;
use kore_apiserver::storage::{Backend, Record, WalBackend};
use prost::Message;
use serde_json::json;

fn corpus(target: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("the corpus directory can be created");
    dir
}

/// A protobuf body as client-go sends it: the `k8s\0` magic and a `runtime.Unknown` envelope.
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

#[test]
#[ignore = "writes the seed corpus; run by hand"]
fn protobuf_bodies() {
    use k8s_pb::api::apps::v1 as apps;
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let meta = |name: &str| ObjectMeta {
        name: Some(name.into()),
        labels: [("app".to_string(), "seed".to_string())].into(),
        ..Default::default()
    };
    let container = core::Container {
        name: Some("main".into()),
        image: Some("busybox".into()),
        ports: vec![core::ContainerPort {
            container_port: Some(80),
            protocol: Some("TCP".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let pod_spec = core::PodSpec {
        containers: vec![container],
        ..Default::default()
    };
    let configmap = core::ConfigMap {
        metadata: Some(meta("seed")),
        data: [("k".to_string(), "v".to_string())].into(),
        binary_data: [("b".to_string(), b"hello".to_vec())].into(),
        ..Default::default()
    };
    let pod = core::Pod {
        metadata: Some(meta("seed")),
        spec: Some(pod_spec.clone()),
        ..Default::default()
    };
    let deployment = apps::Deployment {
        metadata: Some(meta("seed")),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(2),
            selector: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: [("app".to_string(), "seed".to_string())].into(),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta("")),
                spec: Some(pod_spec),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = corpus("body_protobuf");
    let files = [
        (
            "0-configmap",
            envelope("v1", "ConfigMap", configmap.encode_to_vec()),
        ),
        ("1-pod", envelope("v1", "Pod", pod.encode_to_vec())),
        (
            "2-deployment",
            envelope("apps/v1", "Deployment", deployment.encode_to_vec()),
        ),
    ];
    for (file, bytes) in files {
        // The first byte picks the resource (see `request::RESOURCES`).
        let mut input = file.as_bytes()[..1].to_vec();
        input.extend(bytes);
        std::fs::write(dir.join(file), input).expect("written");
    }
}

fn submit(backend: &WalBackend, records: Vec<Record>) {
    let (tx, rx) = mpsc::channel();
    backend.submit(
        records,
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    rx.recv().expect("an answer").expect("durable");
}

fn record(key: &str, rv: u64, value: Option<serde_json::Value>) -> Record {
    Record {
        key: key.into(),
        rv,
        value: value.map(|v| Bytes::from(v.to_string())),
    }
}

#[test]
#[ignore = "writes the seed corpus; run by hand"]
fn write_ahead_logs() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("kore.wal");
    let out = corpus("wal_recovery");
    {
        let backend = WalBackend::open(dir.path()).expect("opens");
        backend.load().expect("loads");
    }
    std::fs::write(out.join("0-empty-snapshot"), used(&log)).expect("w");
    {
        let backend = WalBackend::open(dir.path()).expect("opens");
        backend.load().expect("loads");
        submit(
            &backend,
            vec![
                record(
                    "/configmaps/default/a",
                    2,
                    Some(json!({"kind": "ConfigMap", "data": {"k": "v"}})),
                ),
                record(
                    "/configmaps/default/b",
                    3,
                    Some(json!({"kind": "ConfigMap"})),
                ),
            ],
        );
        submit(&backend, vec![record("/configmaps/default/a", 4, None)]);
    }
    let bytes = used(&log);
    std::fs::write(out.join("1-puts-and-delete"), &bytes).expect("w");
    std::fs::write(out.join("2-torn-tail"), &bytes[..bytes.len() - 7]).expect("w");
    std::fs::write(out.join("3-nothing"), b"").expect("w");
}

/// The log without its preallocated zeros (AFL++ wants seeds well under 1 MiB; recovery reads
/// a zero tail as unwritten space either way).
fn used(log: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(log).expect("the log is readable");
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    bytes.truncate(end);
    bytes
}
