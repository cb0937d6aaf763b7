#!/usr/bin/env python3
"""Splits an operator's CPU samples by whose code spends them, callees included.

    python3 bench/profile/attribute.py PROFILE.data [PROFILE.data ...]

Each sample's call stack (from `perf record --call-graph dwarf`, see operators.sh) is walked
from the leaf towards the root. Kernel, libc and vDSO frames are skipped, so a system call or
a malloc is charged to the code that made it. The first frame of a known crate decides:

- io: the HTTP client and the async runtime (kube-client, hyper, http, tower, tokio, mio,
  bytes, ...): sending requests, reading answers and watch streams, waking tasks;
- serde: JSON and the typed (de)serializers (serde_json, k8s-openapi, the operator's own
  types' derived impls, jiff), whoever called them;
- own: the operator and its runtime library (kore-runtime, kore-workqueue, configmap-sync,
  kube-runtime, the benchmark's peer code and its request counter).

A flat profile charges a malloc to libc and a send to the kernel; this split charges them to
the layer that asked, which is what a change to that layer can save. The second table lists
the own samples by module (crate and up to two path segments).
"""

import collections
import re
import signal
import subprocess
import sys

IO = {
    "hyper", "hyper_util", "hyper_timeout", "http", "http_body", "http_body_util",
    "httparse", "tower", "tower_http", "kube_client", "tokio", "tokio_util", "mio",
    "bytes", "h2", "want", "try_lock", "atomic_waker", "tracing", "tracing_core",
}
SERDE = {"serde_json", "serde_core", "serde", "k8s_openapi", "jiff"}
OWN = {
    "kore_runtime", "kore_workqueue", "kore_configmap_sync", "kube_runtime",
    "prometheus_client", "kore_bench",
}
# The derived (de)serializers of an operator's types live in the operator's crate.
OPERATORS = {"kore_configmap_sync", "kore_bench"}
SERDE_IMPL = re.compile(r"Deserialize|Serialize|Visitor")
LEADING = re.compile(r"^[<_&]+(mut )?(dyn )?")
FRAME = re.compile(r"(.*) \((.*)\)$")


def crate(symbol):
    m = re.match(r"([A-Za-z0-9_]+)", LEADING.sub("", symbol))
    return m.group(1) if m else None


def module(symbol):
    m = re.match(r"([A-Za-z0-9_]+(::[a-z_0-9]+){0,2})", LEADING.sub("", symbol))
    return m.group(1) if m else symbol[:40]


def classify(stack):
    """('io' | 'serde' | 'own' | 'other', module of the own frame or None)."""
    for symbol, dso in stack:
        if "kernel" in dso or "libc" in dso or "vdso" in dso:
            continue
        c = crate(symbol)
        if c is None:
            continue
        if c in SERDE or (c in OPERATORS and SERDE_IMPL.search(symbol)):
            return "serde", None
        if c in IO:
            return "io", None
        if c in OWN:
            return "own", module(symbol)
    return "other", None


def samples(path):
    """Yields each sample's stack, leaf first, as (symbol, dso) pairs."""
    script = subprocess.Popen(
        ["perf", "script", "--no-inline", "-i", path, "-F", "ip,sym,dso"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    stack = []
    for line in script.stdout:
        if not line.strip():
            if stack:
                yield stack
            stack = []
            continue
        parts = line.strip().split(None, 1)
        if len(parts) == 2:
            m = FRAME.match(parts[1])
            if m:
                stack.append((m.group(1), m.group(2)))
    if stack:
        yield stack
    script.wait()


def main(paths):
    if not paths:
        sys.exit(__doc__)
    for path in paths:
        layers = collections.Counter()
        modules = collections.Counter()
        total = 0
        for stack in samples(path):
            total += 1
            layer, mod = classify(stack)
            layers[layer] += 1
            if mod:
                modules[mod] += 1
        print(f"{path}: {total} samples")
        for layer in ("io", "serde", "own", "other"):
            n = layers[layer]
            print(f"  {layer:6} {n:7d}  {100 * n / max(total, 1):5.1f} %")
        print("  own, by module:")
        for mod, n in modules.most_common(15):
            print(f"    {n:7d}  {100 * n / max(total, 1):5.1f} %  {mod}")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    main(sys.argv[1:])
