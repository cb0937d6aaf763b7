#!/usr/bin/env python3
"""Generate `crates/apiserver/src/api/encoding/fields.rs`: the JSON field order of every
built-in kind, as Kubernetes' Go types declare it.

kube-apiserver encodes a built-in object from its Go struct, so its JSON keys come in
struct declaration order (`kind`, `apiVersion` from `TypeMeta` first, then `metadata`,
`spec`, `status`; inside each struct its own declaration order; fields of an embedded
`json:",inline"` struct at the embedding position; map keys sorted). go-to-protobuf writes
each message's fields in that same declaration order (the field *numbers* do not follow it:
fields added later get the next free number wherever they sit, e.g. PodSpec's
`initContainers = 20` comes right after `volumes = 1`). prost keeps the declaration order
of the .proto files, so the k8s-pb structs give every message's fields in Go order.

Inputs, read from the cargo registry by `gen-protobuf-json.py`'s parsers:
  * k8s-pb: messages and their fields, in declaration order;
  * k8s-openapi: the JSON name of every field, and the (apiVersion, kind) of every
    top-level kind (its `Resource` impl).

Usage: python3 tools/gen-json-order.py [--check]
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("genpb", os.path.join(HERE, "gen-protobuf-json.py"))
assert _spec is not None and _spec.loader is not None
gen = importlib.util.module_from_spec(_spec)
sys.modules["genpb"] = gen
_spec.loader.exec_module(gen)

OUTPUT = os.path.join(gen.REPO_ROOT, "crates/apiserver/src/api/encoding/fields.rs")

# Fields Go embeds with `json:",inline"` beyond those gen-protobuf-json.py knows (it only
# walks the kinds it decodes from protobuf).
MORE_INLINE = {
    ("api::core::v1::PersistentVolumeSpec", "persistent_volume_source"),
}

# Messages whose JSON form is another message or a choice of it (a schema, or a bool / an
# array / a string list): keys inside are ordered as that message's.
SAME_AS = {
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrArray": "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaProps",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrBool": "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaProps",
    "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaPropsOrStringArray": "apiextensions_apiserver::pkg::apis::apiextensions::v1::JsonSchemaProps",
}

# Messages whose JSON form is not an object of their fields, besides gen-protobuf-json.py's
# HAND_WRITTEN ones: `Verbs` is a list of strings.
LEAVES = {
    "apimachinery::pkg::apis::meta::v1::Verbs",
    "api::certificates::v1::ExtraValue",
    "api::certificates::v1beta1::ExtraValue",
}

RESOURCE_RE = re.compile(r'const API_VERSION: &\'static str = "([^"]+)";.*?const KIND: &\'static str = "([^"]+)";', re.S)


def top_level_kinds(openapi_src: str, messages: dict) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, message path) of every kind k8s-openapi's served version has."""
    by_key = {gen.pb_key(p): p for p in messages}
    kinds = []
    vdir = os.path.join(openapi_src, gen.SERVED_OPENAPI_VERSION)
    for path in sorted(glob.glob(os.path.join(vdir, "**", "*.rs"), recursive=True)):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        d = gen.DEFINITION_RE.search(text)
        r = RESOURCE_RE.search(text)
        if not d or not r:
            continue
        msg = by_key.get(gen.definition_to_pb_key(d.group(1)))
        if msg is None:
            print(f"gen-json-order: no protobuf message for {d.group(1)}; left unordered", file=sys.stderr)
            continue
        kinds.append((r.group(1), r.group(2), msg))
    return kinds


class Unmatched(Exception):
    pass


def _fail(message: str):
    m = re.match(r"(\S+)\.(\w+): no JSON field with normalized name", message)
    if m:
        raise Unmatched(m.group(1), m.group(2))
    print(f"gen-json-order: error: {message}", file=sys.stderr)
    sys.exit(1)


