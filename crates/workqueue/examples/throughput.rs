//! The queue rows of `bash bench/run.sh --suite runtime`, without building the rest of the
//! benchmark: one producer thread adds keys as fast as it can while async workers take and
//! settle them with `Guard::done_and_next`; the clock stops when the last key settles.
//!
//! `cargo run --release -p kore-workqueue --example throughput [ITEMS] [RUNS] [ROWS]`
//!
//! Defaults: 4 000 000 items, 3 runs, every row. `ROWS` is a comma-separated subset of
//! `u64`, `objkey`, `batch`, `objkey16`, `metrics` and `pattern` (see [`Row`]). Each row prints
//! the median of its runs and the range. The tokio runtime has one thread per core, as the
//! benchmark's has; the producer is a thread of its own.

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kore_workqueue::{ExponentialBackoff, Metrics, Queue, QueueConfig, TokenBucket};
use tokio::sync::Notify;

/// A namespace/name key, shaped as a controller's `ObjectKey`: kore-runtime's is the same
/// one string, `namespace/name`, with the position of its `/`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ObjectKey {
    display: Box<str>,
    slash: Option<u32>,
}

fn object_keys(n: u64) -> Vec<ObjectKey> {
    (0..n)
        .map(|i| {
            let namespace = format!("ns-{}", i % 16);
            ObjectKey {
                slash: u32::try_from(namespace.len()).ok(),
                display: format!("{namespace}/object-{i}").into_boxed_str(),
            }
        })
        .collect()
}

/// Metrics as cheap as a Prometheus counter, gauge and histogram observation: a few relaxed
/// atomic operations per call (the bench's row uses kore-runtime's real series).
#[derive(Debug, Default)]
struct AtomicMetrics {
    adds: AtomicU64,
    depth: AtomicU64,
    waited_ns: AtomicU64,
    worked_ns: AtomicU64,
    retries: AtomicU64,
}

impl Metrics for AtomicMetrics {
    fn added(&self) {
        self.adds.fetch_add(1, Ordering::Relaxed);
        self.depth.fetch_add(1, Ordering::Relaxed);
    }
    fn handed_out(&self, waited: Option<Duration>) {
        self.depth.fetch_sub(1, Ordering::Relaxed);
        let ns = waited.map_or(0, |w| u64::try_from(w.as_nanos()).unwrap_or(u64::MAX));
        self.waited_ns.fetch_add(ns, Ordering::Relaxed);
    }
    fn settled(&self, worked: Duration) {
        let ns = u64::try_from(worked.as_nanos()).unwrap_or(u64::MAX);
        self.worked_ns.fetch_add(ns, Ordering::Relaxed);
    }
    fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
    fn dropped(&self, _waiting: usize) {}
}

/// Items per second through a queue: one producer thread (adding `batch` keys at a time),
/// `workers` worker tasks settling with `done_and_next`.
async fn items_per_sec<K>(keys: Vec<K>, batch: usize, workers: usize, config: QueueConfig) -> f64
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    let n = keys.len() as u64;
    let queue: Queue<K> = Queue::new(config.token_bucket(TokenBucket::new(1e12, u32::MAX)));
    let settled = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(Notify::new());
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (queue, settled, finished) = (queue.clone(), settled.clone(), finished.clone());
        tasks.push(tokio::spawn(async move {
            let mut next = queue.next().await;
            while let Some(guard) = next {
                if settled.fetch_add(1, Ordering::Relaxed) + 1 == n {
                    finished.notify_one();
                }
                next = guard.done_and_next().await;
            }
        }));
    }
    let started = Instant::now();
    let producer = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            if batch <= 1 {
                keys.into_iter().for_each(|key| queue.add(key));
                return;
            }
            let mut keys = keys.into_iter();
            loop {
                let chunk: Vec<K> = keys.by_ref().take(batch).collect();
                if chunk.is_empty() {
                    break;
                }
                queue.add_all(chunk);
            }
        })
    };
    finished.notified().await;
    let elapsed = started.elapsed();
    producer.join().expect("the producer did not panic");
    queue.shutdown();
    for t in tasks {
        t.await.expect("the worker did not panic");
    }
    n as f64 / elapsed.as_secs_f64()
}

