//! The workqueue controllers run on: the [`kore_workqueue`] crate, re-exported so operators
//! keep writing `kore_runtime::queue::Queue`.
//!
//! The queue itself (deduplication, one worker per key, per-key backoff, the guard that settles
//! on drop) lives in its own crate, which depends on Tokio alone, because the API server's
//! garbage collector runs on it too. What this module adds is the Prometheus side:
//! [`QueueMetrics`](crate::metrics::QueueMetrics) implements the queue's [`Metrics`] hook, so
//! `QueueConfig::default().metrics(metrics.queue("name"))` reports client-go's `workqueue_*`
//! series. The design and its invariants are written up in `docs/design/queue.md`.

pub use kore_workqueue::*;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn metrics_count_adds_depth_latencies_and_retries() {
        let metrics = crate::metrics::Metrics::new();
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let q = Queue::new(QueueConfig::default().metrics(metrics.queue("q")));
        q.add("a");
        q.add("a");
        q.add("b");
        let guard = q.next().await.expect("a");
        tokio::time::sleep(Duration::from_millis(3)).await;
        let _ = guard.retry();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            "workqueue_adds_total{name=\"q\"} 2",
            "workqueue_depth{name=\"q\"} 1",
            "workqueue_retries_total{name=\"q\"} 1",
            "workqueue_queue_duration_seconds_count{name=\"q\"} 1",
            "workqueue_work_duration_seconds_count{name=\"q\"} 1",
            "workqueue_work_duration_seconds_sum{name=\"q\"} 0.003",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }

    /// Issue 11, defect 8: a controller aborted on a lost Lease drops its queue with keys
    /// waiting, and the queue of its next term reports to the same series.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_queue_takes_its_waiting_keys_out_of_the_depth_gauge() {
        let metrics = crate::metrics::Metrics::new();
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let config = QueueConfig::default().metrics(metrics.queue("q"));
        let first = Queue::new(config.clone());
        first.add_all(["a", "b", "c"]);
        let held = first.next().await.expect("a");
        drop(held);
        drop(first);
        let second = Queue::new(config);
        second.add("d");
        // No worker takes the lock: the queue's timer counts the add within a millisecond.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains("workqueue_depth{name=\"q\"} 1"),
            "only the new queue's key counts:\n{text}"
        );
    }
}
