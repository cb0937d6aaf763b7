//! Benchmark suites beyond the API server's: each measurement is a [`Row`] with kore's
//! value, the peer's value from the same run when there is a peer, and the target it is held
//! to. `--suite NAME` runs one suite and writes `bench/results/NAME.{md,json,svg}`.

use serde::Serialize;

/// What a row's value is held to.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) enum Target {
    /// kore's value must be at least this.
    AtLeast(f64),
    /// kore's value must be strictly below this.
    Below(f64),
    /// kore's value must be at most this.
    AtMost(f64),
    /// kore's value over the peer's must be at least this (throughputs).
    FasterThanPeer(f64),
    /// The peer's value over kore's must be at least this (times, bytes).
    LeanerThanPeer(f64),
}

/// One measurement.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Row {
    /// What was measured, e.g. `workqueue items/s (1 producer, 2 workers)`.
    pub(crate) measure: String,
    /// kore's value.
    pub(crate) kore: f64,
    /// The unit of both values, e.g. `items/s`, `ms`, `bytes/object`.
    pub(crate) unit: String,
    /// The peer's name and value, measured in the same run.
    pub(crate) peer: Option<(String, f64)>,
    /// The target, if the issue sets one.
    pub(crate) target: Option<Target>,
    /// How it was measured, or anything a reader needs.
    pub(crate) note: String,
}

impl Row {
    /// Whether the row meets its target (`None` without a target or a missing peer).
    pub(crate) fn pass(&self) -> Option<bool> {
        let ratio = |num: f64, den: f64| (den > 0.0).then(|| num / den);
        Some(match self.target? {
            Target::AtLeast(x) => self.kore >= x,
            Target::Below(x) => self.kore < x,
            Target::AtMost(x) => self.kore <= x,
            Target::FasterThanPeer(r) => ratio(self.kore, self.peer.as_ref()?.1)? >= r,
            Target::LeanerThanPeer(r) => ratio(self.peer.as_ref()?.1, self.kore)? >= r,
        })
    }
}
