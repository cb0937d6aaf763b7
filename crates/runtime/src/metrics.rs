//! Prometheus metrics of controllers and workqueues, under controller-runtime's names so
//! existing dashboards and alerts work unchanged.
//!
//! One [`Metrics`] holds every family. Register it once into the manager's
//! [`prometheus_client::registry::Registry`] with [`Metrics::register`], then hand
//! clones to controllers (they are cheap: each family is shared behind an `Arc`). A controller
//! takes its per-name handles ([`ControllerMetrics`], [`QueueMetrics`]) once when it is built,
//! so the hot path touches only atomics, never the families' label maps.
//!
//! | family | type | labels |
//! | --- | --- | --- |
//! | `controller_runtime_reconcile_total` | counter | `controller`, `result` (`success`, `error`, `requeue`, `requeue_after`) |
//! | `controller_runtime_reconcile_errors_total` | counter | `controller` |
//! | `controller_runtime_terminal_reconcile_errors_total` | counter | `controller` |
//! | `controller_runtime_reconcile_time_seconds` | histogram | `controller` |
//! | `controller_runtime_max_concurrent_reconciles` | gauge | `controller` |
//! | `controller_runtime_active_workers` | gauge | `controller` |
//! | `kore_controller_quarantined_total` | counter | `controller` (kore's own: keys that exhausted their retries) |
//! | `workqueue_depth` | gauge | `name` |
//! | `workqueue_adds_total` | counter | `name` |
//! | `workqueue_queue_duration_seconds` | histogram | `name` |
//! | `workqueue_work_duration_seconds` | histogram | `name` |
//! | `workqueue_retries_total` | counter | `name` |
//!
//! A workqueue's `name` is its controller's name, as in controller-runtime.
//!
//! The manager also serves its informers' cache sizes, `kore_cache_objects` and
//! `kore_cache_packed_bytes` (gauges by `resource`, `namespace`, `label_selector`,
//! `field_selector`; see [`Informers::register_metrics`](crate::informer::Informers::register_metrics)).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label set of the per-controller families.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

/// Label set of `controller_runtime_reconcile_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

/// Label set of the workqueue families.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabel {
    name: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Buckets of `controller_runtime_reconcile_time_seconds`, in seconds (controller-runtime's).
const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

/// Workqueue latencies: 10 ns to 1000 s in decades (client-go's buckets).
fn queue_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

/// Every controller and workqueue metric family. Cheap to clone; clones share the families.
#[derive(Clone, Debug)]
pub struct Metrics {
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabel, Counter>,
    terminal_errors: Family<ControllerLabel, Counter>,
    reconcile_time: HistogramFamily<ControllerLabel>,
    max_concurrent: Family<ControllerLabel, Gauge>,
    active_workers: Family<ControllerLabel, Gauge>,
    quarantined: Family<ControllerLabel, Counter>,
    depth: Family<NameLabel, Gauge>,
    adds: Family<NameLabel, Counter>,
    queue_duration: HistogramFamily<NameLabel>,
    work_duration: HistogramFamily<NameLabel>,
    retries: Family<NameLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty families, not yet registered anywhere.
    pub fn new() -> Self {
        Self {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            terminal_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_histogram),
            max_concurrent: Family::default(),
            active_workers: Family::default(),
            quarantined: Family::default(),
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            retries: Family::default(),
        }
    }

    /// Registers every family into `registry` (once per registry: registering twice
    /// duplicates the families in the output).
    ///
    /// Counters are registered without their `_total` suffix because the encoder appends it.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            self.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            self.terminal_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            self.max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            self.active_workers.clone(),
        );
        registry.register(
            "kore_controller_quarantined",
            "Total number of keys that exhausted their retries and wait for their object to change",
            self.quarantined.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            self.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            self.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            self.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            self.retries.clone(),
        );
    }

    /// The handles of the workqueue named `name` (creating its series at zero).
    pub fn queue(&self, name: &str) -> QueueMetrics {
        let label = NameLabel {
            name: name.to_owned(),
        };
        QueueMetrics {
            depth: self.depth.get_or_create_owned(&label),
            adds: self.adds.get_or_create_owned(&label),
            queue_duration: self.queue_duration.get_or_create_owned(&label),
            work_duration: self.work_duration.get_or_create_owned(&label),
            retries: self.retries.get_or_create_owned(&label),
        }
    }

    /// The handles of the controller named `name` (creating its series at zero).
    pub fn controller(&self, name: &str) -> ControllerMetrics {
        let label = ControllerLabel {
            controller: name.to_owned(),
        };
        let result = |result: &str| {
            self.reconcile_total.get_or_create_owned(&ResultLabels {
                controller: name.to_owned(),
                result: result.to_owned(),
            })
        };
        ControllerMetrics {
            success: result("success"),
            error: result("error"),
            requeue: result("requeue"),
            requeue_after: result("requeue_after"),
            errors: self.reconcile_errors.get_or_create_owned(&label),
            terminal_errors: self.terminal_errors.get_or_create_owned(&label),
            time: self.reconcile_time.get_or_create_owned(&label),
            max_concurrent: self.max_concurrent.get_or_create_owned(&label),
            active_workers: self.active_workers.get_or_create_owned(&label),
            quarantined: self.quarantined.get_or_create_owned(&label),
        }
    }
}

