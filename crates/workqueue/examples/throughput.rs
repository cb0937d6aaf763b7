//! The queue rows of `bash bench/run.sh --suite runtime`, without building the rest of the
//! benchmark: one producer thread adds distinct keys as fast as it can while two workers take
//! and settle them with `Guard::done_and_next`; the clock stops when the last key settles.
//!
//! `cargo run --release -p kore-workqueue --example throughput [ITEMS] [RUNS]`
//! (defaults: 4 000 000 items, 3 runs; the best run is printed, as the queue's ceiling).

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use kore_workqueue::{Queue, QueueConfig, TokenBucket};
use tokio::sync::Notify;

/// A namespace/name key, shaped as a controller's `ObjectKey`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ObjectKey {
    namespace: Option<String>,
    name: String,
}

async fn items_per_sec<K>(keys: Vec<K>, batch: usize) -> f64
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    let n = keys.len() as u64;
    let queue: Queue<K> =
        Queue::new(QueueConfig::default().token_bucket(TokenBucket::new(1e12, u32::MAX)));
    let settled = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(Notify::new());
    let mut workers = Vec::new();
    for _ in 0..2 {
        let (queue, settled, finished) = (queue.clone(), settled.clone(), finished.clone());
        workers.push(tokio::spawn(async move {
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
    for w in workers {
        w.await.expect("the worker did not panic");
    }
    n as f64 / elapsed.as_secs_f64()
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let items: u64 = args.next().map_or(4_000_000, |a| a.parse().expect("ITEMS"));
    let runs: usize = args.next().map_or(3, |a| a.parse().expect("RUNS"));
    let best = |rates: Vec<f64>| rates.into_iter().fold(0.0, f64::max);
    let mut rates = Vec::new();
    for _ in 0..runs {
        rates.push(items_per_sec((0..items).collect(), 1).await);
    }
    println!("u64 keys:               {:>12.0} items/s", best(rates));
    let mut rates = Vec::new();
    for _ in 0..runs {
        let keys = (0..items / 4)
            .map(|i| ObjectKey {
                namespace: Some(format!("ns-{}", i % 16)),
                name: format!("object-{i}"),
            })
            .collect();
        rates.push(items_per_sec(keys, 1).await);
    }
    println!("ObjectKey keys:         {:>12.0} items/s", best(rates));
    let mut rates = Vec::new();
    for _ in 0..runs {
        rates.push(items_per_sec((0..items).collect(), 256).await);
    }
    println!("u64 keys, add_all(256): {:>12.0} items/s", best(rates));
}
