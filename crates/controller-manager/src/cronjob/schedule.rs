//! CronJob schedules and the arithmetic of missed start times.
//!
//! Kubernetes parses schedules with robfig/cron's `ParseStandard`: five fields (minute, hour,
//! day of month, month, day of week) or a descriptor (`@yearly`/`@annually`, `@monthly`,
//! `@weekly`, `@daily`/`@midnight`, `@hourly`, `@every <Go duration>`), optionally behind a
//! `TZ=<zone>` or `CRON_TZ=<zone>` prefix. kore parses the five fields and the calendar
//! descriptors with the `croner` crate (the one kore-apiserver validates schedules with): it
//! is maintained, follows Vixie cron's rules (day of month and day of week are OR-ed when both
//! are restricted, as in robfig's standard parser), and evaluates a pattern on jiff's `Zoned`,
//! the time library k8s-openapi already uses, so a schedule runs in its IANA zone with the
//! daylight-saving gaps and folds handled. `cron` and `saffron` were the alternatives: `cron`
//! wants a seconds field and chrono, `saffron` is no longer maintained. croner has no
//! `@every` and no `@midnight`; kore maps `@midnight` to `@daily` and computes `@every`
//! itself (a fixed period in whole seconds, at least one, as robfig's `ConstantDelaySchedule`).

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// More missed start times than this and the controller warns (`TooManyMissedTimes`).
pub const MAX_MISSED: i64 = 100;

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Five cron fields (or a calendar descriptor) evaluated in a time zone.
    Cron {
        /// The pattern.
        cron: Box<Cron>,
        /// The zone its fields are read in.
        zone: TimeZone,
    },
    /// `@every <duration>`: a fixed period.
    Every(Duration),
}

/// How many start times were missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// None, or only the most recent one.
    None,
    /// A few: the most recent is started, the others are skipped.
    Few,
    /// More than [`MAX_MISSED`]: the controller warns.
    Many,
}

/// The start times due at `now`, as Kubernetes' `mostRecentScheduleTime` computes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// Where the search started: the last schedule time, else the creation time (moved up to
    /// `now - startingDeadlineSeconds` when the deadline counts).
    pub earliest: Timestamp,
    /// The most recent start time after `earliest` and not after `now`, if any.
    pub most_recent: Option<Timestamp>,
    /// How many start times were missed.
    pub missed: Missed,
}

