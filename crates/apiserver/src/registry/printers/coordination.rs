//! Printers of coordination.k8s.io/v1 kinds (Lease).

use serde_json::Value;

use super::*;

/// Lease columns.
pub(super) const LEASE: [Column; 3] = [
    NAME,
    shown("Holder", "Identity currently holding the lease."),
    AGE,
];

/// `Name`, `Holder`, `Age`.
pub(super) fn lease_cells(obj: &Value, now: i64) -> [Value; LEASE.len()] {
    [
        name(obj),
        Value::from(text(obj, &["spec", "holderIdentity"])),
        age_cell(obj, now),
    ]
}
