//! The committer: the one thread that writes the log, with group commit, preallocation,
//! compaction and the high-water mark.
//!
//! It takes every queued job at once, writes consecutive submissions as one frame with one
//! `write` and one `fdatasync`, and then runs their callbacks in order. See the
//! [module docs](super) for the protocol and its invariants.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File};
use std::io::{self, Seek, SeekFrom, Write};
use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::super::backend::{BackendError, Durable, Record};
use super::file::{
    Mark, MarkState, PREALLOC_LOW, TMP_FILE, prealloc_step, prealloc_target, write_snapshot,
    zero_range,
};
use super::frame::{
    FRAME_HEADER, Frame, MAX_PAYLOAD, encode_record, put_size, record_size, snapshot_overhead,
};
use super::{BUF_KEEP, Job, Shared, lock};

/// How many submissions the previous commit must have carried before the committer lingers.
const LINGER_MIN_BATCH: usize = 8;

/// How long the committer lingers for more submissions under load.
const LINGER: Duration = Duration::from_micros(300);

/// How often, at most, the committer records the high-water mark while writes go on. Writes
/// acknowledged since the last record are protected by the preallocated zeros (a truncated log
/// ends without them) but not by the mark; see the design note.
const MARK_INTERVAL: Duration = Duration::from_secs(1);

/// How far above a frame's revisions the committer raises the mark's ceiling when the frame
/// would pass it: one extra `fdatasync` per this many revisions (a few per second at the
/// fastest), and a repair jumps the clock by at most this much.
const CEILING_STEP: u64 = 10_000;

/// The committer thread's state; it owns the log file.
pub(super) struct Committer {
    /// How many jobs the previous round took.
    pub(super) last_batch: usize,
    pub(super) shared: Arc<Shared>,
    pub(super) dir: PathBuf,
    /// The log, positioned at its logical end ([`Committer::log_bytes`]).
    pub(super) file: File,
    /// Keeps the directory locked until the committer is done with it.
    pub(super) _lock: File,
    /// The size of each live key's record, to track `live_bytes` exactly.
    pub(super) sizes: HashMap<Arc<str>, u64>,
    pub(super) live_bytes: u64,
    /// The logical end of the log: the end of the last synced frame.
    pub(super) log_bytes: u64,
    /// The size of the log file. The bytes from `log_bytes` to here are preallocated: written
    /// as zeros and synced before any frame is written over them.
    pub(super) allocated: u64,
    /// The encode buffer, reused across commits.
    pub(super) buf: Vec<u8>,
    /// Callbacks of the step in progress, so they still run if the step panics.
    pub(super) in_flight: Vec<Durable>,
    pub(super) poisoned: bool,
    /// The high-water mark, recorded at most every [`MARK_INTERVAL`] while writes go on, when
    /// the committer goes idle or stops, and after a compaction.
    pub(super) mark: Mark,
    /// When the mark was recorded last.
    pub(super) marked_at: Instant,
    /// The highest revision in the synced frames of the log (the mark may lag behind it).
    pub(super) synced_rv: u64,
}

impl Committer {
    pub(super) fn run(mut self) {
        let mut jobs = VecDeque::new();
        loop {
            {
                let mut queue = lock(&self.shared.queue);
                while queue.jobs.is_empty() && !queue.closing {
                    // Idle: record the mark once it is due, so that it catches up with the
                    // last writes soon after they stop.
                    queue = match self.mark_due_in() {
                        None => self
                            .shared
                            .wake
                            .wait(queue)
                            .unwrap_or_else(PoisonError::into_inner),
                        Some(wait) if wait.is_zero() => {
                            drop(queue);
                            self.record_mark();
                            lock(&self.shared.queue)
                        }
                        Some(wait) => match self.shared.wake.wait_timeout(queue, wait) {
                            Ok((q, _)) => q,
                            Err(poisoned) => poisoned.into_inner().0,
                        },
                    };
                }
                if queue.jobs.is_empty() {
                    drop(queue);
                    // Closing, and everything is done: a clean stop leaves an exact mark.
                    if !self.poisoned && self.synced_rv > self.mark.state().written {
                        self.record_mark();
                    }
                    return;
                }
                mem::swap(&mut jobs, &mut queue.jobs);
            }
            if self.last_batch >= LINGER_MIN_BATCH && jobs.len() < self.last_batch {
                self.linger(&mut jobs);
            }
            self.last_batch = jobs.len();
            while !jobs.is_empty() {
                let step = panic::catch_unwind(AssertUnwindSafe(|| self.step(&mut jobs)));
                if step.is_err() {
                    let error = io::Error::other("the write-ahead log committer panicked");
                    self.poison(&error);
                    self.finish(Err(BackendError::from(error)));
                }
            }
        }
    }

