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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_the_builtin_schemas() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = TestEnv::builder().tcp().start().await.expect("start");
        let kubectl = Kubectl::for_env(program, &env);

        let out = kubectl.ok(&["explain", "deployment.spec"]).await;
        for expected in [
            "GROUP:      apps",
            "KIND:       Deployment",
            "VERSION:    v1",
            "FIELD: spec <DeploymentSpec>",
            "DeploymentSpec is the specification of the desired behavior of the",
            "selector\t<LabelSelector> -required-",
            "template\t<PodTemplateSpec> -required-",
            "replicas\t<integer>",
            "strategy\t<DeploymentStrategy>",
        ] {
            assert!(out.contains(expected), "{expected:?} in:\n{out}");
        }

        let out = kubectl.ok(&["explain", "pods.spec.containers"]).await;
        for expected in [
            "KIND:       Pod",
            "VERSION:    v1",
            "FIELD: containers <[]Container>",
            "A single application container that you want to run within a pod.",
            "name\t<string> -required-",
            "image\t<string>",
            "env\t<[]EnvVar>",
            "resources\t<ResourceRequirements>",
        ] {
            assert!(out.contains(expected), "{expected:?} in:\n{out}");
        }

        let out = kubectl.ok(&["explain", "deploy", "--recursive"]).await;
        for expected in [
            "KIND:       Deployment",
            "Deployment enables declarative updates for Pods and ReplicaSets.",
            "FIELDS:",
            "  apiVersion\t<string>",
            "  metadata\t<ObjectMeta>",
            "    matchExpressions\t<[]LabelSelectorRequirement>",
            "        containers\t<[]Container> -required-",
            "          image\t<string>",
        ] {
            assert!(out.contains(expected), "{expected:?} in:\n{out}");
        }

        let out = kubectl.run(&["explain", "deployment.spec.nope"]).await;
        assert!(!out.status.success(), "{out:?}");
        assert!(
            out.stderr.contains("field \"nope\" does not exist"),
            "{out:?}"
        );
    })
    .await
    .expect("the test finishes in time");
}

/// A Deployment as a user applies it, with `IMAGE` to replace.
const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web, tier: front}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: nginx, image: "IMAGE", ports: [{containerPort: 80}]}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_merges_lists_by_the_schemas_merge_keys() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = TestEnv::builder().tcp().start().await.expect("start");
        let kubectl = Kubectl::for_env(program, &env);
        let file = kubectl.file("web.yaml", &DEPLOYMENT.replace("IMAGE", "nginx:1.27"));
        kubectl.ok(&["apply", "-f", &file]).await;

        // Someone else adds a sidecar; the next apply changes the image and drops a label
        // but must keep the sidecar: containers merge by name.
        let sidecar = r#"{"spec":{"template":{"spec":{"containers":[{"name":"log","image":"busybox:1.36"}]}}}}"#;
        kubectl
            .ok(&["patch", "deployment", "web", "--type=strategic", "-p", sidecar])
            .await;
        let changed = DEPLOYMENT
            .replace("IMAGE", "nginx:1.28")
            .replace(", tier: front", "");
        let file = kubectl.file("web.yaml", &changed);
        let out = kubectl.run(&["apply", "-f", &file, "-v=5"]).await;
        assert!(out.status.success(), "{out:?}");
        // kubectl says (at -v=5) when it cannot compute the patch from the v3 document and
        // falls back to its compiled-in types.
        assert!(
            !out.stderr.contains("OpenAPI V3 path")
                && !out.stderr.contains("error calculating patch from openapi v3 spec"),
            "kubectl computed the patch from the v3 schema: {out:?}"
        );

        let got = kubectl
            .ok(&["get", "deployment", "web", "-o", "json"])
            .await;
        let got: serde_json::Value = serde_json::from_str(&got).expect("json");
        let containers: Vec<(&str, &str)> = got["spec"]["template"]["spec"]["containers"]
            .as_array()
            .expect("containers")
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or_default(),
                    c["image"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            containers,
            [("nginx", "nginx:1.28"), ("log", "busybox:1.36")],
            "{got}"
        );
        assert_eq!(got["metadata"]["labels"], serde_json::json!({"app": "web"}));

        let out = kubectl.run(&["diff", "-f", &file]).await;
        assert_eq!(out.status.code(), Some(0), "no difference left: {out:?}");
    })
    .await
    .expect("the test finishes in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_the_v2_protobuf_document() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = TestEnv::builder().tcp().start().await.expect("start");
        let kubectl = Kubectl::for_env(program, &env);
        let out = kubectl
            .ok(&[
                "explain",
                "deployment.spec.template.spec.containers",
                "--output=plaintext-openapiv2",
            ])
            .await;
        for expected in [
            "KIND:     Deployment",
            "VERSION:  apps/v1",
            "RESOURCE: containers <[]Object>",
            "A single application container that you want to run within a pod.",
            "   name\t<string> -required-",
        ] {
            assert!(out.contains(expected), "{expected:?} in:\n{out}");
        }
    })
    .await
    .expect("the test finishes in time");
}
