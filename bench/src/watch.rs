//! Watch fan-out: one writer, many watchers of the same collection, each on its own HTTPS
//! connection.
//!
//! Latency of one delivery = the instant a watcher received the bytes of an event minus the
//! instant the writer started sending the create that caused it (both read from this process's
//! monotonic clock). Every (watcher, event) pair is one sample. Writes are spaced
//! `interval` apart so that each one is measured on its own rather than queued behind the
//! previous one; the writer's own create latency (send to `201`) is reported alongside.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use http::{Method, StatusCode};
use http_body_util::BodyExt as _;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use crate::clients::{KoreConn, KoreTarget};
use crate::load::{configmap, percentile_ms};

/// How long watchers may take to connect and to receive the priming event.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long after the last write the watchers may take to receive every event.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What the fan-out run measured.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct FanOut {
    /// Concurrent watchers.
    pub(crate) watchers: usize,
    /// Events written.
    pub(crate) events: usize,
    /// Pause between two writes, in milliseconds.
    pub(crate) interval_ms: f64,
    /// Deliveries measured (watchers × events when nothing is missing).
    pub(crate) samples: usize,
    /// Deliveries that did not arrive within the drain timeout.
    pub(crate) missing: usize,
    /// Median delivery latency, in milliseconds.
    pub(crate) p50_ms: f64,
    /// 99th-percentile delivery latency, in milliseconds.
    pub(crate) p99_ms: f64,
    /// Slowest delivery, in milliseconds.
    pub(crate) max_ms: f64,
    /// Median time from sending a create to its `201`, in milliseconds.
    pub(crate) write_p50_ms: f64,
    /// 99th percentile of the same.
    pub(crate) write_p99_ms: f64,
}

#[derive(Deserialize)]
struct Event {
    #[serde(rename = "type")]
    kind: String,
    object: Object,
}

#[derive(Deserialize)]
struct Object {
    metadata: Metadata,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    name: String,
}

/// The index of an event object named `ev-NNNNN`.
fn event_index(name: &str) -> Option<u32> {
    name.strip_prefix("ev-")?.parse().ok()
}