    /// Waits, at most [`LINGER`], until the writers of the previous batch have queued their
    /// next writes (three quarters of them), then adds what was queued to `jobs`.
    fn linger(&mut self, jobs: &mut VecDeque<Job>) {
        let target = self.last_batch * 3 / 4;
        let deadline = Instant::now() + LINGER;
        let mut queue = lock(&self.shared.queue);
        loop {
            let queued = jobs.len() + queue.jobs.len();
            let now = Instant::now();
            if queued >= target || now >= deadline || queue.closing {
                break;
            }
            queue.want = target - jobs.len();
            queue = match self.shared.wake.wait_timeout(queue, deadline - now) {
                Ok((q, _)) => q,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        queue.want = 0;
        jobs.extend(queue.jobs.drain(..));
    }

    /// Handles the next commit or compaction from `jobs`.
    fn step(&mut self, jobs: &mut VecDeque<Job>) {
        if self.poisoned {
            for job in jobs.drain(..) {
                let done = match job {
                    Job::Append { done, .. } | Job::Compact { done, .. } => done,
                };
                deliver(done, Err(BackendError::Poisoned));
            }
            return;
        }
        if let Some(Job::Append { .. }) = jobs.front() {
            let result = self.commit(jobs);
            self.finish(result);
            self.preallocate_ahead();
            if self.mark_due_in().is_some_and(|wait| wait.is_zero()) {
                self.record_mark();
            }
        } else if let Some(Job::Compact { live, rv, done }) = jobs.pop_front() {
            self.in_flight.push(done);
            let result = self.compact(&live, rv);
            self.shared
                .compaction_queued
                .store(false, Ordering::Relaxed);
            self.finish(result);
        }
    }

    /// Writes the submissions at the front of `jobs` as one frame and syncs it.
    fn commit(&mut self, jobs: &mut VecDeque<Job>) -> Result<(), BackendError> {
        let round_bytes = self.shared.round_bytes.load(Ordering::Relaxed) as u64;
        self.buf.clear();
        let frame = Frame::begin(&mut self.buf);
        let mut frame_rv = 0;
        while let Some(Job::Append { records, .. }) = jobs.front() {
            let size: u64 = records.iter().map(record_size).sum();
            let taken = frame.payload_len(&self.buf) as u64;
            if !self.in_flight.is_empty() && taken + size > round_bytes {
                break; // the next commit takes it
            }
            if size > MAX_PAYLOAD {
                // Only reachable for a single submission over 4 GiB, alone in this commit
                // (`round_bytes` is far below it); nothing was written.
                let Some(Job::Append { done, .. }) = jobs.pop_front() else {
                    break;
                };
                self.in_flight.push(done);
                let error = io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("a submission of {size} bytes does not fit in one log frame"),
                );
                self.poison(&error);
                return Err(error.into());
            }
            let Some(Job::Append { records, done }) = jobs.pop_front() else {
                break;
            };
            for record in &records {
                encode_record(&mut self.buf, record);
                self.track(record);
                frame_rv = frame_rv.max(record.rv);
            }
            self.in_flight.push(done);
        }
        if frame.payload_len(&self.buf) == 0 {
            self.buf.clear();
            return Ok(()); // only empty submissions: nothing to make durable
        }
        frame.finish(&mut self.buf);
        let written = self.buf.len() as u64;
        let result = self
            .raise_ceiling(frame_rv)
            .and_then(|()| self.reserve(written))
            .and_then(|()| self.write_and_sync());
        if self.buf.capacity() > BUF_KEEP {
            self.buf = Vec::new();
        }
        match result {
            Ok(()) => {
                self.log_bytes += written;
                self.synced_rv = self.synced_rv.max(frame_rv);
                self.publish_sizes();
                Ok(())
            }
            Err(error) => {
                self.poison(&error);
                Err(error.into())
            }
        }
    }

    /// Writes the frame in `buf` at the logical end, over preallocated zeros, and syncs it.
    fn write_and_sync(&mut self) -> io::Result<()> {
        #[cfg(test)]
        if self.shared.fail_next_commit.swap(false, Ordering::SeqCst) {
            return Err(io::Error::other("injected write failure"));
        }
        debug_assert!(
            self.log_bytes + (self.buf.len() + FRAME_HEADER) as u64 <= self.allocated,
            "a frame is written only over synced, preallocated zeros, and a zero header follows"
        );
        self.file.write_all(&self.buf)?;
        self.file.sync_data()?;
        #[cfg(test)]
        self.shared.syncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Makes sure a frame of `bytes` fits in the preallocated part of the file, with a zero
    /// frame header after it, preallocating now if it does not (a commit larger than what is
    /// left, or the first commit after a torn tail was cut off). The zero header keeps the
    /// end of the log on synced zeros: if a crash hits a later preallocation whose zeros never
    /// reached the disk, what reads back there is after the end and cannot pass for the next
    /// frame.
    fn reserve(&mut self, bytes: u64) -> io::Result<()> {
        let need = self.log_bytes + bytes + FRAME_HEADER as u64;
        if need <= self.allocated {
            return Ok(());
        }
        self.preallocate(need)
    }

    /// Run after a commit's callbacks, so the writers it answered do not wait: preallocates
    /// the next step once less than a quarter of one is left. Commits then rarely need to
    /// preallocate themselves.
    fn preallocate_ahead(&mut self) {
        let left = self.allocated.saturating_sub(self.log_bytes);
        if self.poisoned || left >= prealloc_step(self.log_bytes) / PREALLOC_LOW {
            return;
        }
        if let Err(error) = self.preallocate(self.allocated) {
            self.poison(&error);
        }
    }

    /// Extends the file with written zeros to one step past `need` and syncs them, before
    /// any frame is written there: overwriting allocated, already written blocks is what makes
    /// each commit's `fdatasync` a data flush only, without an inode update.
    fn preallocate(&mut self, need: u64) -> io::Result<()> {
        let started = Instant::now();
        let target = prealloc_target(need, self.log_bytes);
        zero_range(&mut self.file, self.allocated, target - self.allocated)?;
        self.file.seek(SeekFrom::Start(self.log_bytes))?;
        let grown = target - self.allocated;
        self.allocated = target;
        let elapsed = started.elapsed();
        tracing::debug!(
            bytes = grown,
            allocated = target,
            elapsed_us = elapsed.as_micros() as u64,
            "preallocated the write-ahead log"
        );
        #[cfg(test)]
        {
            let nanos = elapsed.as_nanos() as u64;
            self.shared.extensions.fetch_add(1, Ordering::SeqCst);
            self.shared
                .extension_nanos
                .fetch_add(nanos, Ordering::SeqCst);
            self.shared
                .extension_max_nanos
                .fetch_max(nanos, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Rewrites the log as a snapshot of `live` at `rv` and continues in the new file.
    fn compact(&mut self, live: &[Record], rv: u64) -> Result<(), BackendError> {
        let started = Instant::now();
        let before = self.log_bytes;
        let round_bytes = self.shared.round_bytes.load(Ordering::Relaxed);
        if let Err(error) = self.raise_ceiling(rv) {
            self.poison(&error);
            return Err(error.into());
        }
        match write_snapshot(&self.dir, live, rv, &mut self.buf, round_bytes) {
            Ok((file, len, allocated)) => {
                self.file = file;
                self.log_bytes = len;
                self.allocated = allocated;
                // The new log's snapshot header carries `rv`: record it at once, the rename
                // and the directory are synced.
                self.synced_rv = self.synced_rv.max(rv);
                let ceiling = self.mark.state().ceiling.max(self.synced_rv);
                let state = MarkState {
                    written: self.synced_rv,
                    ceiling,
                };
                if let Err(error) = self.mark.record(state) {
                    self.poison(&error);
                    return Err(error.into());
                }
                self.marked_at = Instant::now();
                self.sizes.clear();
                self.live_bytes = snapshot_overhead();
                for record in live {
                    self.track(record);
                }
                self.publish_sizes();
                if self.buf.capacity() > BUF_KEEP {
                    self.buf = Vec::new();
                }
                tracing::info!(
                    before,
                    after = len,
                    records = live.len(),
                    rv,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "compacted the write-ahead log"
                );
                Ok(())
            }
            Err(error) => {
                let _ = fs::remove_file(self.dir.join(TMP_FILE));
                self.poison(&error);
                Err(error.into())
            }
        }
    }

    /// Updates the live-size bookkeeping for a record that is being written.
    fn track(&mut self, record: &Record) {
        match &record.value {
            Some(value) => {
                let size = put_size(&record.key, value);
                match self.sizes.get_mut(&*record.key) {
                    Some(old) => {
                        self.live_bytes = self.live_bytes - *old + size;
                        *old = size;
                    }
                    None => {
                        self.live_bytes += size;
                        self.sizes.insert(record.key.clone(), size);
                    }
                }
            }
            None => {
                if let Some(old) = self.sizes.remove(&*record.key) {
                    self.live_bytes -= old;
                }
            }
        }
    }

    fn publish_sizes(&self) {
        self.shared
            .log_bytes
            .store(self.log_bytes, Ordering::Relaxed);
        self.shared
            .live_bytes
            .store(self.live_bytes, Ordering::Relaxed);
    }

    fn poison(&mut self, error: &io::Error) {
        tracing::error!(%error, dir = %self.dir.display(), "write-ahead log failed; refusing further writes");
        self.poisoned = true;
        self.shared.poisoned.store(true, Ordering::Relaxed);
    }

    /// How long until the mark is due, if it lags behind the log; `None` if it does not (or
    /// the backend is poisoned: a failing disk gets no more writes).
    fn mark_due_in(&self) -> Option<Duration> {
        (!self.poisoned && self.synced_rv > self.mark.state().written)
            .then(|| MARK_INTERVAL.saturating_sub(self.marked_at.elapsed()))
    }

    /// Records the highest synced revision as the high-water mark. A failure poisons the
    /// backend, as any I/O error in the data directory does.
    fn record_mark(&mut self) {
        if let Err(error) = self.mark.record_written(self.synced_rv) {
            self.poison(&error);
        }
        self.marked_at = Instant::now();
    }

    /// Makes sure the mark's ceiling covers `rv` before a frame holding it is written.
    fn raise_ceiling(&mut self, rv: u64) -> io::Result<()> {
        if rv <= self.mark.state().ceiling {
            return Ok(());
        }
        self.mark.raise_ceiling(rv + CEILING_STEP)
    }

    /// Runs the callbacks of the finished step, in order.
    fn finish(&mut self, result: Result<(), BackendError>) {
        for done in self.in_flight.drain(..) {
            deliver(done, result.clone());
        }
    }
}

/// Runs one callback; a panic in it is logged and does not stop the committer.
fn deliver(done: Durable, result: Result<(), BackendError>) {
    if panic::catch_unwind(AssertUnwindSafe(move || done(result))).is_err() {
        tracing::error!("a storage durability callback panicked");
    }
}