/// A controller's pattern: `events` watch events over `objects` keys (a hot tenth of the keys
/// gets half of the events, so keys are re-added while queued and while processing), two
/// workers, every 16th reconcile fails and is retried after its backoff (1 ms doubling to
/// 4 ms), with metrics. Returns events absorbed per second, until the last settle.
async fn pattern_events_per_sec(objects: u64, events: u64) -> f64 {
    let keys = object_keys(objects);
    let config = QueueConfig::default()
        .backoff(ExponentialBackoff::new(
            Duration::from_millis(1),
            Duration::from_millis(4),
        ))
        .token_bucket(TokenBucket::new(1e12, u32::MAX))
        .metrics(AtomicMetrics::default());
    let queue: Queue<ObjectKey> = Queue::new(config);
    let handed = Arc::new(AtomicU64::new(0));
    let last_settle = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (queue, handed, last_settle) = (queue.clone(), handed.clone(), last_settle.clone());
        tasks.push(tokio::spawn(async move {
            let mut next = queue.next().await;
            while let Some(guard) = next {
                let seq = handed.fetch_add(1, Ordering::Relaxed);
                std::hint::black_box(guard.key());
                let at = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                last_settle.fetch_max(at, Ordering::Relaxed);
                if seq % 16 == 15 {
                    let _ = guard.retry();
                    next = queue.next().await;
                } else {
                    next = guard.done_and_next().await;
                }
            }
        }));
    }
    let producer = {
        let queue = queue.clone();
        std::thread::spawn(move || {
            let hot = (objects / 10).max(1);
            // A fixed-seed linear congruential generator: the same event stream every run.
            let mut x: u64 = 0x6b6f_7265;
            for i in 0..events {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let r = x >> 33;
                let k = if i % 2 == 0 { r % hot } else { r % objects };
                queue.add(keys[k as usize].clone());
            }
        })
    };
    producer.join().expect("the producer did not panic");
    // Quiet: nothing queued or held, and no retry can still be waiting (the backoff's cap plus
    // the timer's millisecond granularity has passed since the last settle).
    loop {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let last = Duration::from_nanos(last_settle.load(Ordering::Relaxed));
        if queue.is_empty()
            && queue.processing() == 0
            && started.elapsed() > last + Duration::from_millis(20)
        {
            break;
        }
    }
    queue.shutdown();
    for t in tasks {
        t.await.expect("the worker did not panic");
    }
    let elapsed = Duration::from_nanos(last_settle.load(Ordering::Relaxed));
    eprintln!(
        "  pattern: {events} events, {} reconciles",
        handed.load(Ordering::Relaxed)
    );
    events as f64 / elapsed.as_secs_f64()
}

/// One row of the example.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Row {
    /// u64 keys, 2 workers, no metrics.
    U64,
    /// ObjectKey keys, 2 workers, no metrics.
    ObjKey,
    /// u64 keys added with `add_all` in batches of 256, 2 workers.
    Batch,
    /// ObjectKey keys, 16 workers.
    ObjKey16,
    /// ObjectKey keys, 2 workers, metrics on.
    Metrics,
    /// The controller pattern of [`pattern_events_per_sec`].
    Pattern,
}

impl Row {
    fn parse(s: &str) -> Row {
        match s {
            "u64" => Row::U64,
            "objkey" => Row::ObjKey,
            "batch" => Row::Batch,
            "objkey16" => Row::ObjKey16,
            "metrics" => Row::Metrics,
            "pattern" => Row::Pattern,
            other => panic!("unknown row {other}"),
        }
    }

    async fn run(self, items: u64) -> f64 {
        let plain = QueueConfig::default;
        match self {
            Row::U64 => items_per_sec((0..items).collect(), 1, 2, plain()).await,
            Row::ObjKey => items_per_sec(object_keys(items / 4), 1, 2, plain()).await,
            Row::Batch => items_per_sec((0..items).collect(), 256, 2, plain()).await,
            Row::ObjKey16 => items_per_sec(object_keys(items / 4), 1, 16, plain()).await,
            Row::Metrics => {
                let config = plain().metrics(AtomicMetrics::default());
                items_per_sec(object_keys(items / 4), 1, 2, config).await
            }
            Row::Pattern => pattern_events_per_sec(10_000, items / 4).await,
        }
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let items: u64 = args.next().map_or(4_000_000, |a| a.parse().expect("ITEMS"));
    let runs: usize = args.next().map_or(3, |a| a.parse().expect("RUNS"));
    let rows: Vec<Row> = args.next().map_or_else(
        || {
            vec![
                Row::U64,
                Row::ObjKey,
                Row::Batch,
                Row::ObjKey16,
                Row::Metrics,
                Row::Pattern,
            ]
        },
        |a| a.split(',').map(Row::parse).collect(),
    );
    for row in rows {
        let mut rates = Vec::new();
        for _ in 0..runs {
            rates.push(row.run(items).await);
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "{:<10} median {:>12.0} items/s  (min {:.0}, max {:.0})",
            format!("{row:?}"),
            rates[rates.len() / 2],
            rates[0],
            rates[rates.len() - 1]
        );
    }
}
