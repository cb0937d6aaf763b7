//! The time the time-driven controllers (CronJob, TTL after finished) read, so that tests can
//! run a schedule of "every minute" in seconds: [`Clock::system`] is the wall clock,
//! [`Clock::scaled`] runs faster than it, and [`Clock::starting_at`] starts from a chosen
//! instant (Kubernetes' controllers take a `clock.Clock` for the same reason).
//!
//! A controller reads [`Clock::now`] and, when it wants to look again after a span of clock
//! time, waits the real time [`Clock::real`] gives for it.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

/// A clock: the wall clock, or one that starts at a chosen instant and runs `speed` times as
/// fast as real time. Cheap to clone; clones share their origin.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// The clock's time at `started`, and the real instant it was read; `None` for the wall
    /// clock.
    origin: Option<(Timestamp, Instant)>,
    speed: u32,
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    /// The wall clock.
    pub fn system() -> Self {
        Clock {
            origin: None,
            speed: 1,
        }
    }

    /// A clock that reads the wall clock's time now and then runs `speed` times as fast
    /// (at least 1): with 60, a minute passes every real second.
    pub fn scaled(speed: u32) -> Self {
        Self::starting_at(Timestamp::now(), speed)
    }

    /// A clock that reads `at` now and then runs `speed` times as fast as real time (at
    /// least 1).
    pub fn starting_at(at: Timestamp, speed: u32) -> Self {
        Clock {
            origin: Some((at, Instant::now())),
            speed: speed.max(1),
        }
    }

    /// The clock's time now.
    pub fn now(&self) -> Timestamp {
        let Some((at, started)) = self.origin else {
            return Timestamp::now();
        };
        let passed = started.elapsed().saturating_mul(self.speed);
        let passed = SignedDuration::try_from(passed).unwrap_or(SignedDuration::MAX);
        at.checked_add(passed).unwrap_or(Timestamp::MAX)
    }

    /// How long to wait in real time for `span` of this clock's time to pass.
    pub fn real(&self, span: Duration) -> Duration {
        span / self.speed
    }

    /// How many times as fast as real time this clock runs.
    pub fn speed(&self) -> u32 {
        self.speed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_scaled_clock_runs_faster_than_real_time() {
        let start: Timestamp = "2030-01-01T12:00:00Z".parse().expect("a timestamp");
        let clock = Clock::starting_at(start, 60);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(
            clock.now(),
            "2030-01-01T12:02:00Z".parse().expect("a timestamp")
        );
        assert_eq!(clock.real(Duration::from_secs(60)), Duration::from_secs(1));
        assert_eq!(
            Clock::system().real(Duration::from_secs(5)),
            Duration::from_secs(5)
        );
    }
}