/// One workqueue's series. Clones share the series.
#[derive(Clone, Debug)]
pub struct QueueMetrics {
    pub(crate) depth: Gauge,
    pub(crate) adds: Counter,
    pub(crate) queue_duration: Histogram,
    pub(crate) work_duration: Histogram,
    pub(crate) retries: Counter,
}

impl kore_workqueue::Metrics for QueueMetrics {
    fn added(&self) {
        self.adds.inc();
        self.depth.inc();
    }

    fn handed_out(&self, waited: Option<std::time::Duration>) {
        self.depth.dec();
        if let Some(waited) = waited {
            self.queue_duration.observe(waited.as_secs_f64());
        }
    }

    fn settled(&self, worked: std::time::Duration) {
        self.work_duration.observe(worked.as_secs_f64());
    }

    fn retried(&self) {
        self.retries.inc();
    }

    fn dropped(&self, waiting: usize) {
        self.depth
            .dec_by(i64::try_from(waiting).unwrap_or(i64::MAX));
    }
}

/// How a reconcile ended, as `controller_runtime_reconcile_total`'s `result` label counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReconcileResult {
    /// Done, nothing scheduled.
    Success,
    /// Failed (retried with backoff, or terminal).
    Error,
    /// Asked to run again after a delay.
    RequeueAfter,
}

/// One controller's series. Clones share the series.
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    success: Counter,
    error: Counter,
    /// controller-runtime's immediate requeue; kore's `Action` has no such outcome, so the
    /// series exists (at zero) only for dashboards that sum over every result.
    #[allow(dead_code)]
    requeue: Counter,
    requeue_after: Counter,
    errors: Counter,
    terminal_errors: Counter,
    pub(crate) time: Histogram,
    pub(crate) max_concurrent: Gauge,
    pub(crate) active_workers: Gauge,
    pub(crate) quarantined: Counter,
}

impl ControllerMetrics {
    /// Counts one finished reconcile.
    pub(crate) fn record(&self, result: ReconcileResult, terminal: bool) {
        match result {
            ReconcileResult::Success => self.success.inc(),
            ReconcileResult::RequeueAfter => self.requeue_after.inc(),
            ReconcileResult::Error => {
                self.errors.inc();
                if terminal {
                    self.terminal_errors.inc();
                }
                self.error.inc()
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry)
            .expect("encoding to a string");
        text
    }

    #[test]
    fn registered_families_use_controller_runtime_names() {
        let metrics = Metrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let _ = metrics.controller("foo");
        let _ = metrics.queue("foo");
        let text = encode(&registry);
        for line in [
            "controller_runtime_reconcile_total{controller=\"foo\",result=\"success\"} 0",
            "controller_runtime_reconcile_errors_total{controller=\"foo\"} 0",
            "controller_runtime_reconcile_time_seconds_count{controller=\"foo\"} 0",
            "controller_runtime_max_concurrent_reconciles{controller=\"foo\"} 0",
            "controller_runtime_active_workers{controller=\"foo\"} 0",
            "workqueue_depth{name=\"foo\"} 0",
            "workqueue_adds_total{name=\"foo\"} 0",
            "workqueue_queue_duration_seconds_count{name=\"foo\"} 0",
            "workqueue_work_duration_seconds_count{name=\"foo\"} 0",
            "workqueue_retries_total{name=\"foo\"} 0",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn handles_of_one_name_share_their_series() {
        let metrics = Metrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.controller("a").record(ReconcileResult::Error, true);
        metrics
            .controller("a")
            .record(ReconcileResult::Success, false);
        metrics
            .controller("b")
            .record(ReconcileResult::RequeueAfter, false);
        let text = encode(&registry);
        assert!(
            text.contains(
                "controller_runtime_reconcile_total{controller=\"a\",result=\"error\"} 1"
            )
        );
        assert!(
            text.contains(
                "controller_runtime_reconcile_total{controller=\"a\",result=\"success\"} 1"
            )
        );
        assert!(
            text.contains("controller_runtime_terminal_reconcile_errors_total{controller=\"a\"} 1")
        );
        assert!(text.contains("controller_runtime_reconcile_errors_total{controller=\"b\"} 0"));
        assert!(text.contains(
            "controller_runtime_reconcile_total{controller=\"b\",result=\"requeue_after\"} 1"
        ));
    }
}