/// Runs the fan-out measurement in namespace `ns` (which must exist and hold no ConfigMaps
/// named `ev-*` or `prime-*`).
pub(crate) async fn fan_out(
    target: &KoreTarget,
    ns: &str,
    watchers: usize,
    events: usize,
    interval: Duration,
) -> anyhow::Result<FanOut> {
    let collection = format!("/api/v1/namespaces/{ns}/configmaps");
    let (connected_tx, mut connected_rx) = mpsc::channel(watchers);
    let (primed_tx, mut primed_rx) = mpsc::channel(watchers);
    let (finish_tx, finish_rx) = watch::channel(false);
    let complete = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(watchers);
    for _ in 0..watchers {
        let conn = target.connect().await?;
        let watcher = Watcher {
            path: format!("{collection}?watch=true"),
            events,
            connected: connected_tx.clone(),
            primed: primed_tx.clone(),
            finish: finish_rx.clone(),
            complete: complete.clone(),
        };
        tasks.push(tokio::spawn(watcher.run(conn)));
    }
    drop((connected_tx, primed_tx));
    for _ in 0..watchers {
        tokio::time::timeout(SETUP_TIMEOUT, connected_rx.recv())
            .await
            .context("watchers did not connect in time")?
            .context("a watcher failed to start")?;
    }

    // Make sure every watch is registered: write until every watcher has seen a priming event.
    let mut writer = target.connect().await?;
    let setup_deadline = tokio::time::Instant::now() + SETUP_TIMEOUT;
    let mut primed = 0;
    for attempt in 0.. {
        writer
            .create(&collection, configmap(&format!("prime-{attempt}")))
            .await?;
        let round_end = tokio::time::Instant::now() + Duration::from_secs(1);
        while primed < watchers {
            match tokio::time::timeout_at(round_end, primed_rx.recv()).await {
                Ok(Some(())) => primed += 1,
                Ok(None) => bail!("a watcher ended before it was primed"),
                Err(_) => break,
            }
        }
        if primed == watchers {
            break;
        }
        if tokio::time::Instant::now() > setup_deadline {
            bail!("only {primed} of {watchers} watchers saw the priming events");
        }
    }

    let mut sent = Vec::with_capacity(events);
    let mut writes_us = Vec::with_capacity(events);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for i in 0..events {
        ticker.tick().await;
        let body = configmap(&format!("ev-{i:05}"));
        let began = Instant::now();
        sent.push(began);
        writer.create(&collection, body).await?;
        writes_us.push(u32::try_from(began.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    let drain_deadline = Instant::now() + DRAIN_TIMEOUT;
    while complete.load(Ordering::Relaxed) < watchers && Instant::now() < drain_deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = finish_tx.send(true);

    let mut latencies_us = Vec::with_capacity(watchers * events);
    for task in tasks {
        let received = task.await.context("a watcher panicked")??;
        for (index, at) in received {
            let Some(began) = sent.get(index as usize) else {
                bail!("a watcher received an unknown event ev-{index:05}");
            };
            let us = at.saturating_duration_since(*began).as_micros();
            latencies_us.push(u32::try_from(us).unwrap_or(u32::MAX));
        }
    }
    latencies_us.sort_unstable();
    writes_us.sort_unstable();
    Ok(FanOut {
        watchers,
        events,
        interval_ms: interval.as_secs_f64() * 1000.0,
        samples: latencies_us.len(),
        missing: watchers * events - latencies_us.len(),
        p50_ms: percentile_ms(&latencies_us, 0.50),
        p99_ms: percentile_ms(&latencies_us, 0.99),
        max_ms: percentile_ms(&latencies_us, 1.0),
        write_p50_ms: percentile_ms(&writes_us, 0.50),
        write_p99_ms: percentile_ms(&writes_us, 0.99),
    })
}

/// One watching client.
struct Watcher {
    path: String,
    events: usize,
    connected: mpsc::Sender<()>,
    primed: mpsc::Sender<()>,
    finish: watch::Receiver<bool>,
    complete: Arc<AtomicUsize>,
}

impl Watcher {
    /// Watches until every `ev-*` event arrived or the run finishes; returns each event's index
    /// and arrival instant.
    async fn run(mut self, mut conn: KoreConn) -> anyhow::Result<Vec<(u32, Instant)>> {
        let response = conn.send(Method::GET, &self.path, None).await?;
        ensure!(
            response.status() == StatusCode::OK,
            "watch answered {}",
            response.status()
        );
        self.connected
            .send(())
            .await
            .context("the benchmark stopped")?;
        let mut body = response.into_body();
        let mut buffer: Vec<u8> = Vec::with_capacity(64 * 1024);
        let mut received = Vec::with_capacity(self.events);
        let mut primed = false;
        while received.len() < self.events {
            let frame = tokio::select! {
                frame = body.frame() => frame,
                _ = self.finish.changed() => break,
            };
            let arrived = Instant::now();
            let Some(frame) = frame else {
                bail!("the watch stream ended early");
            };
            let Ok(data) = frame.context("reading the watch stream")?.into_data() else {
                continue;
            };
            buffer.extend_from_slice(&data);
            // A frame may carry several events, or part of one: parse every complete one.
            let mut stream = serde_json::Deserializer::from_slice(&buffer).into_iter::<Event>();
            for event in stream.by_ref() {
                let event = match event {
                    Ok(event) => event,
                    Err(e) if e.is_eof() => break,
                    Err(e) => return Err(e).context("parsing a watch event"),
                };
                let name = &event.object.metadata.name;
                if event.kind != "ADDED" {
                    continue;
                }
                if let Some(index) = event_index(name) {
                    received.push((index, arrived));
                } else if name.starts_with("prime-") && !primed {
                    primed = true;
                    let _ = self.primed.send(()).await;
                }
            }
            let consumed = stream.byte_offset();
            buffer.drain(..consumed);
        }
        if received.len() == self.events {
            self.complete.fetch_add(1, Ordering::Relaxed);
        }
        // Wait for the end of the run so no connection closes while others are measured.
        while !*self.finish.borrow() {
            if self.finish.changed().await.is_err() {
                break;
            }
        }
        Ok(received)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_map_to_indexes() {
        assert_eq!(event_index("ev-00042"), Some(42));
        assert_eq!(event_index("prime-0"), None);
        assert_eq!(event_index("ev-x"), None);
    }
}
