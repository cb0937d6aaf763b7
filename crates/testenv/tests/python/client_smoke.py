"""Smoke test of the Python `kubernetes` client against kore-apiserver.

Run by crates/testenv/tests/python_client.rs as
    python client_smoke.py <kubeconfig> <namespace>
It talks to the server through the kubeconfig only, exits 0 when every step passed and
non-zero with a message on stderr otherwise.

Protocol with the Rust side (stdout, one line each, flushed):
    READY <resourceVersion>   -- the script is about to watch from this revision; the Rust
                                 side then creates ConfigMap "from-rust" in the namespace.
    OK                        -- every step passed.
"""

import sys
import traceback

from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main(kubeconfig, ns):
    config.load_kube_config(config_file=kubeconfig)
    v1 = client.CoreV1Api()

    # /version through VersionApi (the model requires major, minor, gitVersion, ...).
    info = client.VersionApi().get_code()
    check((info.major, info.minor) == ("1", "32"), f"version {info.major}.{info.minor}")

    # Create a ConfigMap; the response is deserialized into V1ConfigMap.
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="from-python", labels={"app": "smoke"}),
        data={"a": "1", "b": "2"},
    )
    created = v1.create_namespaced_config_map(ns, body)
    check(created.metadata.uid, "created object has a uid")
    check(created.metadata.resource_version, "created object has a resourceVersion")
    check(created.data == {"a": "1", "b": "2"}, f"created data {created.data}")

    # A duplicate create is a 409 with a Status body.
    try:
        v1.create_namespaced_config_map(ns, body)
        raise AssertionError("a second create succeeded")
    except ApiException as e:
        check(e.status == 409, f"duplicate create answered {e.status}: {e.body}")

    # List: V1ConfigMapList requires items; metadata.resourceVersion is what a watch starts from.
    listed = v1.list_namespaced_config_map(ns)
    names = [c.metadata.name for c in listed.items]
    check("from-python" in names, f"listed names {names}")
    check(listed.metadata.resource_version, "list carries a resourceVersion")
    by_label = v1.list_namespaced_config_map(ns, label_selector="app=smoke")
    check([c.metadata.name for c in by_label.items] == ["from-python"], "label selector")

    # Watch from the list's revision while the Rust side creates "from-rust".
    print(f"READY {listed.metadata.resource_version}", flush=True)
    w = watch.Watch()
    seen = None
    for event in w.stream(
        v1.list_namespaced_config_map,
        ns,
        timeout_seconds=5,
        resource_version=listed.metadata.resource_version,
    ):
        obj = event["object"]
        if obj.metadata.name == "from-rust":
            seen = event
            w.stop()
    check(seen is not None, "no watch event for from-rust within 5 seconds")
    check(seen["type"] == "ADDED", f"event type {seen['type']}")
    check(isinstance(seen["object"], client.V1ConfigMap), f"event object {type(seen['object'])}")
    check(seen["object"].data == {"k": "v"}, f"watched data {seen['object'].data}")
    check(seen["raw_object"]["metadata"]["resourceVersion"], "event object carries a resourceVersion")

    # Patch with a dict: the client sends application/strategic-merge-patch+json.
    patched = v1.patch_namespaced_config_map(
        "from-python",
        ns,
        {"metadata": {"labels": {"patched": "yes"}}, "data": {"b": None, "c": "3"}},
    )
    check(patched.data == {"a": "1", "c": "3"}, f"patched data {patched.data}")
    check(patched.metadata.labels == {"app": "smoke", "patched": "yes"}, f"labels {patched.metadata.labels}")
    check(
        int(patched.metadata.resource_version) > int(created.metadata.resource_version),
        "the patch bumped the resourceVersion",
    )

    # Read back and a missing object.
    got = v1.read_namespaced_config_map("from-python", ns)
    check(got.data == patched.data, "read after patch")
    try:
        v1.read_namespaced_config_map("nothere", ns)
        raise AssertionError("reading a missing object succeeded")
    except ApiException as e:
        check(e.status == 404, f"missing object answered {e.status}")
        check('configmaps \\"nothere\\" not found' in e.body or 'configmaps "nothere" not found' in e.body, e.body)

    # Namespaces list (cluster-scoped) deserializes too.
    nss = [n.metadata.name for n in v1.list_namespace().items]
    check("default" in nss, f"namespaces {nss}")

    # Discovery documents: the models require serverAddressByClientCIDRs, singularName, verbs.
    versions = client.CoreApi().get_api_versions()
    check(versions.versions == ["v1"], f"core versions {versions.versions}")
    resources = {r.name: r for r in v1.get_api_resources().resources}
    check("configmaps" in resources, f"core resources {sorted(resources)}")
    check(resources["configmaps"].singular_name == "configmap", "configmaps singularName")
    check("watch" in resources["configmaps"].verbs, "configmaps verbs")
    groups = [g.name for g in client.ApisApi().get_api_versions().groups]
    check("apps" in groups, f"groups {groups}")

    # A Deployment and its scale subresource (V1ScaleStatus requires replicas).
    apps = client.AppsV1Api()
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="py-web"),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels={"app": "py-web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "py-web"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx")]),
            ),
        ),
    )
    made = apps.create_namespaced_deployment(ns, deployment)
    check(made.spec.replicas == 1, f"defaulted replicas {made.spec.replicas}")
    check(made.spec.strategy.type == "RollingUpdate", f"defaulted strategy {made.spec.strategy}")
    scale = apps.read_namespaced_deployment_scale("py-web", ns)
    check(scale.spec.replicas == 1 and scale.status.replicas == 0, f"scale {scale}")
    check(scale.status.selector == "app=py-web", f"scale selector {scale.status.selector}")
    scaled = apps.patch_namespaced_deployment_scale("py-web", ns, {"spec": {"replicas": 4}})
    check(scaled.spec.replicas == 4, f"scaled {scaled.spec}")

    # The dynamic client discovers through the legacy documents.
    dyn = dynamic.DynamicClient(client.ApiClient())
    dyn_cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    dyn_names = [i.metadata.name for i in dyn_cms.get(namespace=ns).items]
    check({"from-python", "from-rust"} <= set(dyn_names), f"dynamic list {dyn_names}")

    print("OK", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: client_smoke.py <kubeconfig> <namespace>", file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1], sys.argv[2])
    except Exception:  # report any failure, including ApiException, with its traceback
        traceback.print_exc()
        sys.exit(1)
