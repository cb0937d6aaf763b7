//! kubectl 1.32 with CustomResourceDefinitions over a real socket: apply a CRD, wait for it to
//! be Established, apply a custom resource, and read it back through its plural, short name,
//! printer columns, scale subresource and deletion.
//!
//! If kubectl is not on `PATH` a test prints `skipping: kubectl not found` and returns. Every
//! kubectl process runs under [`kore_testenv::kubectl::COMMAND_TIMEOUT`]; every test under [`TEST_TIMEOUT`].

use std::future::Future;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kore_testenv::TestEnv;
use kore_testenv::kubectl::{Kubectl, kubectl_or_skip};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

/// How long a whole test may take.
const TEST_TIMEOUT: Duration = Duration::from_secs(180);

async fn within(body: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_TIMEOUT, body)
        .await
        .expect("the test finished within its time limit");
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
              replicas: {type: integer}
          status:
            type: object
            properties:
              replicas: {type: integer}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
"#;

const WIDGET: &str = r#"apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
  color: red
  replicas: 1
"#;

async fn tls_env() -> TestEnv {
    TestEnv::builder()
        .tcp()
        .start()
        .await
        .expect("the server starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_a_crd_waits_for_it_and_prints_its_columns() {
    within(async {
        let Some(program) = kubectl_or_skip() else {
            return;
        };
        let env = tls_env().await;
        let kubectl = Kubectl::for_env(program, &env);
        let crd = kubectl.file("crd.yaml", CRD);
        let out = kubectl.ok(&["apply", "-f", &crd]).await;
        assert_eq!(
            out,
            "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created\n"
        );
        let out = kubectl
            .ok(&[
                "wait",
                "--for=condition=Established",
                "crd/widgets.example.com",
                "--timeout=30s",
            ])
            .await;
        assert_eq!(
            out,
            "customresourcedefinition.apiextensions.k8s.io/widgets.example.com condition met\n"
        );

        let widget = kubectl.file("w1.yaml", WIDGET);
        let out = kubectl.ok(&["apply", "-f", &widget]).await;
        assert_eq!(out, "widget.example.com/w1 created\n");

        let out = kubectl.ok(&["get", "widgets"]).await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(words(lines[0]), ["NAME", "SIZE", "COLOR", "AGE"], "{out}");
        let row = words(lines[1]);
        assert_eq!(&row[..3], ["w1", "3", "red"], "{out}");
        assert!(row[3].ends_with('s'), "an age: {out}");

        // The short name resolves, and so does the singular.
        let out = kubectl
            .ok(&["get", "wd", "w1", "-o", "jsonpath={.spec.size}"])
            .await;
        assert_eq!(out, "3");
        let out = kubectl
            .ok(&[
                "get",
                "widget",
                "w1",
                "-o",
                "jsonpath={.metadata.generation}",
            ])
            .await;
        assert_eq!(out, "1");

        // The schema is published, so kubectl explains the fields.
        let out = kubectl.ok(&["explain", "widgets.spec"]).await;
        assert!(out.contains("size") && out.contains("<integer>"), "{out}");

        // A second apply with a change is a merge patch.
        let changed = kubectl.file("w1b.yaml", &WIDGET.replace("size: 3", "size: 4"));
        let out = kubectl.ok(&["apply", "-f", &changed]).await;
        assert_eq!(out, "widget.example.com/w1 configured\n");
        let api: Api<DynamicObject> = Api::namespaced_with(
            env.client(),
            "default",
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("example.com", "v1", "Widget"),
                "widgets",
            ),
        );
        let w = api.get("w1").await.expect("the widget exists");
        assert_eq!(w.data["spec"]["size"], 4);
        assert_eq!(w.metadata.generation, Some(2));

        // kubectl scale goes through the scale subresource.
        let out = kubectl.ok(&["scale", "widget/w1", "--replicas=3"]).await;
        assert_eq!(out, "widget.example.com/w1 scaled\n");
        assert_eq!(
            api.get("w1").await.expect("get").data["spec"]["replicas"],
            3
        );

        let out = kubectl.ok(&["delete", "widget", "w1"]).await;
        assert_eq!(out, "widget.example.com \"w1\" deleted\n");
        let out = kubectl.ok(&["delete", "-f", &crd]).await;
        assert_eq!(
            out,
            "customresourcedefinition.apiextensions.k8s.io \"widgets.example.com\" deleted\n"
        );
        let crds: Api<CustomResourceDefinition> = Api::all(env.client());
        kore_testenv::wait_for(Duration::from_secs(10), || async {
            crds.get("widgets.example.com").await.is_err().then_some(())
        })
        .await
        .expect("the CRD is gone");
        let gone = kubectl.run(&["get", "widgets"]).await;
        assert!(!gone.status.success(), "{gone:?}");
        // kubectl's discovery cache still knows the resource, so the list itself gets the 404.
        assert!(
            gone.stderr.contains("(NotFound)")
                || gone.stderr.contains("doesn't have a resource type"),
            "{gone:?}"
        );
    })
    .await;
}
