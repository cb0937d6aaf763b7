//! kubectl against the built-in kinds added for Kubernetes 1.33 parity: the short names
//! resolve through discovery and `kubectl get` prints the server's Table columns.

use std::time::Duration;

use kore_testenv::TestEnv;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};

/// How long the whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(180);

/// A StatefulSet, a Job, a CronJob and a Node, as a user would write them.
const MANIFESTS: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: nginx, image: "nginx:1.27"}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: pi}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: pi, image: "perl:5.34"}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: hello}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: hello, image: "busybox:1.36"}]
---
apiVersion: v1
kind: Node
metadata: {name: n1}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_the_new_kinds_by_short_name() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = TestEnv::builder().tcp().start().await.expect("start");
        let kubectl = Kubectl::for_env(program, &env);
        let file = kubectl.file("kinds.yaml", MANIFESTS);
        kubectl.ok(&["apply", "-f", &file]).await;

        let out = kubectl.ok(&["get", "sts"]).await;
        let header: Vec<&str> = out
            .lines()
            .next()
            .expect("header")
            .split_whitespace()
            .collect();
        assert_eq!(header, ["NAME", "READY", "AGE"], "{out}");
        assert!(out.contains("web") && out.contains("0/1"), "{out}");

        let out = kubectl.ok(&["get", "job"]).await;
        let header: Vec<&str> = out
            .lines()
            .next()
            .expect("header")
            .split_whitespace()
            .collect();
        assert_eq!(
            header,
            ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
            "{out}"
        );
        assert!(out.contains("Running"), "{out}");

        let out = kubectl.ok(&["get", "cj"]).await;
        assert!(out.contains("*/5 * * * *"), "{out}");

        let out = kubectl.ok(&["get", "no"]).await;
        let header: Vec<&str> = out
            .lines()
            .next()
            .expect("header")
            .split_whitespace()
            .collect();
        assert_eq!(
            header,
            ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
            "{out}"
        );

        // Every short name of the new kinds resolves (an empty list prints to stderr only).
        kubectl
            .ok(&[
                "get",
                "ds,pdb,ing,pv,pvc,sc,pc,rc,ep,limits,quota,netpol,csr",
            ])
            .await;
    })
    .await
    .expect("the test finished within its time limit");
}