impl Schedule {
    /// Parses `schedule`; its fields are read in `zone` unless the schedule names its own with
    /// a `TZ=` or `CRON_TZ=` prefix (which validation refuses on new CronJobs).
    pub fn parse(schedule: &str, zone: TimeZone) -> Result<Schedule, String> {
        let mut spec = schedule.trim();
        let mut zone = zone;
        for prefix in ["CRON_TZ=", "TZ="] {
            if let Some(rest) = spec.strip_prefix(prefix) {
                let (name, rest) = rest
                    .split_once(char::is_whitespace)
                    .ok_or_else(|| format!("provided bad spec {schedule:?}"))?;
                zone = TimeZone::get(name)
                    .map_err(|e| format!("provided bad location {name}: {e}"))?;
                spec = rest.trim();
                break;
            }
        }
        if let Some(every) = spec.strip_prefix("@every") {
            let period = parse_go_duration(every.trim())
                .ok_or_else(|| format!("failed to parse duration {spec}: {every:?}"))?;
            // robfig rounds a period down to whole seconds, and to at least one second.
            let secs = period.as_secs().max(1);
            return Ok(Schedule::Every(Duration::from_secs(secs)));
        }
        let spec = if spec.eq_ignore_ascii_case("@midnight") {
            "@daily"
        } else {
            spec
        };
        if !spec.starts_with('@') {
            let fields = spec.split_whitespace().count();
            if fields != 5 {
                return Err(format!("expected exactly 5 fields, found {fields}: {spec}"));
            }
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .sloppy_ranges(true)
            .build()
            .parse(spec)
            .map_err(|e| e.to_string())?;
        Ok(Schedule::Cron {
            cron: Box::new(cron),
            zone,
        })
    }

    /// The first start time strictly after `after` (robfig's `Next`), or `None` if the
    /// schedule has none (`0 0 30 2 *`).
    pub fn next(&self, after: Timestamp) -> Option<Timestamp> {
        match self {
            Schedule::Every(period) => {
                let whole = Timestamp::from_second(after.as_second()).ok()?;
                whole
                    .checked_add(SignedDuration::try_from(*period).ok()?)
                    .ok()
            }
            Schedule::Cron { cron, zone } => {
                let start = after.to_zoned(zone.clone());
                cron.find_next_occurrence(&start, false)
                    .ok()
                    .map(|z| z.timestamp())
            }
        }
    }

    /// The start times due at `now` for a CronJob created at `created` whose last start was
    /// `last` (Kubernetes' `mostRecentScheduleTime`). With `deadline` (startingDeadlineSeconds)
    /// nothing older than `now - deadline` counts. An error means the schedule is invalid: it
    /// has fewer than a second between two start times, or none at all.
    pub fn due(
        &self,
        created: Timestamp,
        last: Option<Timestamp>,
        deadline: Option<i64>,
        now: Timestamp,
    ) -> Result<Due, String> {
        let mut earliest = last.unwrap_or(created);
        if let Some(secs) = deadline {
            let cutoff = now
                .checked_sub(SignedDuration::from_secs(secs))
                .unwrap_or(Timestamp::MIN);
            if cutoff > earliest {
                earliest = cutoff;
            }
        }
        let none = |most_recent| Due {
            earliest,
            most_recent,
            missed: Missed::None,
        };
        let Some(t1) = self.next(earliest) else {
            return Err("the schedule has no start time".into());
        };
        if now < t1 {
            return Ok(none(None));
        }
        let Some(t2) = self.next(t1) else {
            return Ok(none(Some(t1)));
        };
        if now < t2 {
            return Ok(none(Some(t1)));
        }
        let between = t2.duration_since(t1).round(k8s_openapi::jiff::Unit::Second);
        let between = between.map_or(0, |d| d.as_secs());
        if between < 1 {
            return Err("time difference between two schedules is less than 1 second".into());
        }
        // Count the periods between t1 and now, then walk the schedule from one period before
        // the estimate, so irregular schedules (`30 6-16/4 * * 1-5`) land on a real time.
        let elapsed = now.duration_since(t1).as_secs();
        let missed = elapsed / between + 1;
        let back = (missed - 2).saturating_mul(between);
        let mut t = t1
            .checked_add(SignedDuration::from_secs(back))
            .unwrap_or(t1);
        let mut most_recent = None;
        while let Some(next) = self.next(t) {
            if next > now {
                break;
            }
            most_recent = Some(next);
            t = next;
        }
        Ok(Due {
            earliest,
            most_recent,
            missed: if missed > MAX_MISSED {
                Missed::Many
            } else {
                Missed::Few
            },
        })
    }

    /// How long from `now` until the next start time after the most recent one (Kubernetes'
    /// `nextScheduleTimeDuration`), with 100 ms to spare; `None` if the schedule has none.
    pub fn until_next(
        &self,
        created: Timestamp,
        last: Option<Timestamp>,
        now: Timestamp,
    ) -> Option<Duration> {
        let from = match self.due(created, last, None, now) {
            Err(_) => now,
            Ok(Due {
                most_recent: Some(t),
                ..
            }) => t,
            // Nothing missed since `earliest`: the next start after it.
            Ok(Due {
                earliest,
                missed: Missed::None,
                ..
            }) => earliest,
            // Start times were missed but none found: the next one from now.
            Ok(_) => now,
        };
        let next = self.next(from)?;
        let wait = now.duration_until(next) + SignedDuration::from_millis(100);
        Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
    }
}

/// Parses a Go duration (`1h30m`, `90s`, `1.5h`, `300ms`) as Go's `time.ParseDuration` does;
/// `None` if it is not one. A negative period reads as zero (robfig then takes one second).
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let nanos = go_parse_duration::parse_duration(s).ok()?;
    Some(Duration::from_nanos(u64::try_from(nanos).unwrap_or(0)))
}

