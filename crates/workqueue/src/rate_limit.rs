//! The two delays a retried key waits for: its own exponential backoff and a global
//! token bucket. The queue waits for the larger of the two, so one failing key backs off on
//! its own while a storm of failing keys is held to the bucket's rate.
//!
//! Both are plain values without locks or clocks of their own: the queue keeps them under its
//! lock and passes the current [`Instant`] in, which keeps them testable with any clock.

use std::time::Duration;

use tokio::time::Instant;

/// Per-key exponential backoff: the `n`-th consecutive failure (counting from zero) waits
/// `base × 2^n`, capped at `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExponentialBackoff {
    base: Duration,
    max: Duration,
}

impl ExponentialBackoff {
    /// A backoff from `base` doubling up to `max`. A `max` below `base` is raised to `base`,
    /// so every delay lies in `[base, max]`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max: max.max(base),
        }
    }

    /// The delay before retrying after `failures` earlier consecutive failures.
    pub fn delay(&self, failures: u32) -> Duration {
        // 2^63 ns is about 292 years, so any larger exponent is past every useful cap.
        let factor = 1u64.checked_shl(failures.min(63)).unwrap_or(u64::MAX);
        let factor = u32::try_from(factor).unwrap_or(u32::MAX);
        self.base
            .checked_mul(factor)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// The first delay.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The cap.
    pub fn max(&self) -> Duration {
        self.max
    }
}

impl Default for ExponentialBackoff {
    /// 5 ms doubling up to 1000 s, as client-go's default controller rate limiter.
    fn default() -> Self {
        Self::new(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

/// A token bucket shared by every key: `rate` tokens per second, holding at most `burst`.
///
/// Taking a token never fails: when the bucket is empty the taker is told how long to wait
/// for its token, and the bucket goes into debt, so later takers wait behind it (a
/// reservation, as Go's `rate.Limiter.Reserve`).
#[derive(Clone, Debug)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    updated: Option<Instant>,
}

impl TokenBucket {
    /// A full bucket refilled at `rate` tokens per second up to `burst` tokens. A rate that is
    /// not positive and finite means no limit.
    pub fn new(rate: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            rate,
            burst,
            tokens: burst,
            updated: None,
        }
    }

    /// A bucket that never makes anyone wait.
    pub fn unlimited() -> Self {
        Self::new(f64::INFINITY, 1)
    }

    /// Takes one token at `now` and returns how long its taker must wait for it.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Duration::ZERO;
        }
        if let Some(updated) = self.updated {
            let elapsed = now.saturating_duration_since(updated).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        }
        self.updated = Some(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }
}

impl Default for TokenBucket {
    /// 10 tokens per second with a burst of 100, as client-go's default controller rate limiter.
    fn default() -> Self {
        Self::new(10.0, 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_base() {
        let b = ExponentialBackoff::default();
        let got: Vec<_> = (0..4).map(|n| b.delay(n)).collect();
        let ms = Duration::from_millis;
        assert_eq!(got, vec![ms(5), ms(10), ms(20), ms(40)]);
    }

    #[test]
    fn backoff_stays_within_min_and_max_for_any_failure_count() {
        // A property over many (base, max, failures) triples, drawn from a seeded generator
        // so a failure is reproducible.
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x6b6f7265);
        for _ in 0..20_000 {
            let base = Duration::from_nanos(rng.random_range(1..10_000_000_000));
            let max = Duration::from_nanos(rng.random_range(1..2_000_000_000_000));
            let failures = if rng.random_bool(0.2) {
                rng.random()
            } else {
                rng.random_range(0..80)
            };
            let b = ExponentialBackoff::new(base, max);
            let d = b.delay(failures);
            assert!(d >= b.base() && d <= b.max(), "{b:?} {failures} gave {d:?}");
            assert!(
                b.delay(failures.saturating_add(1)) >= d,
                "backoff must not shrink"
            );
        }
    }

    #[test]
    fn backoff_reaches_the_cap_and_stays_there() {
        let b = ExponentialBackoff::default();
        assert_eq!(b.delay(30), Duration::from_secs(1000));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1000));
    }

    #[test]
    fn bucket_allows_the_burst_then_spaces_takers_at_the_rate() {
        let mut bucket = TokenBucket::default();
        let now = Instant::now();
        for _ in 0..100 {
            assert_eq!(bucket.reserve(now), Duration::ZERO);
        }
        let waits: Vec<_> = (0..3).map(|_| bucket.reserve(now)).collect();
        let ms = Duration::from_millis;
        assert_eq!(waits, vec![ms(100), ms(200), ms(300)]);
    }

    #[test]
    fn bucket_refills_with_time_up_to_the_burst() {
        let mut bucket = TokenBucket::new(10.0, 2);
        let start = Instant::now();
        assert_eq!(bucket.reserve(start), Duration::ZERO);
        assert_eq!(bucket.reserve(start), Duration::ZERO);
        assert_eq!(bucket.reserve(start), Duration::from_millis(100));
        // An hour later the bucket holds only its burst of two tokens again.
        let later = start + Duration::from_secs(3600);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), Duration::from_millis(100));
    }

    #[test]
    fn unlimited_bucket_never_waits() {
        let mut bucket = TokenBucket::unlimited();
        let now = Instant::now();
        assert!((0..1000).all(|_| bucket.reserve(now).is_zero()));
    }
}
