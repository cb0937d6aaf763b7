//! Parsing an `openAPIV3Schema` into a [`Structural`] tree, and the structural rules.
//!
//! A schema is structural when (Kubernetes' rules, with their messages):
//! - every node has a `type`, except with `x-kubernetes-int-or-string: true`,
//!   `x-kubernetes-embedded-resource: true`, or (below the root)
//!   `x-kubernetes-preserve-unknown-fields: true`; the root is `type: object`;
//! - arrays have `items`; `properties` and `additionalProperties` are not combined;
//! - inside `allOf`/`anyOf`/`oneOf`/`not` there is no `type`, `default`,
//!   `additionalProperties`, `nullable`, `description`, `title` or `x-kubernetes-*`, and
//!   every property or `items` they name is also specified outside them;
//! - the root `metadata` may only constrain `name` and `generateName`; `kind` and
//!   `apiVersion` at the root or in an embedded resource are strings;
//! - `x-kubernetes-embedded-resource` needs `type: object` and `properties` or
//!   `x-kubernetes-preserve-unknown-fields`; `x-kubernetes-int-or-string` excludes `type`,
//!   `x-kubernetes-preserve-unknown-fields` and `x-kubernetes-embedded-resource`;
//! - list types are `atomic`, `set` or `map` (with key properties that are scalars);
//! - a `default` is already pruned and validates against its node.
//!
//! Parsing compiles everything the per-object algorithms need: sorted property tables,
//! regexes (ECMA-262 classes `\d`, `\w`, `\s` narrowed to ASCII as in Go), enum lists.
//!
//! This file holds the entry point and the parser's state; `node` reads one node, `rules`
//! checks the structural rules on it.

mod node;
mod rules;

use serde_json::Value;

use super::Structural;
use crate::api::field::FieldError;

/// Where a node sits, for the rules that depend on it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Field,
    Item,
}

/// Parses and checks `schema`; errors are under `base`.
pub(crate) fn parse(schema: &Value, base: &str) -> Result<Structural, Vec<FieldError>> {
    let mut p = Parser {
        errs: Vec::new(),
        atomic_lists: Vec::new(),
    };
    let s = p.node(schema, base, Level::Root, false, false);
    if p.errs.is_empty() {
        Ok(s)
    } else {
        Err(p.errs)
    }
}

struct Parser {
    errs: Vec<FieldError>,
    /// Schema paths of the atomic lists the current node sits in (innermost last): the old
    /// value of an item there cannot be found, so transition rules are refused.
    atomic_lists: Vec<String>,
}

#[cfg(test)]
mod tests;
