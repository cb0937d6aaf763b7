//! [`Backoff`]: how long an informer waits before retrying a failed list or watch. The
//! finalizer helper uses it too, with its own bounds, between conflicting writes.
//!
//! Jittered exponential: the base starts at 800 ms and doubles up to 30 s; each delay is the
//! base plus up to as much again at random, never above the maximum. After the informer has
//! been healthy (watching) for two minutes, the next failure starts over from 800 ms, so a
//! blip after a long quiet run is retried quickly, while a server that keeps failing is
//! retried at most about twice a minute.

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

/// Retry delays for an informer's list and watch requests.
#[derive(Clone, Debug)]
#[must_use]
pub struct BackoffConfig {
    /// The first delay.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
    /// How long the informer must be healthy before the delay starts over.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Backoff state: the next base delay and when the informer last became healthy.
#[derive(Debug)]
pub(crate) struct Backoff {
    config: BackoffConfig,
    base: Duration,
    healthy_since: Option<Instant>,
}

impl Backoff {
    pub(crate) fn new(config: BackoffConfig) -> Backoff {
        Backoff {
            base: config.initial,
            config,
            healthy_since: None,
        }
    }

    /// Records that the informer is healthy (a watch is open) from now on.
    pub(crate) fn healthy(&mut self, now: Instant) {
        self.healthy_since.get_or_insert(now);
    }

    /// Records a failure at `now` and returns how long to wait before retrying.
    pub(crate) fn failed(&mut self, now: Instant) -> Duration {
        if let Some(since) = self.healthy_since.take()
            && now.saturating_duration_since(since) >= self.config.reset_after
        {
            self.base = self.config.initial;
        }
        let base = self.base.min(self.config.max);
        let jitter = rand::rng().random_range(0.0..1.0);
        let delay = base.mul_f64(1.0 + jitter).min(self.config.max);
        self.base = (base * 2).min(self.config.max);
        delay.max(self.config.initial.min(self.config.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn delays_double_from_800ms_and_stay_within_30s() {
        let mut b = Backoff::new(BackoffConfig::default());
        let mut lows = Vec::new();
        for _ in 0..12 {
            let d = b.failed(Instant::now());
            assert!(
                d >= Duration::from_millis(800) && d <= Duration::from_secs(30),
                "{d:?}"
            );
            lows.push(d);
        }
        // Each delay is at least its base: 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, then 30.
        let bases = [800u64, 1600, 3200, 6400, 12800, 25600, 30000];
        for (d, base) in lows.iter().zip(bases) {
            assert!(*d >= Duration::from_millis(base), "{d:?} < {base}ms");
            assert!(*d <= Duration::from_millis(base * 2).min(Duration::from_secs(30)));
        }
        assert_eq!(lows[11], Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn two_healthy_minutes_start_the_delays_over() {
        let mut b = Backoff::new(BackoffConfig::default());
        for _ in 0..6 {
            b.failed(Instant::now());
        }
        b.healthy(Instant::now());
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(b.failed(Instant::now()) >= Duration::from_secs(25));
        b.healthy(Instant::now());
        tokio::time::advance(Duration::from_secs(121)).await;
        assert!(b.failed(Instant::now()) <= Duration::from_millis(1600));
    }
}