gen.fail = _fail


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    messages = gen.parse_k8s_pb(gen.find_crate_src("k8s-pb", gen.K8S_PB_VERSION))
    openapi_src = gen.find_crate_src("k8s-openapi", gen.K8S_OPENAPI_VERSION)
    openapi = gen.parse_k8s_openapi(openapi_src)
    gen.INLINE_FIELDS.update(MORE_INLINE)
    kinds = top_level_kinds(openapi_src, messages)

    def target(path: str) -> str | None:
        """The message whose order applies to a field of type `path`, or None (a leaf)."""
        path = SAME_AS.get(path, path)
        if path in gen.HAND_WRITTEN or path in LEAVES:
            return None
        return path

    # Reachable messages, with ids.
    ids: dict[str, int] = {}
    order: list[str] = []
    stack = [m for _, _, m in kinds]
    while stack:
        path = stack.pop()
        if path in ids:
            continue
        ids[path] = len(order)
        order.append(path)
        for f in messages[path].fields:
            if f.message is not None:
                t = target(f.message)
                if t is not None:
                    stack.append(t)

    def names_of(msg) -> dict:
        """gen.json_names_for, taking a singular message field that has no JSON name of its
        own and whose fields are all JSON fields of the parent as inlined (Go's
        `json:",inline"`: VolumeSource, ProbeHandler, the resource.k8s.io device configs)."""
        while True:
            try:
                return gen.json_names_for(msg, openapi)
            except Unmatched as e:
                path, fname = e.args
                f = next(f for f in messages[path].fields if f.name == fname)
                if f.kind != "message" or f.repeated or f.message is None:
                    raise
                if gen.pb_key(f.message) in openapi[0] or any(gen.pb_key(f.message) in d for d in openapi):
                    parent = {gen.normalize(n) for v in gen.definitions_for(path, openapi) for n in v}
                    child = {gen.normalize(n) for v in gen.definitions_for(f.message, openapi) for n in v}
                    if not child <= parent:
                        raise
                gen.INLINE_FIELDS.add((path, fname))

    def fields_of(path: str) -> list[tuple[str, str]]:
        """(JSON name, child) in Go order; child is `Leaf`, `Of(n)` or `MapOf(n)`."""
        msg = messages[path]
        names = names_of(msg)
        out: list[tuple[str, str]] = []
        for f in msg.fields:
            name = names[f.name]
            if name is None:
                out.extend(fields_of(gen.inline_target(path, f.name)))
                continue
            child = "Leaf"
            if f.message is not None:
                t = target(f.message)
                if t is not None:
                    child = f"MapOf({ids[t]})" if f.kind == "map" else f"Of({ids[t]})"
            out.append((name, child))
        return out

    top = {m for _, _, m in kinds}
    lines = [
        "// @generated by tools/gen-json-order.py; do not edit",
        "",
        f"//! The JSON field order of the k8s-pb {gen.K8S_PB_VERSION} messages reachable from every",
        f"//! top-level kind of k8s-openapi's `{gen.SERVED_OPENAPI_VERSION}`.",
        "",
        "use super::{Child::*, Field, Type};",
        "",
    ]
    bodies = []
    i = 0
    while i < len(order):
        path = order[i]
        fields = fields_of(path)
        if path in top:
            fields = [("kind", "Leaf"), ("apiVersion", "Leaf")] + fields
        ranked = sorted(((name, rank, child) for rank, (name, child) in enumerate(fields)), key=lambda t: t[0].encode())
        entries = ", ".join(f'Field("{n}", {r}, {c})' for n, r, c in ranked)
        bodies.append(f"    // {i}: {path}\n    Type(&[{entries}]),")
        i += 1
    lines.append(f"/// Every ordered message, by id.")
    lines.append(f"pub(super) static TYPES: [Type; {len(order)}] = [")
    lines.extend(bodies)
    lines.append("];")
    lines.append("")
    meta = "apimachinery::pkg::apis::meta::v1::"
    lines.append("/// The id of `ObjectMeta`.")
    lines.append(f"pub(super) const OBJECT_META: usize = {ids[meta + 'ObjectMeta']};")
    lines.append("/// The id of `ListMeta`.")
    lines.append(f"pub(super) const LIST_META: usize = {ids[meta + 'ListMeta']};")
    lines.append("")
    lines.append("/// The message of a top-level kind, by `apiVersion` and `kind`.")
    lines.append("pub(super) fn kind_type(api_version: &str, kind: &str) -> Option<usize> {")
    lines.append("    Some(match (api_version, kind) {")
    for av, k, m in sorted(kinds):
        lines.append(f'        ("{av}", "{k}") => {ids[m]},')
    lines.append("        _ => return None,")
    lines.append("    })")
    lines.append("}")
    source = gen.rustfmt("\n".join(lines) + "\n")
    if args.check:
        with open(OUTPUT, encoding="utf-8") as fh:
            if fh.read() != source:
                print(f"{OUTPUT} is out of date; run tools/gen-json-order.py", file=sys.stderr)
                sys.exit(1)
        return
    os.makedirs(os.path.dirname(OUTPUT), exist_ok=True)
    with open(OUTPUT, "w", encoding="utf-8") as fh:
        fh.write(source)


if __name__ == "__main__":
    main()