/// The name of the Job for the start time `scheduled`: `<cronjob>-<minutes since the epoch>`,
/// the same for every attempt, so two controllers never create two Jobs for one start.
pub fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// `scheduled` in `zone` as RFC 3339 (`Z` for UTC), as the
/// `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation carries it.
pub fn rfc3339_in(scheduled: Timestamp, zone: &TimeZone) -> String {
    let zoned = scheduled.to_zoned(zone.clone());
    if zoned.offset().seconds() == 0 {
        zoned.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

/// `t` in UTC as Go's RFC 1123 with a numeric zone (`Mon, 02 Jan 2006 15:04:05 +0000`), as
/// the `MissSchedule` event writes it.
pub fn rfc1123z(t: Timestamp) -> String {
    t.to_zoned(TimeZone::UTC)
        .strftime("%a, %d %b %Y %H:%M:%S %z")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("a timestamp")
    }

    fn utc(schedule: &str) -> Schedule {
        Schedule::parse(schedule, TimeZone::UTC).expect("a valid schedule")
    }

    #[test]
    fn schedules_parse_as_kubernetes_standard_parser_does() {
        for ok in [
            "*/5 * * * *",
            "0 3 * * MON-FRI",
            "@hourly",
            "@midnight",
            "@every 90s",
            "5/15 * * * *",
            "TZ=Europe/Berlin 0 9 * * *",
        ] {
            assert!(Schedule::parse(ok, TimeZone::UTC).is_ok(), "{ok}");
        }
        for bad in ["* * *", "61 * * * *", "@every", "@every 5x", "* * * * * *"] {
            assert!(Schedule::parse(bad, TimeZone::UTC).is_err(), "{bad}");
        }
        assert!(matches!(
            utc("@every 1500ms"),
            Schedule::Every(d) if d == Duration::from_secs(1)
        ));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
    }

    #[test]
    fn next_is_strictly_after_and_read_in_the_zone() {
        let every_minute = utc("* * * * *");
        assert_eq!(
            every_minute.next(ts("2030-01-01T12:00:00Z")),
            Some(ts("2030-01-01T12:01:00Z"))
        );
        let berlin = Schedule::parse(
            "0 9 * * *",
            TimeZone::get("Europe/Berlin").expect("the zone"),
        )
        .expect("a valid schedule");
        // 09:00 in Berlin is 08:00 UTC in winter, 07:00 UTC in summer.
        assert_eq!(
            berlin.next(ts("2030-01-01T12:00:00Z")),
            Some(ts("2030-01-02T08:00:00Z"))
        );
        assert_eq!(
            berlin.next(ts("2030-07-01T12:00:00Z")),
            Some(ts("2030-07-02T07:00:00Z"))
        );
        let every = utc("@every 90s");
        assert_eq!(
            every.next(ts("2030-01-01T12:00:00.5Z")),
            Some(ts("2030-01-01T12:01:30Z"))
        );
        assert_eq!(utc("0 0 30 2 *").next(ts("2030-01-01T00:00:00Z")), None);
        // Day of month and day of week: AND when one is `*`, OR when both are restricted.
        assert_eq!(
            utc("0 0 15 * *").next(ts("2030-01-01T00:00:00Z")),
            Some(ts("2030-01-15T00:00:00Z"))
        );
        assert_eq!(
            utc("0 0 1 * MON").next(ts("2030-01-01T00:00:00Z")),
            Some(ts("2030-01-07T00:00:00Z"))
        );
        assert_eq!(
            utc("0 0 1 * MON").next(ts("2030-01-28T00:00:00Z")),
            Some(ts("2030-02-01T00:00:00Z"))
        );
        // `N/step` runs from N to the end of the range, as robfig reads it.
        assert_eq!(
            utc("5/20 * * * *").next(ts("2030-01-01T00:30:00Z")),
            Some(ts("2030-01-01T00:45:00Z"))
        );
    }

    #[test]
    fn due_finds_the_most_recent_missed_start_time() {
        let s = utc("*/10 * * * *");
        let created = ts("2030-01-01T12:00:00Z");
        // Nothing due yet.
        let due = s
            .due(created, None, None, ts("2030-01-01T12:05:00Z"))
            .expect("valid");
        assert_eq!(due.most_recent, None);
        // One due.
        let due = s
            .due(created, None, None, ts("2030-01-01T12:15:00Z"))
            .expect("valid");
        assert_eq!(due.most_recent, Some(ts("2030-01-01T12:10:00Z")));
        assert_eq!(due.missed, Missed::None);
        // Several missed: only the most recent is due.
        let due = s
            .due(created, None, None, ts("2030-01-01T12:45:00Z"))
            .expect("valid");
        assert_eq!(due.most_recent, Some(ts("2030-01-01T12:40:00Z")));
        assert_eq!(due.missed, Missed::Few);
        // The last schedule time counts from there.
        let due = s
            .due(
                created,
                Some(ts("2030-01-01T12:40:00Z")),
                None,
                ts("2030-01-01T12:45:00Z"),
            )
            .expect("valid");
        assert_eq!(due.most_recent, None);
        // More than 100 missed.
        let due = s
            .due(created, None, None, ts("2030-01-02T12:00:00Z"))
            .expect("valid");
        assert_eq!(due.missed, Missed::Many);
        assert_eq!(due.most_recent, Some(ts("2030-01-02T12:00:00Z")));
        // A starting deadline cuts the old ones off.
        let due = s
            .due(created, None, Some(600), ts("2030-01-02T12:05:00Z"))
            .expect("valid");
        assert_eq!(due.earliest, ts("2030-01-02T11:55:00Z"));
        assert_eq!(due.most_recent, Some(ts("2030-01-02T12:00:00Z")));
        assert_eq!(due.missed, Missed::None);
        // An irregular schedule lands on real start times.
        let s = utc("30 6-16/4 * * 1-5");
        let due = s
            .due(
                ts("2030-01-07T00:00:00Z"),
                None,
                None,
                ts("2030-01-09T12:00:00Z"),
            )
            .expect("valid");
        assert_eq!(due.most_recent, Some(ts("2030-01-09T10:30:00Z")));
        assert!(utc("0 0 30 2 *").due(created, None, None, created).is_err());
    }

    #[test]
    fn until_next_waits_for_the_next_start_after_the_most_recent() {
        let s = utc("* * * * *");
        let wait = s
            .until_next(
                ts("2030-01-01T12:00:00Z"),
                Some(ts("2030-01-01T12:00:00Z")),
                ts("2030-01-01T12:00:20Z"),
            )
            .expect("a next time");
        assert_eq!(wait, Duration::from_millis(40_100));
    }

    #[test]
    fn job_names_and_annotations_are_kubernetes() {
        let t = ts("2030-01-01T12:00:00Z");
        assert_eq!(
            job_name("backup", t),
            format!("backup-{}", 1_893_499_200 / 60)
        );
        assert_eq!(rfc3339_in(t, &TimeZone::UTC), "2030-01-01T12:00:00Z");
        let berlin = TimeZone::get("Europe/Berlin").expect("the zone");
        assert_eq!(rfc3339_in(t, &berlin), "2030-01-01T13:00:00+01:00");
        assert_eq!(rfc1123z(t), "Tue, 01 Jan 2030 12:00:00 +0000");
    }
}
