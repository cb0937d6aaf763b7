//! The durable [`Backend`]: an append-only log with group commit, under `--data-dir`.
//!
//! [`WalBackend`] keeps one log file. Every write is appended to it and made durable with
//! `fdatasync` before its `done` callback runs, so an acknowledged write survives SIGKILL and
//! power loss. Concurrent writers share fsyncs: while one batch is being synced, the next one
//! queues up and is written with a single `write` and a single `fdatasync`. The file is
//! preallocated with written zeros ahead of the log, so that a commit overwrites allocated
//! blocks instead of growing the file, and its `fdatasync` needs no inode update. It does not
//! keep the data in memory (the [`Store`](super::Store) does) and it knows nothing of kinds or
//! watches. Start with [`WalBackend::open`]; the design note for humans is
//! `docs/design/storage-wal.md`.
//!
//! # Files
//! All in the data directory:
//! - `kore.wal`: the log.
//! - `kore.wal.tmp`: a compaction in progress; removed at open (it never became the log).
//! - `kore.lock`: held with `flock` while a process has the directory open; holds its pid.
//!
//! # Format
//! All integers are little-endian.
//! ```text
//! file    = magic frame* zero*                     (the zeros are preallocated space)
//! magic   = "KOREWAL" 0x01                         (8 bytes; the last byte is the version)
//! frame   = len:u32 crc:u32 payload                (len = payload bytes, crc = CRC-32/IEEE of payload)
//! payload = entry+
//! entry   = rv:u64 key_len:u32 key tag:u8 body
//! body    = value_len:u32 value                    (tag 0, put)
//!         | nothing                                (tag 1, delete; tag 2, snapshot header)
//! ```
//! A snapshot header (tag 2, empty key) opens every log file (a new log is an empty snapshot
//! at revision 0) and carries the revision the snapshot was taken at, which can be above every live record's revision (when
//! the newest changes were deletions). Keys are UTF-8.
//!
//! The log has a *logical end*, the end of its last frame, where the next frame goes, and a
//! file size beyond it: the bytes in between are zeros, written and synced in advance. A frame
//! is never empty (the commit path skips empty batches, `Frame` drops an empty frame and
//! asserts the rest hold an entry), so its length word is never zero, and a zero length word
//! is where the log ends. The format is unchanged from logs without preallocation (the version
//! byte stays 1): a log without zeros is read as before, and an older build reads a
//! preallocated log, cutting its zeros off as a torn tail, with a warning.
//!
//! One frame is one commit: everything written by one `write` and made durable by one
//! `fdatasync`, not one frame per record. After power loss, the pages of an unsynced write
//! can reach the disk in any order, so with a frame per record a damaged record could be
//! followed by an intact one from the same unsynced write, and recovery could not tell that
//! from real corruption. With a frame per commit, a frame is only written after the one
//! before it was synced, so "damaged frame, then an intact frame" is always corruption. It
//! also makes each `submit` atomic and costs one CRC per commit instead of one per record.
//!
//! # Commit protocol
//! 1. [`Backend::submit`] and [`Backend::compact`] push a job onto a queue under a short
//!    mutex and wake the committer (a dedicated thread, because `fdatasync` blocks). They
//!    never wait for I/O.
//! 2. The committer takes every queued job. Consecutive submissions become one frame (at
//!    most 32 MiB unless a single submission is larger): one `write_all` at the logical end,
//!    over preallocated zeros, one `sync_data`, then every `done(Ok(()))` in submission
//!    order. Batches form from the writes that arrive while the previous fsync runs. Under
//!    load (the previous commit carried at least `LINGER_MIN_BATCH` (8) submissions, i.e. that
//!    many writers are waiting in turn) and when fewer jobs are queued than last time, the
//!    committer lingers (at most `LINGER`, 300 µs) so that writers just answered can queue their next
//!    write: batches grow and fsyncs, with their kernel and wake-up costs, become fewer. A
//!    lone writer never waits.
//! 3. Preallocation: after a commit's callbacks, when less than a quarter of a step is left
//!    between the logical end and the end of the file, the committer writes the next step of
//!    zeros after the end of the file and syncs them (`sync_data`, which covers the new
//!    size; the directory entry does not change). A step is as large as the logical log,
//!    from 1 MiB (`PREALLOC_MIN`, so a small data directory stays small) up to 4 MiB
//!    (`PREALLOC_MAX`), ending on a page boundary. Writes that arrive meanwhile wait for
//!    it, about 2–3 ms for 4 MiB on the bench disk, once per 4 MiB of log. A frame that does
//!    not fit in what is left (a large commit, or the first after a torn tail was cut off)
//!    preallocates before it is written.
//! 4. A compaction job is taken in its turn (behind earlier submissions, which are already
//!    synced): write `kore.wal.tmp` (magic, snapshot header, every live record, then one
//!    preallocation step of zeros), `fsync` it, rename it over `kore.wal`, `fsync` the
//!    directory, and append to the new file from then on. Its `done` runs after the
//!    directory fsync.
//! 5. On any I/O error the backend is poisoned: the jobs of the failed step get
//!    [`BackendError::Io`], every later job gets [`BackendError::Poisoned`] (a preallocation
//!    after a commit has no jobs of its own: its error is logged). A failed fsync is
//!    never retried (after a failed `fsync` the kernel may have dropped the dirty pages, so a
//!    retry that succeeds proves nothing).
//!
//! # Invariants
//! - Everything before the end of the last synced frame is intact on disk; only the frame of
//!   the commit in flight can be damaged by a crash.
//! - A frame is written only after every earlier frame is synced.
//! - A frame is written only over preallocated zeros that were synced before, and at least
//!   a zero frame header of them stays after it (a debug assertion checks both). So the
//!   logical end is always followed by synced zeros on disk, and a crash can only leave the
//!   frame in flight, partly written, over them.
//! - The logical size ([`Backend::needs_compaction`], the `log_bytes` of the committer)
//!   never counts the preallocated zeros.
//! - `kore.wal` is always a complete, synced file: new files are created as `kore.wal.tmp`,
//!   synced, renamed, and the directory is synced before anything is appended to them.
//! - `done` runs exactly once per job, in submission order, on the committer thread.
//!
//! # Recovery
//! [`WalBackend::open`] reads the log frame by frame and replays it: the last put of a key
//! wins, a delete removes it, and the highest revision seen (deletes and snapshot headers
//! included) becomes [`Loaded::max_rv`]. A zero length word (or fewer than 8 bytes, all
//! zero) is the logical end: if everything after it is zero, the log is clean, and the zeros
//! are kept as preallocated space (synced once more, since after a kill they may have been
//! in the page cache only). Anything else is damage: a frame that is short or fails its CRC,
//! or non-zero bytes after a zero length word (a commit whose first page never reached the
//! disk). At the damage, recovery searches the rest of the file, at every byte offset, for an
//! intact frame; runs of zeros are skipped in one scan, since no frame starts with a zero
//! length word, and a candidate whose payload runs into zeros does not decode them one by
//! one. If there is one, the log is [`BackendError::Corrupt`] (damage in the middle; start
//! from a backup). If there is none, the damaged bytes are the torn tail of a commit that was
//! never acknowledged: the file is truncated there (with a warning), zeros after the damage
//! included, and the committer preallocates again before its first commit. A frame that
//! passes its CRC but does not decode, or a wrong magic, is always `Corrupt`.
//!
//! # Compaction
//! [`Backend::needs_compaction`] is true when the log (its logical size, without the
//! preallocated zeros) is larger than 64 MiB and larger than four times the live data (the
//! bytes a snapshot would take). The live size is tracked exactly by the committer from the
//! records that pass through it: a map from each live key (the store's own `Arc<str>`, so no
//! key is copied) to the size of its record, about 50 bytes per key; values are never kept.
//! It reports false while a compaction is queued or after a failure.
//!
//! # Caveats
//! - Damage to the last frame (bit rot, not a crash) cannot be told from a torn write: it is
//!   truncated like one, losing that commit even though it was acknowledged.
//! - A compaction rewrites the whole live state on the committer thread; writes submitted
//!   meanwhile wait for it, about as long as writing and syncing the live data takes.
//! - Preallocation writes every byte of the log twice (zeros, then the frame) and the file is
//!   up to one step larger than the log. The stall of a step shows in tail latency.
//! - On a file system without a journal, blocks whose zeros never reached the disk (a crash
//!   during a preallocation) may read back as stale data of a deleted file, such as the log
//!   a compaction replaced. That data lies after the synced zero header that ends the log,
//!   so it is never replayed: recovery cuts it off as a torn tail, or, if it holds an intact
//!   frame, reports `Corrupt` (truncating the file at the reported offset then loses nothing
//!   acknowledged). Appends without preallocation had this exposure too.
//! - A write whose `done` got an error may still be on disk after a restart (the `write`
//!   succeeded but the `fdatasync` reported a failure): its outcome is unknown, as after a
//!   timeout from etcd. It is never half there.
//! - `done` callbacks run on the committer thread, and the next commit waits for them: keep
//!   them short. A panicking callback is caught and logged.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use bytes::Bytes;

use super::backend::{Backend, BackendError, Durable, Loaded, Record};

/// The log file in the data directory.
const LOG_FILE: &str = "kore.wal";
/// A compaction in progress; becomes [`LOG_FILE`] by rename.
const TMP_FILE: &str = "kore.wal.tmp";
/// Held with `flock` while a process has the directory open.
const LOCK_FILE: &str = "kore.lock";
/// The first bytes of every log file; the last byte is the format version.
const MAGIC: [u8; 8] = *b"KOREWAL\x01";

/// `len:u32 crc:u32` before every payload.
const FRAME_HEADER: usize = 8;
/// `rv:u64 key_len:u32 tag:u8`: the smallest entry, so also the smallest payload.
const ENTRY_FIXED: usize = 13;
/// The largest payload the `u32` length can describe.
const MAX_PAYLOAD: u64 = u32::MAX as u64;
/// A commit stops taking submissions once its payload reaches this size (a single larger
/// submission still goes in one frame). Bounds the buffer and the time between fsyncs.
const ROUND_BYTES: usize = 32 << 20;

const TAG_PUT: u8 = 0;
const TAG_DELETE: u8 = 1;
const TAG_SNAPSHOT: u8 = 2;

/// The log may grow to this size before compaction is considered at all.
const COMPACTION_FLOOR: u64 = 64 << 20;
/// Compaction is due when the log is this many times larger than the live data.
const COMPACTION_RATIO: u64 = 4;
/// An encode buffer grown beyond this by a large commit is freed afterwards.
const BUF_KEEP: usize = 4 << 20;

/// The smallest preallocation step: a new or small log grows 1 MiB at a time.
const PREALLOC_MIN: u64 = 1 << 20;
/// The largest preallocation step. Writing and syncing it stalls commits for 2–3 ms on the
/// bench disk (16 MiB took 9–10 ms, which showed in the p99 latency at 64 clients, for no
/// more throughput): the cost per byte is the same, only the stalls are longer.
const PREALLOC_MAX: u64 = 4 << 20;
/// The committer preallocates ahead, after a commit's callbacks, once less than
/// `1 / PREALLOC_LOW` of a step is left, so that commits rarely wait for it.
const PREALLOC_LOW: u64 = 4;
/// Preallocation ends on a page boundary.
const PREALLOC_ALIGN: u64 = 4096;
/// The zeros preallocation writes, this many bytes per `write`.
static ZEROS: [u8; 256 << 10] = [0; 256 << 10];

/// A durable [`Backend`]: an append-only log with group commit in one directory.
///
/// See the [module docs](self) for the format, the commit protocol and recovery.
///
/// # Guarantees
/// - When a `done` callback gets `Ok(())`, its records are on disk (`fdatasync`ed) and
///   survive SIGKILL and power loss.
/// - A `submit` is atomic: after a crash, all of its records are there or none.
/// - What survives a crash is a prefix of the submissions: if one survived, every earlier
///   one did too.
///
/// Dropping the backend lets the committer finish every queued job, then joins it.
pub struct WalBackend {
    dir: PathBuf,
    shared: Arc<Shared>,
    recovered: Mutex<Option<Loaded>>,
    committer: Option<JoinHandle<()>>,
}

/// State shared by the handle and the committer thread.
struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when the queue becomes non-empty or the backend closes.
    wake: Condvar,
    /// Logical bytes in the current log file (up to the end of the last synced frame; the
    /// preallocated zeros after it are not counted).
    log_bytes: AtomicU64,
    /// Bytes a snapshot of the live data would take.
    live_bytes: AtomicU64,
    /// The log size under which compaction is never due.
    compaction_floor: AtomicU64,
    /// A compaction is queued or running.
    compaction_queued: AtomicBool,
    /// A write failed; nothing more is accepted.
    poisoned: AtomicBool,
    /// [`ROUND_BYTES`]; tests lower it to exercise frame splitting.
    round_bytes: AtomicUsize,
    /// fsyncs of the log (commits), for tests of group commit.
    #[cfg(test)]
    syncs: AtomicU64,
    /// Preallocations by the committer, and the total and longest time they took.
    #[cfg(test)]
    extensions: AtomicU64,
    #[cfg(test)]
    extension_nanos: AtomicU64,
    #[cfg(test)]
    extension_max_nanos: AtomicU64,
    /// Makes the next commit fail as if the disk had failed.
    #[cfg(test)]
    fail_next_commit: AtomicBool,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closing: bool,
    /// While the committer lingers: wake it once this many jobs are queued (0 otherwise).
    want: usize,
}

enum Job {
    Append {
        records: Vec<Record>,
        done: Durable,
    },
    Compact {
        live: Vec<Record>,
        rv: u64,
        done: Durable,
    },
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WalBackend {
    /// Opens the log in `dir`, creating the directory and the log if needed, and recovers it
    /// (see [Recovery](self#recovery)). The state it holds is returned by [`Backend::load`].
    ///
    /// # Errors
    /// - [`BackendError::Io`] if the directory cannot be created or read, or if another
    ///   process (or another `WalBackend` in this one) has it open.
    /// - [`BackendError::Corrupt`] if the log is damaged other than by a torn final write.
    ///   Do not delete it: it holds every acknowledged write up to the damage.
    pub fn open(dir: &Path) -> Result<WalBackend, BackendError> {
        let created = !dir.try_exists()?;
        fs::create_dir_all(dir)?;
        if created && let Some(parent) = dir.parent() {
            // `Path::new("data").parent()` is the empty path: the current directory.
            sync_dir(if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            })?;
        }
        let lock_file = lock_dir(dir)?;

        let tmp = dir.join(TMP_FILE);
        match fs::remove_file(&tmp) {
            Ok(()) => tracing::warn!(path = %tmp.display(), "removed an unfinished compaction"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        let path = dir.join(LOG_FILE);
        let mut buf = Vec::new();
        if !path.try_exists()? {
            write_snapshot(dir, &[], 0, &mut buf, ROUND_BYTES)?;
        }
        let mut file = OpenOptions::new().read(true).write(true).open(&path)?;
        let Recovered {
            replay,
            end: log_bytes,
            allocated,
        } = recover(&mut file, &path)?;
        file.seek(SeekFrom::Start(log_bytes))?;

        let mut sizes = HashMap::with_capacity(replay.live.len());
        let mut live_bytes = snapshot_overhead();
        let mut records = Vec::with_capacity(replay.live.len());
        for (key, (rv, value)) in replay.live {
            let size = put_size(&key, &value);
            live_bytes += size;
            sizes.insert(key.clone(), size);
            records.push(Record {
                key,
                rv,
                value: Some(value),
            });
        }

        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            log_bytes: AtomicU64::new(log_bytes),
            live_bytes: AtomicU64::new(live_bytes),
            compaction_floor: AtomicU64::new(COMPACTION_FLOOR),
            compaction_queued: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            round_bytes: AtomicUsize::new(ROUND_BYTES),
            #[cfg(test)]
            syncs: AtomicU64::new(0),
            #[cfg(test)]
            extensions: AtomicU64::new(0),
            #[cfg(test)]
            extension_nanos: AtomicU64::new(0),
            #[cfg(test)]
            extension_max_nanos: AtomicU64::new(0),
            #[cfg(test)]
            fail_next_commit: AtomicBool::new(false),
        });
        let committer = Committer {
            last_batch: 0,
            shared: shared.clone(),
            dir: dir.to_path_buf(),
            file,
            _lock: lock_file,
            sizes,
            live_bytes,
            log_bytes,
            allocated,
            buf,
            in_flight: Vec::new(),
            poisoned: false,
        };
        let handle = thread::Builder::new()
            .name("kore-wal".into())
            .spawn(move || committer.run())?;
        Ok(WalBackend {
            dir: dir.to_path_buf(),
            shared,
            recovered: Mutex::new(Some(Loaded {
                records,
                max_rv: replay.max_rv,
            })),
            committer: Some(handle),
        })
    }

    /// The data directory this backend writes to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn enqueue(&self, job: Job) {
        let wake = {
            let mut queue = lock(&self.shared.queue);
            let was_empty = queue.jobs.is_empty();
            queue.jobs.push_back(job);
            was_empty || (queue.want > 0 && queue.jobs.len() >= queue.want)
        };
        // The committer sleeps on an empty queue, or lingers for a number of jobs: only the
        // first job, or the one that completes that number, needs to wake it.
        if wake {
            self.shared.wake.notify_one();
        }
    }

    /// The number of fsyncs of the log so far.
    #[cfg(test)]
    fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::SeqCst)
    }

    /// Makes the next commit fail with an I/O error.
    #[cfg(test)]
    fn fail_next_commit(&self) {
        self.shared.fail_next_commit.store(true, Ordering::SeqCst);
    }

    /// Sets the payload size at which a commit or a snapshot frame is closed.
    #[cfg(test)]
    fn set_round_bytes(&self, bytes: usize) {
        self.shared.round_bytes.store(bytes, Ordering::SeqCst);
    }

    /// Lowers the log size under which compaction is never due.
    #[cfg(test)]
    fn set_compaction_floor(&self, bytes: u64) {
        self.shared.compaction_floor.store(bytes, Ordering::SeqCst);
    }
}

impl Backend for WalBackend {
    /// Returns the state recovered by [`WalBackend::open`]. It is handed over, not kept: a
    /// second call is an error.
    fn load(&self) -> Result<Loaded, BackendError> {
        lock(&self.recovered).take().ok_or_else(|| {
            BackendError::Io(Arc::new(io::Error::other(
                "the write-ahead log was already loaded; load may be called only once",
            )))
        })
    }

    fn submit(&self, records: Vec<Record>, done: Durable) {
        self.enqueue(Job::Append { records, done });
    }

    fn needs_compaction(&self) -> bool {
        let shared = &self.shared;
        if shared.poisoned.load(Ordering::Relaxed)
            || shared.compaction_queued.load(Ordering::Relaxed)
        {
            return false;
        }
        let log = shared.log_bytes.load(Ordering::Relaxed);
        let live = shared.live_bytes.load(Ordering::Relaxed);
        let floor = shared.compaction_floor.load(Ordering::Relaxed);
        log > floor.max(live.saturating_mul(COMPACTION_RATIO))
    }

    fn compact(&self, live: Vec<Record>, rv: u64, done: Durable) {
        self.shared.compaction_queued.store(true, Ordering::Relaxed);
        self.enqueue(Job::Compact { live, rv, done });
    }
}

impl Drop for WalBackend {
    fn drop(&mut self) {
        lock(&self.shared.queue).closing = true;
        self.shared.wake.notify_one();
        if let Some(handle) = self.committer.take() {
            // Dropped from a `done` callback: the committer drains the queue and exits on its
            // own (it owns the lock file, so the directory stays locked until then).
            if handle.thread().id() == thread::current().id() {
                return;
            }
            if handle.join().is_err() {
                tracing::error!("the write-ahead log committer panicked");
            }
        }
    }
}

impl fmt::Debug for WalBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WalBackend")
            .field("dir", &self.dir)
            .field("log_bytes", &self.shared.log_bytes.load(Ordering::Relaxed))
            .field(
                "live_bytes",
                &self.shared.live_bytes.load(Ordering::Relaxed),
            )
            .field("poisoned", &self.shared.poisoned.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// The committer thread's state; it owns the log file.
/// How many submissions the previous commit must have carried before the committer lingers.
const LINGER_MIN_BATCH: usize = 8;

/// How long the committer lingers for more submissions under load.
const LINGER: std::time::Duration = std::time::Duration::from_micros(300);

struct Committer {
    /// How many jobs the previous round took.
    last_batch: usize,
    shared: Arc<Shared>,
    dir: PathBuf,
    /// The log, positioned at its logical end ([`Committer::log_bytes`]).
    file: File,
    /// Keeps the directory locked until the committer is done with it.
    _lock: File,
    /// The size of each live key's record, to track `live_bytes` exactly.
    sizes: HashMap<Arc<str>, u64>,
    live_bytes: u64,
    /// The logical end of the log: the end of the last synced frame.
    log_bytes: u64,
    /// The size of the log file. The bytes from `log_bytes` to here are preallocated: written
    /// as zeros and synced before any frame is written over them.
    allocated: u64,
    /// The encode buffer, reused across commits.
    buf: Vec<u8>,
    /// Callbacks of the step in progress, so they still run if the step panics.
    in_flight: Vec<Durable>,
    poisoned: bool,
}

impl Committer {
    fn run(mut self) {
        let mut jobs = VecDeque::new();
        loop {
            {
                let mut queue = lock(&self.shared.queue);
                while queue.jobs.is_empty() && !queue.closing {
                    queue = self
                        .shared
                        .wake
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if queue.jobs.is_empty() {
                    return; // closing, and everything is done
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
        let deadline = std::time::Instant::now() + LINGER;
        let mut queue = lock(&self.shared.queue);
        loop {
            let queued = jobs.len() + queue.jobs.len();
            let now = std::time::Instant::now();
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
            }
            self.in_flight.push(done);
        }
        if frame.payload_len(&self.buf) == 0 {
            self.buf.clear();
            return Ok(()); // only empty submissions: nothing to make durable
        }
        frame.finish(&mut self.buf);
        let written = self.buf.len() as u64;
        let result = self.reserve(written).and_then(|()| self.write_and_sync());
        if self.buf.capacity() > BUF_KEEP {
            self.buf = Vec::new();
        }
        match result {
            Ok(()) => {
                self.log_bytes += written;
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
        self.file.seek(SeekFrom::Start(self.allocated))?;
        write_zeros(&mut self.file, target - self.allocated)?;
        self.file.sync_data()?;
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
        match write_snapshot(&self.dir, live, rv, &mut self.buf, round_bytes) {
            Ok((file, len, allocated)) => {
                self.file = file;
                self.log_bytes = len;
                self.allocated = allocated;
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

/// Takes the directory's lock file, or explains who holds it.
fn lock_dir(dir: &Path) -> Result<File, BackendError> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0)?;
            file.write_all(format!("{}\n", std::process::id()).as_bytes())?;
            Ok(file)
        }
        Err(fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => String::new(),
                pid => format!(" (pid {pid})"),
            };
            Err(BackendError::Io(Arc::new(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "data directory {} is already in use by another process{holder}; \
                     it is locked through {}",
                    dir.display(),
                    path.display()
                ),
            ))))
        }
        Err(fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes a complete log holding `live` at `rv` as `kore.wal.tmp`, preallocated, syncs it,
/// renames it over `kore.wal` and syncs the directory, closing frames at `round_bytes` of
/// payload. Returns the new log, positioned at its logical end, that end and the file's size.
fn write_snapshot(
    dir: &Path,
    live: &[Record],
    rv: u64,
    buf: &mut Vec<u8>,
    round_bytes: usize,
) -> io::Result<(File, u64, u64)> {
    let tmp = dir.join(TMP_FILE);
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    buf.clear();
    buf.extend_from_slice(&MAGIC);
    let mut frame = Frame::begin(buf);
    encode_entry(buf, rv, "", TAG_SNAPSHOT, None);
    let mut len = 0;
    for record in live {
        let size = record_size(record);
        if size > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "record {} of {size} bytes does not fit in one log frame",
                    record.key
                ),
            ));
        }
        if (frame.payload_len(buf) as u64) + size > round_bytes as u64 {
            frame.finish(buf);
            file.write_all(buf)?;
            len += buf.len() as u64;
            buf.clear();
            frame = Frame::begin(buf);
        }
        encode_record(buf, record);
    }
    frame.finish(buf);
    file.write_all(buf)?;
    len += buf.len() as u64;
    buf.clear();
    // The zeros are synced with the snapshot: no separate preallocation step.
    let allocated = prealloc_target(len, len);
    write_zeros(&mut file, allocated - len)?;
    file.sync_all()?;
    fs::rename(&tmp, dir.join(LOG_FILE))?;
    sync_dir(dir)?;
    file.seek(SeekFrom::Start(len))?;
    Ok((file, len, allocated))
}

/// How much to preallocate at a time for a log of `logical` bytes: as much as it holds
/// (so the file at most doubles), at least [`PREALLOC_MIN`], at most [`PREALLOC_MAX`].
fn prealloc_step(logical: u64) -> u64 {
    logical.clamp(PREALLOC_MIN, PREALLOC_MAX)
}

/// The file size to preallocate to when `need` bytes must fit in a log of `logical` bytes:
/// one step past `need`, on a page boundary.
fn prealloc_target(need: u64, logical: u64) -> u64 {
    (need + prealloc_step(logical)).next_multiple_of(PREALLOC_ALIGN)
}

/// Writes `len` zero bytes at the file's position.
fn write_zeros(file: &mut File, mut len: u64) -> io::Result<()> {
    while len > 0 {
        let n = len.min(ZEROS.len() as u64) as usize;
        file.write_all(&ZEROS[..n])?;
        len -= n as u64;
    }
    Ok(())
}

/// A frame being encoded at the end of a buffer.
struct Frame {
    start: usize,
}

impl Frame {
    fn begin(buf: &mut Vec<u8>) -> Frame {
        let start = buf.len();
        buf.extend_from_slice(&[0; FRAME_HEADER]);
        Frame { start }
    }

    fn payload_len(&self, buf: &[u8]) -> usize {
        buf.len() - self.start - FRAME_HEADER
    }

    /// Fills in the header. Callers keep the payload within [`MAX_PAYLOAD`]; an empty frame
    /// is removed, since a frame holds at least one entry.
    fn finish(self, buf: &mut Vec<u8>) {
        let len = self.payload_len(buf);
        if len == 0 {
            buf.truncate(self.start);
            return;
        }
        // A zero length word marks the end of the log, so no frame may have one.
        debug_assert!(len >= ENTRY_FIXED, "a frame holds at least one entry");
        let crc = crc32(&buf[self.start + FRAME_HEADER..]);
        buf[self.start..self.start + 4].copy_from_slice(&(len as u32).to_le_bytes());
        buf[self.start + 4..self.start + 8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The encoded size of a record's entry.
fn record_size(record: &Record) -> u64 {
    let key = record.key.len() as u64;
    match &record.value {
        Some(value) => ENTRY_FIXED as u64 + key + 4 + value.len() as u64,
        None => ENTRY_FIXED as u64 + key,
    }
}

fn put_size(key: &str, value: &Bytes) -> u64 {
    (ENTRY_FIXED + key.len() + 4 + value.len()) as u64
}

/// What a snapshot takes besides its records: magic, frame header, snapshot header.
fn snapshot_overhead() -> u64 {
    (MAGIC.len() + FRAME_HEADER + ENTRY_FIXED) as u64
}

fn encode_record(buf: &mut Vec<u8>, record: &Record) {
    match &record.value {
        Some(value) => encode_entry(buf, record.rv, &record.key, TAG_PUT, Some(value)),
        None => encode_entry(buf, record.rv, &record.key, TAG_DELETE, None),
    }
}

/// Appends one entry. Lengths were checked against [`MAX_PAYLOAD`] by the caller.
fn encode_entry(buf: &mut Vec<u8>, rv: u64, key: &str, tag: u8, value: Option<&[u8]>) {
    buf.extend_from_slice(&rv.to_le_bytes());
    buf.extend_from_slice(&(key.len() as u32).to_le_bytes());
    buf.extend_from_slice(key.as_bytes());
    buf.push(tag);
    if let Some(value) = value {
        buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
        buf.extend_from_slice(value);
    }
}

/// One decoded entry, borrowing from its frame.
#[derive(Debug, PartialEq, Eq)]
struct Entry<'a> {
    rv: u64,
    key: &'a str,
    /// The new value; `None` for a delete or a snapshot header.
    value: Option<&'a [u8]>,
}

/// Why a payload does not decode.
#[derive(Debug)]
enum Malformed {
    /// An entry needs this many more bytes than the payload has.
    Short(usize),
    Empty,
    KeyNotUtf8 {
        rv: u64,
    },
    SnapshotWithKey {
        rv: u64,
    },
    UnknownTag {
        tag: u8,
        rv: u64,
    },
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::Short(n) => write!(f, "an entry ends {n} bytes early"),
            Malformed::Empty => write!(f, "the frame holds no entry"),
            Malformed::KeyNotUtf8 { rv } => {
                write!(f, "the key of the entry at revision {rv} is not UTF-8")
            }
            Malformed::SnapshotWithKey { rv } => {
                write!(f, "the snapshot header at revision {rv} has a key")
            }
            Malformed::UnknownTag { tag, rv } => {
                write!(f, "unknown entry tag {tag} at revision {rv}")
            }
        }
    }
}

/// Decodes every entry of a frame's payload (whose CRC already matched).
fn decode_payload<'a>(
    mut payload: &'a [u8],
    mut each: impl FnMut(Entry<'a>),
) -> Result<(), Malformed> {
    if payload.is_empty() {
        return Err(Malformed::Empty);
    }
    while !payload.is_empty() {
        each(next_entry(&mut payload)?);
    }
    Ok(())
}

/// An entry of zeros: revision 0, empty key, a put of an empty value.
const ZERO_ENTRY: usize = ENTRY_FIXED + 4;

/// Whether `payload` decodes, knowing that its bytes from `zeros_from` on are all zero:
/// [`decode_payload`] without visiting the entries, and without walking zeros one entry at
/// a time. Zeros decode as entries of [`ZERO_ENTRY`] bytes, so a run of zeros that starts an
/// entry is skipped by as many whole zero entries as it holds, and once an entry starts in
/// the zeros at the end, the rest decodes exactly when its length is a multiple of that. This
/// keeps the search for an intact frame fast when candidate frames reach into megabytes of
/// preallocated zeros.
fn payload_decodes(mut payload: &[u8], zeros_from: usize) -> bool {
    let total = payload.len();
    if total == 0 {
        return false;
    }
    while !payload.is_empty() {
        if total - payload.len() >= zeros_from {
            return payload.len().is_multiple_of(ZERO_ENTRY);
        }
        if payload.len() >= ZERO_ENTRY && payload[..ZERO_ENTRY] == [0; ZERO_ENTRY] {
            let run = first_nonzero(payload).unwrap_or(payload.len());
            payload = &payload[run - run % ZERO_ENTRY..];
            continue;
        }
        if next_entry(&mut payload).is_err() {
            return false;
        }
    }
    true
}

/// Decodes the entry at the start of `payload` and moves past it.
fn next_entry<'a>(payload: &mut &'a [u8]) -> Result<Entry<'a>, Malformed> {
    fn take<'a>(data: &mut &'a [u8], n: usize) -> Result<&'a [u8], Malformed> {
        if data.len() < n {
            return Err(Malformed::Short(n - data.len()));
        }
        let (head, tail) = data.split_at(n);
        *data = tail;
        Ok(head)
    }
    fn u32_at(data: &mut &[u8]) -> Result<usize, Malformed> {
        let b = take(data, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    let b = take(payload, 8)?;
    let rv = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let key_len = u32_at(payload)?;
    let key =
        std::str::from_utf8(take(payload, key_len)?).map_err(|_| Malformed::KeyNotUtf8 { rv })?;
    let tag = take(payload, 1)?[0];
    let value = match tag {
        TAG_PUT => {
            let len = u32_at(payload)?;
            Some(take(payload, len)?)
        }
        TAG_DELETE => None,
        TAG_SNAPSHOT if key.is_empty() => None,
        TAG_SNAPSHOT => return Err(Malformed::SnapshotWithKey { rv }),
        tag => return Err(Malformed::UnknownTag { tag, rv }),
    };
    Ok(Entry { rv, key, value })
}

/// The state replayed from a log.
struct Replay {
    live: HashMap<Arc<str>, (u64, Bytes)>,
    max_rv: u64,
}

impl Replay {
    fn apply(&mut self, entry: Entry<'_>) {
        self.max_rv = self.max_rv.max(entry.rv);
        match entry.value {
            Some(value) => {
                let value = Bytes::copy_from_slice(value);
                match self.live.get_mut(entry.key) {
                    Some(slot) => *slot = (entry.rv, value),
                    None => {
                        self.live.insert(Arc::from(entry.key), (entry.rv, value));
                    }
                }
            }
            None => {
                self.live.remove(entry.key);
            }
        }
    }
}

/// What [`recover`] found besides the state.
struct Recovered {
    replay: Replay,
    /// The logical end: where the last intact frame ends and the next one goes.
    end: u64,
    /// The size of the file, at least `end`; the bytes in between are zeros.
    allocated: u64,
}

/// Reads and replays the log, truncating a torn tail. Leaves `file` at an unspecified
/// position.
fn recover(file: &mut File, path: &Path) -> Result<Recovered, BackendError> {
    let corrupt = |what: String| BackendError::Corrupt(format!("{}: {what}", path.display()));
    let len = file.metadata()?.len();
    let mut replay = Replay {
        live: HashMap::new(),
        max_rv: 0,
    };
    let mut reader = BufReader::with_capacity(1 << 20, &*file);
    let mut magic = [0; MAGIC.len()];
    if len < MAGIC.len() as u64 || reader.read_exact(&mut magic).is_err() || magic != MAGIC {
        return Err(corrupt(
            "not a kore write-ahead log (missing or unknown header)".into(),
        ));
    }
    let mut pos = MAGIC.len() as u64;
    let mut payload = Vec::new();
    let damaged_at = loop {
        let remaining = len - pos;
        if remaining == 0 {
            break None;
        }
        // A zero length word ends the log (frames are never empty), and everything after it
        // must be zero: the preallocated part of the file. Anything else there is damage.
        if remaining < FRAME_HEADER as u64 {
            break if rest_is_zero(&mut reader)? {
                None
            } else {
                Some(pos)
            };
        }
        let mut header = [0; FRAME_HEADER];
        reader.read_exact(&mut header)?;
        if header == [0; FRAME_HEADER] {
            break if rest_is_zero(&mut reader)? {
                None
            } else {
                Some(pos)
            };
        }
        let (plen, crc) = parse_header(&header);
        if plen < ENTRY_FIXED as u64 || plen > remaining - FRAME_HEADER as u64 {
            break Some(pos);
        }
        payload.resize(plen as usize, 0);
        reader.read_exact(&mut payload)?;
        if crc32(&payload) != crc {
            break Some(pos);
        }
        decode_payload(&payload, |entry| replay.apply(entry))
            .map_err(|e| corrupt(format!("the frame at byte {pos} is malformed: {e}")))?;
        pos += FRAME_HEADER as u64 + plen;
    };
    drop(reader);

    let Some(at) = damaged_at else {
        if len > pos {
            // A preallocated tail. It is written before frames go into it and synced then, but
            // after a kill it may still be only in the page cache: sync it before relying on it.
            file.sync_data()?;
        }
        return Ok(Recovered {
            replay,
            end: pos,
            allocated: len,
        });
    };
    file.seek(SeekFrom::Start(at))?;
    let mut rest = Vec::new();
    file.read_to_end(&mut rest)?;
    if let Some(next) = find_intact_frame(&rest[1..]) {
        return Err(corrupt(format!(
            "the frame at byte {at} is damaged but an intact frame follows at byte {}; \
             the log was damaged after it was written",
            at + 1 + next as u64
        )));
    }
    tracing::warn!(
        path = %path.display(),
        offset = at,
        dropped_bytes = len - at,
        "truncating the torn tail of the write-ahead log (a write that was never acknowledged)"
    );
    // The zeros after the damage go too; the committer preallocates again before its first
    // commit.
    file.set_len(at)?;
    file.sync_all()?;
    Ok(Recovered {
        replay,
        end: at,
        allocated: at,
    })
}

/// Whether everything `reader` has left is zero bytes. Consumes it.
fn rest_is_zero(reader: &mut impl BufRead) -> io::Result<bool> {
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(true);
        }
        if !is_zero(chunk) {
            return Ok(false);
        }
        let n = chunk.len();
        reader.consume(n);
    }
}

/// Whether every byte of `data` is zero, eight at a time.
fn is_zero(data: &[u8]) -> bool {
    let mut words = data.chunks_exact(8);
    words.all(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) == 0)
        && words.remainder().iter().all(|&b| b == 0)
}

fn parse_header(header: &[u8]) -> (u64, u32) {
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    (u64::from(len), crc)
}

/// The offset of the first intact frame (right length, decodable, matching CRC) in `data`.
///
/// Tries every offset, except inside runs of zeros: a frame's length word is never zero, so
/// the first offset worth trying after a zero length word is three bytes before the next
/// non-zero byte. Megabytes of preallocated zeros take one scan, not a check per offset, and
/// candidates that reach into the zeros at the end are decoded without walking them.
fn find_intact_frame(data: &[u8]) -> Option<usize> {
    let last = data.len().checked_sub(FRAME_HEADER + ENTRY_FIXED)?;
    let zeros_from = zero_tail(data);
    let mut at = 0;
    while at <= last {
        if data[at..at + 4] == [0; 4] {
            let nonzero = first_nonzero(&data[at + 4..])?;
            at += 4 + nonzero - 3;
            continue;
        }
        if is_intact_frame(&data[at..], zeros_from.saturating_sub(at + FRAME_HEADER)) {
            return Some(at);
        }
        at += 1;
    }
    None
}

/// Where the zeros at the end of `data` start (`data.len()` if it ends with another byte),
/// eight bytes per step.
fn zero_tail(data: &[u8]) -> usize {
    let mut end = data.len();
    for w in data.rchunks_exact(8) {
        if u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) != 0 {
            break;
        }
        end -= 8;
    }
    while end > 0 && data[end - 1] == 0 {
        end -= 1;
    }
    end
}

/// The index of the first non-zero byte of `data`, eight bytes per step over zeros.
fn first_nonzero(data: &[u8]) -> Option<usize> {
    let mut words = data.chunks_exact(8);
    let skipped = words
        .position(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) != 0)
        .unwrap_or(data.len() / 8);
    let from = skipped * 8;
    data[from..].iter().position(|&b| b != 0).map(|i| from + i)
}

/// Whether `data` starts with an intact frame, given that its payload is all zeros from
/// `zeros_from` on. The checks run cheapest first: the length, decoding (garbage usually
/// fails at its first field), then the CRC.
fn is_intact_frame(data: &[u8], zeros_from: usize) -> bool {
    let (plen, crc) = parse_header(&data[..FRAME_HEADER]);
    let body = &data[FRAME_HEADER..];
    if plen < ENTRY_FIXED as u64 || plen > body.len() as u64 {
        return false;
    }
    let payload = &body[..plen as usize];
    payload_decodes(payload, zeros_from) && crc32(payload) == crc
}

/// CRC-32/IEEE lookup tables for slicing-by-8: `CRC_TABLES[0]` is the classic byte table,
/// `CRC_TABLES[k][b]` is the CRC of byte `b` followed by `k` zero bytes.
const CRC_TABLES: [[u32; 256]; 8] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 8 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev >> 8) ^ tables[0][(prev & 0xFF) as usize];
            k += 1;
        }
        i += 1;
    }
    tables
}

/// CRC-32/IEEE (the zlib and Ethernet CRC) of `data`, eight bytes per step.
fn crc32(data: &[u8]) -> u32 {
    let t = &CRC_TABLES;
    let mut crc = !0u32;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) ^ crc;
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xFF) as usize]
            ^ t[6][((lo >> 8) & 0xFF) as usize]
            ^ t[5][((lo >> 16) & 0xFF) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xFF) as usize]
            ^ t[2][((hi >> 8) & 0xFF) as usize]
            ^ t[1][((hi >> 16) & 0xFF) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &byte in chunks.remainder() {
        crc = (crc >> 8) ^ t[0][((crc ^ u32::from(byte)) & 0xFF) as usize];
    }
    !crc
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::mpsc;
    use std::sync::{Barrier, Mutex};
    use std::time::Duration;

    use super::*;

    /// How long any single wait may take before the test fails instead of hanging.
    const TIMEOUT: Duration = Duration::from_secs(30);

    type State = BTreeMap<String, (u64, Vec<u8>)>;

    fn put(key: &str, rv: u64, value: &str) -> Record {
        Record {
            key: Arc::from(key),
            rv,
            value: Some(Bytes::copy_from_slice(value.as_bytes())),
        }
    }

    fn del(key: &str, rv: u64) -> Record {
        Record {
            key: Arc::from(key),
            rv,
            value: None,
        }
    }

    /// A callback that reports its result on a channel.
    fn durable() -> (Durable, mpsc::Receiver<Result<(), BackendError>>) {
        let (tx, rx) = mpsc::channel();
        let done: Durable = Box::new(move |result| {
            let _ = tx.send(result);
        });
        (done, rx)
    }

    fn wait(rx: &mpsc::Receiver<Result<(), BackendError>>) -> Result<(), BackendError> {
        rx.recv_timeout(TIMEOUT).expect("the callback ran in time")
    }

    fn submit(wal: &WalBackend, records: Vec<Record>) -> Result<(), BackendError> {
        let (done, rx) = durable();
        wal.submit(records, done);
        wait(&rx)
    }

    fn compact(wal: &WalBackend, live: Vec<Record>, rv: u64) -> Result<(), BackendError> {
        let (done, rx) = durable();
        wal.compact(live, rv, done);
        wait(&rx)
    }

    fn state(loaded: &Loaded) -> State {
        let mut state = State::new();
        for record in &loaded.records {
            let value = record.value.clone().expect("loaded records are live");
            let previous = state.insert(record.key.to_string(), (record.rv, value.to_vec()));
            assert!(previous.is_none(), "{} loaded twice", record.key);
        }
        state
    }

    fn reopen(dir: &Path) -> Result<Loaded, BackendError> {
        WalBackend::open(dir)?.load()
    }

    /// Applies records to a model of the live state.
    fn apply(model: &mut State, records: &[Record]) {
        for record in records {
            match &record.value {
                Some(value) => {
                    model.insert(record.key.to_string(), (record.rv, value.to_vec()));
                }
                None => {
                    model.remove(&*record.key);
                }
            }
        }
    }

    fn live(model: &State) -> Vec<Record> {
        model
            .iter()
            .map(|(key, (rv, value))| Record {
                key: Arc::from(key.as_str()),
                rv: *rv,
                value: Some(Bytes::copy_from_slice(value)),
            })
            .collect()
    }

    /// The byte offsets at which the frames of a log start.
    fn frames(bytes: &[u8]) -> Vec<usize> {
        let mut at = MAGIC.len();
        let mut starts = Vec::new();
        while at < bytes.len() {
            let (len, _) = parse_header(&bytes[at..at + FRAME_HEADER]);
            if len == 0 {
                assert!(is_zero(&bytes[at..]), "only zeros follow the last frame");
                break;
            }
            starts.push(at);
            at += FRAME_HEADER + len as usize;
        }
        assert!(at <= bytes.len(), "the log ends at a frame boundary");
        starts
    }

    /// The logical part of a log file: up to the end of its last frame, without the
    /// preallocated zeros.
    fn logical(bytes: &[u8]) -> &[u8] {
        let end = match frames(bytes).last() {
            Some(&last) => last + FRAME_HEADER + parse_header(&bytes[last..]).0 as usize,
            None => MAGIC.len(),
        };
        &bytes[..end]
    }

    /// Writes `bytes` as the log of a fresh directory.
    fn log_dir(bytes: &[u8]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(LOG_FILE), bytes).expect("write log");
        dir
    }

    /// A log of three commits: `a`,`b` put; `b` deleted, `c` put; `a` overwritten.
    fn three_commits() -> (tempfile::TempDir, Vec<u8>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        submit(&wal, vec![put("a", 1, "one"), put("b", 2, "two")]).expect("commit 1");
        submit(&wal, vec![del("b", 3), put("c", 4, "four")]).expect("commit 2");
        submit(&wal, vec![put("a", 5, "five")]).expect("commit 3");
        drop(wal);
        let bytes = fs::read(dir.path().join(LOG_FILE)).expect("read log");
        // Without the preallocated zeros: the tests below cut and damage the frames.
        let bytes = logical(&bytes).to_vec();
        (dir, bytes)
    }

    fn after_two_commits() -> State {
        let mut model = State::new();
        apply(
            &mut model,
            &[
                put("a", 1, "one"),
                put("b", 2, "two"),
                del("b", 3),
                put("c", 4, "four"),
            ],
        );
        model
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        // Slicing-by-8 agrees with the plain byte-at-a-time table for every tail length.
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + i / 3) as u8).collect();
        for len in 0..data.len() {
            let mut crc = !0u32;
            for &byte in &data[..len] {
                crc = (crc >> 8) ^ CRC_TABLES[0][((crc ^ u32::from(byte)) & 0xFF) as usize];
            }
            assert_eq!(crc32(&data[..len]), !crc, "length {len}");
        }
    }

    #[test]
    fn puts_and_deletes_survive_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        let loaded = wal.load().expect("load");
        assert!(loaded.records.is_empty());
        assert_eq!(loaded.max_rv, 0);
        submit(&wal, vec![put("/a", 1, "{\"a\":1}"), put("/b", 2, "{}")]).expect("submit");
        submit(&wal, vec![put("/a", 3, "{\"a\":3}")]).expect("submit");
        submit(&wal, vec![del("/b", 4), put("/c", 5, "")]).expect("submit");
        drop(wal);

        let loaded = reopen(dir.path()).expect("reopen");
        let expected = State::from([
            ("/a".to_string(), (3, b"{\"a\":3}".to_vec())),
            ("/c".to_string(), (5, Vec::new())),
        ]);
        assert_eq!(state(&loaded), expected);
        assert_eq!(loaded.max_rv, 5);
    }

    #[test]
    fn the_clock_continues_after_trailing_deletes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        submit(&wal, vec![put("a", 1, "x"), put("b", 2, "y")]).expect("submit");
        submit(&wal, vec![del("b", 3)]).expect("submit");
        submit(&wal, vec![del("a", 4)]).expect("submit");
        drop(wal);
        let loaded = reopen(dir.path()).expect("reopen");
        assert!(loaded.records.is_empty());
        assert_eq!(loaded.max_rv, 4);

        // A snapshot header keeps the clock even when no record carries its revision.
        let wal = WalBackend::open(dir.path()).expect("open");
        compact(&wal, Vec::new(), 9).expect("compact");
        drop(wal);
        assert_eq!(reopen(dir.path()).expect("reopen").max_rv, 9);
    }

    #[test]
    fn load_hands_over_the_state_only_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        wal.load().expect("first load");
        assert!(matches!(wal.load(), Err(BackendError::Io(_))));
    }

    #[test]
    fn a_torn_final_commit_is_cut_off_at_every_byte() {
        let (_dir, bytes) = three_commits();
        let last = *frames(&bytes).last().expect("frames");
        for cut in last..bytes.len() {
            let dir = log_dir(&bytes[..cut]);
            let wal = WalBackend::open(dir.path())
                .unwrap_or_else(|e| panic!("cut at {cut} of {}: {e}", bytes.len()));
            let loaded = wal.load().expect("load");
            assert_eq!(state(&loaded), after_two_commits(), "cut at {cut}");
            assert_eq!(loaded.max_rv, 4);
            // The torn bytes are gone, so the log continues cleanly after them.
            submit(&wal, vec![put("d", 5, "after")]).expect("submit after recovery");
            drop(wal);
            let loaded = reopen(dir.path()).expect("reopen");
            assert_eq!(loaded.max_rv, 5, "cut at {cut}");
            assert_eq!(state(&loaded).len(), 3, "cut at {cut}");
        }
    }

    #[test]
    fn a_final_commit_whose_pages_never_reached_the_disk_is_cut_off() {
        // Power loss: the file grew, but some of the last write reads back as zeros.
        let (_dir, bytes) = three_commits();
        let last = *frames(&bytes).last().expect("frames");
        for zeros in [last..bytes.len(), last..last + 4, last + 8..bytes.len()] {
            let mut damaged = bytes.clone();
            damaged[zeros.clone()].fill(0);
            let dir = log_dir(&damaged);
            let wal = WalBackend::open(dir.path()).expect("recovered");
            let loaded = wal.load().expect("load");
            assert_eq!(state(&loaded), after_two_commits(), "zeros at {zeros:?}");
            // The log continues where the last intact frame ends.
            assert_eq!(wal.shared.log_bytes.load(Ordering::SeqCst), last as u64);
            drop(wal);
            let len = fs::metadata(dir.path().join(LOG_FILE)).expect("stat").len();
            if zeros == (last..bytes.len()) {
                // A frame that is all zeros cannot be told from preallocated space: it is the
                // end of the log, and kept as preallocation.
                assert_eq!(len, bytes.len() as u64, "zeros at {zeros:?}");
            } else {
                // Part zeros, part data: a torn tail, cut off.
                assert_eq!(len, last as u64, "zeros at {zeros:?}");
            }
        }
    }

    #[test]
    fn a_damaged_byte_before_an_intact_commit_is_corruption() {
        let (_dir, bytes) = three_commits();
        let starts = frames(&bytes);
        for at in starts[1]..starts[2] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            let dir = log_dir(&damaged);
            match reopen(dir.path()) {
                Err(BackendError::Corrupt(message)) => {
                    assert!(message.contains("intact frame follows"), "{message}");
                }
                other => panic!("flipping byte {at} gave {other:?}"),
            }
            // Nothing was truncated: the damage is left for a human to look at.
            assert_eq!(fs::read(dir.path().join(LOG_FILE)).expect("read"), damaged);
        }
    }

    /// A tail of preallocated zeros as large as a preallocation step can get, and then some.
    const BIG_TAIL: usize = 4 * PREALLOC_MAX as usize;

    /// The frames of `three_commits`, with `zeros` zero bytes after them.
    fn with_zero_tail(bytes: &[u8], zeros: usize) -> Vec<u8> {
        let mut out = bytes.to_vec();
        out.resize(bytes.len() + zeros, 0);
        out
    }

    fn after_three_commits() -> State {
        let mut model = after_two_commits();
        apply(&mut model, &[put("a", 5, "five")]);
        model
    }

    #[test]
    fn a_preallocated_log_with_a_large_zero_tail_reopens_fast_and_keeps_its_tail() {
        let (_dir, bytes) = three_commits();
        let image = with_zero_tail(&bytes, BIG_TAIL);
        let dir = log_dir(&image);
        let started = Instant::now();
        let wal = WalBackend::open(dir.path()).expect("open");
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(3), "reopen took {elapsed:?}");
        let loaded = wal.load().expect("load");
        assert_eq!(state(&loaded), after_three_commits());
        assert_eq!(loaded.max_rv, 5);
        assert_eq!(
            wal.shared.log_bytes.load(Ordering::SeqCst),
            bytes.len() as u64
        );
        // The next commit goes over the zeros, right after the last frame: no growth.
        submit(&wal, vec![put("d", 6, "after")]).expect("submit");
        drop(wal);
        let file = fs::read(dir.path().join(LOG_FILE)).expect("read");
        assert_eq!(file.len(), image.len(), "the preallocated tail is kept");
        assert_eq!(frames(&file).len(), frames(&bytes).len() + 1);
        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(loaded.max_rv, 6);
        assert_eq!(state(&loaded).len(), 3);
    }

    #[test]
    fn a_torn_frame_followed_by_zeros_is_a_torn_tail() {
        // A crash while the last commit was written over preallocated zeros: a prefix of the
        // frame, or the frame with some of its bytes still zero, then the zeros.
        let (_dir, bytes) = three_commits();
        let last = *frames(&bytes).last().expect("frames");
        let mut images = Vec::new();
        for cut in [last + 1, last + 4, last + 8, last + 12, bytes.len() - 1] {
            images.push((
                format!("cut at {cut}"),
                with_zero_tail(&bytes[..cut], BIG_TAIL),
            ));
        }
        for zeros in [last..last + 4, last..last + 8, last + 8..last + 12] {
            let mut image = with_zero_tail(&bytes, BIG_TAIL);
            image[zeros.clone()].fill(0);
            images.push((format!("zeros at {zeros:?}"), image));
        }
        for (what, image) in images {
            let dir = log_dir(&image);
            let started = Instant::now();
            let wal = WalBackend::open(dir.path()).unwrap_or_else(|e| panic!("{what}: {e}"));
            let elapsed = started.elapsed();
            assert!(elapsed < Duration::from_secs(3), "{what}: took {elapsed:?}");
            let loaded = wal.load().expect("load");
            assert_eq!(state(&loaded), after_two_commits(), "{what}");
            assert_eq!(loaded.max_rv, 4, "{what}");
            assert_eq!(
                wal.shared.log_bytes.load(Ordering::SeqCst),
                last as u64,
                "{what}"
            );
            // Cut off at the damage, zeros included; the next commit preallocates again.
            let len = fs::metadata(dir.path().join(LOG_FILE)).expect("stat").len();
            assert_eq!(len, last as u64, "{what}");
            submit(&wal, vec![put("d", 5, "after")]).expect("submit after recovery");
            drop(wal);
            let file = fs::read(dir.path().join(LOG_FILE)).expect("read");
            assert!(
                file.len() > logical(&file).len(),
                "{what}: preallocated again"
            );
            let loaded = reopen(dir.path()).expect("reopen");
            assert_eq!(loaded.max_rv, 5, "{what}");
            assert_eq!(state(&loaded).len(), 3, "{what}");
        }
    }

    #[test]
    fn a_damaged_frame_then_zeros_then_an_intact_frame_is_corruption() {
        let (_dir, bytes) = three_commits();
        let starts = frames(&bytes);
        let (second, third) = (starts[1], starts[2]);
        // Zeros between the damaged frame and the intact one, of every alignment, and many.
        for gap in (0..=17).chain([BIG_TAIL + 5]) {
            for damage in ["flipped", "zeroed"] {
                let mut image = bytes[..third].to_vec();
                if damage == "flipped" {
                    image[second + FRAME_HEADER + 3] ^= 0x40;
                } else {
                    // All zeros looks like the end of the log, but data follows it.
                    image[second..].fill(0);
                }
                image.resize(third + gap, 0);
                image.extend_from_slice(&bytes[third..]);
                let image = with_zero_tail(&image, BIG_TAIL);
                let dir = log_dir(&image);
                let started = Instant::now();
                match reopen(dir.path()) {
                    Err(BackendError::Corrupt(message)) => {
                        assert!(message.contains("intact frame follows"), "{message}");
                        let at = format!("at byte {}", third + gap);
                        assert!(message.contains(&at), "{message}");
                    }
                    other => panic!("{damage}, {gap} zeros: {other:?}"),
                }
                let elapsed = started.elapsed();
                assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
                assert_eq!(fs::read(dir.path().join(LOG_FILE)).expect("read"), image);
            }
        }
    }

    #[test]
    fn garbage_after_the_preallocated_zeros_is_cut_off() {
        // The logical end, zeros, then bytes that are no frame (a torn write past the
        // preallocation cannot happen, but bit rot can): dropped, the frames kept.
        let (_dir, bytes) = three_commits();
        let mut image = with_zero_tail(&bytes, 5000);
        image.extend_from_slice(b"not a frame at all");
        image.resize(image.len() + 3000, 0);
        let dir = log_dir(&image);
        let loaded = reopen(dir.path()).expect("recovered");
        assert_eq!(state(&loaded), after_three_commits());
        let len = fs::metadata(dir.path().join(LOG_FILE)).expect("stat").len();
        assert_eq!(len, bytes.len() as u64);
    }

    #[test]
    fn frames_are_written_only_over_synced_preallocated_zeros() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(LOG_FILE);
        let wal = WalBackend::open(dir.path()).expect("open");
        // A new log comes preallocated.
        let file = fs::read(&path).expect("read");
        let start = logical(&file).len() as u64;
        assert_eq!(file.len() as u64, prealloc_target(start, start));
        let mut rv = 0;
        let mut model = State::new();
        // Small commits cross the low-water mark; some commits are larger than a whole step,
        // so they have to preallocate before they are written.
        let sizes = [
            100,
            2000,
            30_000,
            200_000,
            700_000,
            2 << 20,
            100,
            9 << 20,
            100,
        ];
        for size in sizes.into_iter().chain([20_000; 300]) {
            rv += 1;
            let records = vec![put(&format!("k{rv}"), rv, &"v".repeat(size))];
            apply(&mut model, &records);
            // In debug builds, `write_and_sync` asserts that the frame fits in the synced
            // preallocation: a frame written past it would poison the backend here.
            submit(&wal, records).expect("submit");
            let logical_end = wal.shared.log_bytes.load(Ordering::SeqCst);
            let len = fs::metadata(&path).expect("stat").len();
            // The frames end on synced zeros, at least a zero frame header of them.
            assert!(
                len >= logical_end + FRAME_HEADER as u64,
                "{len} < {logical_end} + header"
            );
            assert_eq!(len % PREALLOC_ALIGN, 0);
        }
        let extensions = wal.shared.extensions.load(Ordering::SeqCst);
        assert!(extensions >= 4, "{extensions} preallocations");
        let logical_end = wal.shared.log_bytes.load(Ordering::SeqCst);
        drop(wal);
        // After the last commit the committer preallocated ahead.
        let file = fs::read(&path).expect("read");
        assert_eq!(logical(&file).len() as u64, logical_end);
        let ahead = file.len() as u64 - logical_end;
        assert!(
            ahead >= prealloc_step(logical_end) / PREALLOC_LOW,
            "{ahead} bytes preallocated ahead"
        );
        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(state(&loaded), model);
    }

    #[test]
    fn a_compacted_log_is_preallocated_and_reopens() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(LOG_FILE);
        let wal = WalBackend::open(dir.path()).expect("open");
        let mut model = State::new();
        let value = "c".repeat(1000);
        for rv in 1..=3000 {
            let records = vec![put(&format!("k{}", rv % 1500), rv, &value)];
            apply(&mut model, &records);
            submit(&wal, records).expect("submit");
        }
        compact(&wal, live(&model), 3000).expect("compact");
        let file = fs::read(&path).expect("read");
        let end = logical(&file).len() as u64;
        assert!(end > PREALLOC_MIN, "a snapshot of {end} bytes");
        assert_eq!(wal.shared.log_bytes.load(Ordering::SeqCst), end);
        assert_eq!(file.len() as u64, prealloc_target(end, end));
        assert!(file.len() as u64 >= end + prealloc_step(end));
        // Commits after it go over its zeros, right after the snapshot.
        apply(&mut model, &[put("after", 3001, "x")]);
        submit(&wal, vec![put("after", 3001, "x")]).expect("submit");
        drop(wal);
        let file = fs::read(&path).expect("read");
        assert_eq!(file.len() as u64, prealloc_target(end, end));
        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(state(&loaded), model);
        assert_eq!(loaded.max_rv, 3001);
    }

    #[test]
    fn the_intact_frame_search_skips_zeros_exactly_as_decoding_would_walk_them() {
        let mut entry = Vec::new();
        encode_record(&mut entry, &put("k", 7, "value"));
        let mut deletion = Vec::new();
        encode_record(&mut deletion, &del("key", 8));
        for zeros in 0..3 * ZERO_ENTRY + 2 {
            let run = vec![0; zeros];
            let payloads = [
                [&entry[..], &run, &deletion].concat(),
                [&entry[..], &run].concat(),
                [&run[..], &deletion].concat(),
                [&run[..], &entry, &run, &deletion].concat(),
            ];
            for payload in payloads {
                let decodes = decode_payload(&payload, |_| {}).is_ok();
                for zeros_from in [zero_tail(&payload), payload.len()] {
                    assert_eq!(
                        payload_decodes(&payload, zeros_from),
                        decodes,
                        "{payload:?} with zeros from {zeros_from}"
                    );
                }
            }
        }
        assert_eq!(zero_tail(&[0; 20]), 0);
        assert_eq!(zero_tail(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 1);
        assert_eq!(zero_tail(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 2]), 10);
        assert_eq!(first_nonzero(&[0; 20]), None);
        assert_eq!(first_nonzero(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0]), Some(9));
    }

    #[test]
    fn a_file_that_is_not_a_log_is_corruption() {
        let (_dir, bytes) = three_commits();
        let mut wrong_magic = bytes.clone();
        wrong_magic[7] = 2;
        for content in [&wrong_magic[..], &[][..], &bytes[..5]] {
            let dir = log_dir(content);
            assert!(
                matches!(reopen(dir.path()), Err(BackendError::Corrupt(_))),
                "{content:?}"
            );
        }
    }

    #[test]
    fn compaction_keeps_the_state_and_shrinks_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        let mut model = State::new();
        let mut rv = 0;
        for round in 0..50 {
            let mut records = Vec::new();
            for key in 0..10 {
                rv += 1;
                let value = format!(
                    "{{\"key\":{key},\"round\":{round},\"pad\":\"{}\"}}",
                    "x".repeat(100)
                );
                records.push(put(&format!("/k/{key}"), rv, &value));
            }
            rv += 1;
            records.push(del(&format!("/k/{}", round % 10), rv));
            apply(&mut model, &records);
            submit(&wal, records).expect("submit");
        }
        let path = dir.path().join(LOG_FILE);
        // Logical sizes: the preallocated zeros after the last frame do not count.
        let before = logical(&fs::read(&path).expect("read")).len() as u64;
        assert_eq!(wal.shared.log_bytes.load(Ordering::SeqCst), before);
        compact(&wal, live(&model), rv).expect("compact");
        let file = fs::read(&path).expect("read");
        let after = logical(&file).len() as u64;
        assert!(after * 10 < before, "{after} vs {before}");
        assert_eq!(wal.shared.log_bytes.load(Ordering::SeqCst), after);
        // The new log comes preallocated (`logical` checked that the rest is zeros).
        assert_eq!(file.len() as u64, prealloc_target(after, after));
        drop(wal);

        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(state(&loaded), model);
        assert_eq!(loaded.max_rv, rv);
    }

    #[test]
    fn large_commits_and_snapshots_are_split_into_frames() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        wal.set_round_bytes(1000);
        let mut model = State::new();
        let mut acks = Vec::new();
        for rv in 1..=60 {
            let records = vec![put(&format!("k{}", rv % 20), rv, &"v".repeat(100))];
            apply(&mut model, &records);
            let (done, rx) = durable();
            wal.submit(records, done);
            acks.push(rx);
        }
        // One submission larger than a round still goes in one frame: submissions are atomic.
        let big: Vec<Record> = (61..=80)
            .map(|rv| put(&format!("big{rv}"), rv, &"b".repeat(200)))
            .collect();
        apply(&mut model, &big);
        let (done, rx) = durable();
        wal.submit(big, done);
        acks.push(rx);
        for rx in &acks {
            wait(rx).expect("durable");
        }
        let path = dir.path().join(LOG_FILE);
        let log = fs::read(&path).expect("read");
        let log = logical(&log);
        let starts = frames(log);
        assert!(
            starts.len() > 8,
            "60 small submissions of 1000-byte rounds: many frames"
        );
        let last = *starts.last().expect("frames");
        assert!(
            log.len() - last > 20 * 200,
            "the large submission is the last frame, whole"
        );

        compact(&wal, live(&model), 80).expect("compact");
        let snapshot = fs::read(&path).expect("read");
        assert!(
            frames(&snapshot).len() >= 4,
            "the snapshot spans several frames"
        );
        drop(wal);
        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(state(&loaded), model);
        assert_eq!(loaded.max_rv, 80);
    }

    #[test]
    fn writes_submitted_around_a_compaction_survive_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        let order = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let callback = |label: u64| -> Durable {
            let order = order.clone();
            let tx = tx.clone();
            Box::new(move |result| {
                lock(&order).push(label);
                let _ = tx.send(result);
            })
        };
        let mut model = State::new();
        let mut rv = 0;
        let mut jobs = 0;
        for _ in 0..3 {
            for _ in 0..100 {
                rv += 1;
                let records = vec![put(&format!("k{}", rv % 37), rv, &format!("v{rv}"))];
                apply(&mut model, &records);
                wal.submit(records, callback(rv));
                jobs += 1;
            }
            // Nothing waits: the compaction queues behind the writes above, and the next
            // writes queue behind it.
            wal.compact(live(&model), rv, callback(rv));
            jobs += 1;
        }
        for _ in 0..jobs {
            rx.recv_timeout(TIMEOUT)
                .expect("callback")
                .expect("durable");
        }
        let order = lock(&order).clone();
        let expected: Vec<u64> = (1..=rv)
            .flat_map(|rv| {
                if rv % 100 == 0 {
                    vec![rv, rv]
                } else {
                    vec![rv]
                }
            })
            .collect();
        assert_eq!(order, expected);
        drop(wal);
        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(state(&loaded), model);
        assert_eq!(loaded.max_rv, rv);
    }

    #[test]
    fn needs_compaction_follows_the_live_data() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        wal.set_compaction_floor(4096);
        let value = "v".repeat(200);
        let mut rv = 0;
        for key in 0..40 {
            rv += 1;
            submit(&wal, vec![put(&format!("k{key}"), rv, &value)]).expect("submit");
        }
        assert!(
            !wal.needs_compaction(),
            "new keys only: the log is all live data"
        );
        for _ in 0..150 {
            rv += 1;
            submit(&wal, vec![put("k0", rv, &value)]).expect("submit");
        }
        assert!(
            wal.needs_compaction(),
            "overwrites make the log mostly garbage"
        );

        // While a compaction is queued, it is not asked for again.
        let mut model = State::new();
        for key in 0..40 {
            model.insert(format!("k{key}"), (key + 1, value.clone().into_bytes()));
        }
        model.insert("k0".into(), (rv, value.clone().into_bytes()));
        let (done, rx) = durable();
        wal.compact(live(&model), rv, done);
        assert!(!wal.needs_compaction());
        wait(&rx).expect("compact");
        assert!(!wal.needs_compaction());

        // Deleting most keys leaves a log mostly of dead records.
        for key in 1..40 {
            rv += 1;
            submit(&wal, vec![del(&format!("k{key}"), rv)]).expect("submit");
        }
        assert!(wal.needs_compaction());
    }

    #[test]
    fn concurrent_writers_share_fsyncs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
        let writers = 16;
        let per_writer = 63;
        let next_rv = Arc::new(Mutex::new(0u64));
        let start = Arc::new(Barrier::new(writers));
        let threads: Vec<_> = (0..writers)
            .map(|writer| {
                let (wal, next_rv, start) = (wal.clone(), next_rv.clone(), start.clone());
                thread::spawn(move || {
                    start.wait();
                    let mut acks = Vec::new();
                    for i in 0..per_writer {
                        let (done, rx) = durable();
                        // Like the store: revisions are taken and submitted under one lock.
                        let mut rv = lock(&next_rv);
                        *rv += 1;
                        wal.submit(vec![put(&format!("w{writer}/{i}"), *rv, "{}")], done);
                        drop(rv);
                        acks.push(rx);
                    }
                    for rx in acks {
                        wait(&rx).expect("durable");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("writer");
        }
        let total = (writers * per_writer) as u64;
        let syncs = wal.syncs();
        assert!(syncs * 4 < total, "{syncs} fsyncs for {total} submissions");
        drop(wal);
        assert_eq!(
            reopen(dir.path()).expect("reopen").records.len(),
            total as usize
        );
    }

    #[test]
    fn callbacks_run_in_submission_order_across_threads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
        let next_rv = Arc::new(Mutex::new(0u64));
        let order = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..8)
            .map(|writer| {
                let (wal, next_rv, order) = (wal.clone(), next_rv.clone(), order.clone());
                thread::spawn(move || {
                    let mut acks = Vec::new();
                    for i in 0..50 {
                        let (tx, rx) = mpsc::channel();
                        let order = order.clone();
                        let mut rv = lock(&next_rv);
                        *rv += 1;
                        let this = *rv;
                        wal.submit(
                            vec![put(&format!("w{writer}/{i}"), this, "{}")],
                            Box::new(move |result| {
                                lock(&order).push(this);
                                let _ = tx.send(result);
                            }),
                        );
                        drop(rv);
                        // Every few writes, wait, so commits of many sizes happen.
                        if i % 7 == 0 {
                            wait(&rx).expect("durable");
                        } else {
                            acks.push(rx);
                        }
                    }
                    for rx in acks {
                        wait(&rx).expect("durable");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("writer");
        }
        let order = lock(&order).clone();
        assert_eq!(order, (1..=400).collect::<Vec<u64>>());
    }

    #[test]
    fn a_failed_write_poisons_the_backend() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        wal.set_compaction_floor(0);
        submit(&wal, vec![put("a", 1, "kept")]).expect("first write");
        wal.fail_next_commit();
        assert!(matches!(
            submit(&wal, vec![put("b", 2, "lost")]),
            Err(BackendError::Io(_))
        ));
        assert!(matches!(
            submit(&wal, vec![put("c", 3, "refused")]),
            Err(BackendError::Poisoned)
        ));
        assert!(matches!(
            compact(&wal, Vec::new(), 3),
            Err(BackendError::Poisoned)
        ));
        assert!(!wal.needs_compaction());
        drop(wal);
        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(
            state(&loaded),
            State::from([("a".into(), (1, b"kept".to_vec()))])
        );
    }

    #[test]
    fn a_second_open_of_the_same_directory_fails_clearly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = WalBackend::open(dir.path()).expect("open");
        match WalBackend::open(dir.path()) {
            Err(BackendError::Io(e)) => {
                let message = e.to_string();
                assert!(message.contains("already in use"), "{message}");
                assert!(
                    message.contains(&std::process::id().to_string()),
                    "{message}"
                );
            }
            other => panic!("second open gave {other:?}"),
        }
        drop(first);
        WalBackend::open(dir.path()).expect("open after the first closed");
    }

    #[test]
    fn acknowledged_writes_survive_a_crash_at_any_moment() {
        // What a crash leaves on disk: everything synced, then any part of the commit in flight,
        // possibly with garbage or zeros where its pages did not make it. Writers run; at
        // random moments we take what was acknowledged, the synced length, and the file, and
        // build such crash images from them. Every acknowledged write must survive, and what
        // survives must be a prefix of the submissions.
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
        let next_rv = Arc::new(Mutex::new(0u64));
        let acked = Arc::new(Mutex::new(BTreeSet::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let (wal, next_rv, acked, stop) =
                    (wal.clone(), next_rv.clone(), acked.clone(), stop.clone());
                thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let (done, rx) = durable();
                        let mut rv = lock(&next_rv);
                        *rv += 1;
                        let this = *rv;
                        let value = format!("{{\"rv\":{this},\"pad\":\"{}\"}}", "p".repeat(300));
                        wal.submit(vec![put(&format!("k{this}"), this, &value)], done);
                        drop(rv);
                        wait(&rx).expect("durable");
                        lock(&acked).insert(this);
                    }
                })
            })
            .collect();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut random = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..10 {
            thread::sleep(Duration::from_millis(10));
            let acked_before = lock(&acked).clone();
            // Published after the fsync and before the callbacks, so it covers `acked_before`.
            let synced = wal.shared.log_bytes.load(Ordering::SeqCst) as usize;
            let file = fs::read(dir.path().join(LOG_FILE)).expect("copy");
            assert!(file.len() >= synced);
            let cut = synced + random(file.len() - synced + 1);
            let mut garbage = file[..cut].to_vec();
            garbage.extend((0..random(600)).map(|_| random(256) as u8));
            let mut zeros = file[..cut].to_vec();
            zeros.resize(cut + random(600), 0);
            for image in [file.clone(), file[..cut].to_vec(), garbage, zeros] {
                let crashed = log_dir(&image);
                let loaded = reopen(crashed.path()).expect("recovered");
                let present: BTreeSet<u64> = loaded.records.iter().map(|r| r.rv).collect();
                assert!(
                    present.is_superset(&acked_before),
                    "an acknowledged write was lost"
                );
                let prefix: BTreeSet<u64> = (1..=loaded.max_rv).collect();
                assert_eq!(
                    present, prefix,
                    "what survived is a prefix of the submissions"
                );
            }
        }
        stop.store(true, Ordering::SeqCst);
        for writer in writers {
            writer.join().expect("writer");
        }
    }

    #[test]
    fn dropping_the_backend_finishes_queued_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        let (tx, rx) = mpsc::channel();
        for rv in 1..=300 {
            let tx = tx.clone();
            wal.submit(
                vec![put(&format!("k{rv}"), rv, "v")],
                Box::new(move |result| {
                    let _ = tx.send(result);
                }),
            );
        }
        drop(wal);
        drop(tx);
        let results: Vec<_> = rx.iter().collect();
        assert_eq!(results.len(), 300);
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(reopen(dir.path()).expect("reopen").records.len(), 300);
    }

    #[test]
    fn an_unfinished_compaction_is_discarded_at_open() {
        let (dir, _) = three_commits();
        let tmp = dir.path().join(TMP_FILE);
        fs::write(&tmp, b"KOREWAL\x01half a snapshot").expect("write tmp");
        let loaded = reopen(dir.path()).expect("reopen");
        assert_eq!(state(&loaded).len(), 2);
        assert_eq!(loaded.max_rv, 5);
        assert!(!tmp.exists());
    }

    #[test]
    fn an_empty_submission_is_acknowledged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        submit(&wal, Vec::new()).expect("empty submit");
        submit(&wal, vec![put("a", 1, "x")]).expect("submit");
        drop(wal);
        assert_eq!(reopen(dir.path()).expect("reopen").records.len(), 1);
    }

    #[test]
    fn a_panicking_callback_does_not_stop_later_commits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = WalBackend::open(dir.path()).expect("open");
        wal.submit(vec![put("a", 1, "x")], Box::new(|_| panic!("callback bug")));
        submit(&wal, vec![put("b", 2, "y")]).expect("later submit");
        drop(wal);
        assert_eq!(reopen(dir.path()).expect("reopen").records.len(), 2);
    }

    #[test]
    fn dropping_the_last_handle_inside_a_callback_does_not_join_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (done_tx, done_rx) = mpsc::channel();
        let handle = wal.clone();
        wal.submit(
            vec![put("a", 1, "x")],
            Box::new(move |result| {
                let _ = release_rx.recv_timeout(TIMEOUT);
                // The last reference, dropped on the committer thread: it cannot join itself.
                let clean = panic::catch_unwind(AssertUnwindSafe(move || drop(handle))).is_ok();
                let _ = done_tx.send((result, clean));
            }),
        );
        drop(wal);
        release_tx.send(()).expect("release");
        let (result, clean) = done_rx.recv_timeout(TIMEOUT).expect("callback");
        result.expect("durable");
        assert!(
            clean,
            "dropping the backend on its committer thread panicked"
        );
        // The committer exits by itself and releases the directory.
        let deadline = Instant::now() + TIMEOUT;
        let reopened = loop {
            match WalBackend::open(dir.path()) {
                Ok(wal) => break wal,
                Err(e) if Instant::now() > deadline => panic!("still locked: {e}"),
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        };
        assert_eq!(reopened.load().expect("load").records.len(), 1);
    }

    #[test]
    fn random_writes_compactions_and_reopens_match_a_model() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut random = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut model = State::new();
        let mut rv = 0;
        for session in 0..6 {
            let wal = WalBackend::open(dir.path()).expect("open");
            let loaded = wal.load().expect("load");
            assert_eq!(state(&loaded), model, "session {session}");
            assert_eq!(loaded.max_rv, rv, "session {session}");
            let mut acks = Vec::new();
            for _ in 0..40 {
                let mut records = Vec::new();
                for _ in 0..=random(4) {
                    rv += 1;
                    let key = format!("/k/{}", random(25));
                    if random(3) == 0 {
                        records.push(del(&key, rv));
                    } else {
                        let value = "z".repeat(random(500) as usize);
                        records.push(put(&key, rv, &value));
                    }
                }
                apply(&mut model, &records);
                let (done, rx) = durable();
                wal.submit(records, done);
                acks.push(rx);
                if random(15) == 0 {
                    let (done, rx) = durable();
                    wal.compact(live(&model), rv, done);
                    acks.push(rx);
                }
            }
            for rx in &acks {
                wait(rx).expect("durable");
            }
        }
    }

    /// Not a test: measures commit throughput on this disk. Run with
    /// `cargo test --release -- --ignored --nocapture throughput`.
    #[test]
    #[ignore = "a benchmark"]
    fn throughput_with_concurrent_writers_is_reported() {
        for writers in [1usize, 16, 64] {
            let dir = tempfile::tempdir().expect("tempdir");
            let wal = Arc::new(WalBackend::open(dir.path()).expect("open"));
            let next_rv = Arc::new(Mutex::new(0u64));
            let stop = Arc::new(AtomicBool::new(false));
            let value = Bytes::from(vec![b'x'; 1024]);
            let started = Instant::now();
            let threads: Vec<_> = (0..writers)
                .map(|writer| {
                    let (wal, next_rv, stop, value) =
                        (wal.clone(), next_rv.clone(), stop.clone(), value.clone());
                    thread::spawn(move || {
                        let mut n = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            let (done, rx) = durable();
                            let mut rv = lock(&next_rv);
                            *rv += 1;
                            let record = Record {
                                key: Arc::from(format!("/bench/{writer}/{}", n % 1000)),
                                rv: *rv,
                                value: Some(value.clone()),
                            };
                            wal.submit(vec![record], done);
                            drop(rv);
                            wait(&rx).expect("durable");
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            thread::sleep(Duration::from_secs(3));
            stop.store(true, Ordering::Relaxed);
            let total: u64 = threads.into_iter().map(|t| t.join().expect("writer")).sum();
            let secs = started.elapsed().as_secs_f64();
            let syncs = wal.syncs();
            let shared = &wal.shared;
            let extensions = shared.extensions.load(Ordering::SeqCst);
            let extension_ms = shared.extension_nanos.load(Ordering::SeqCst) as f64 / 1e6;
            let max_ms = shared.extension_max_nanos.load(Ordering::SeqCst) as f64 / 1e6;
            println!(
                "{writers:>2} writers: {:>8.0} records/s, {:>6.0} fsyncs/s, {:>5.1} records/fsync, \
                 {extensions} preallocations ({extension_ms:.1} ms in all, longest {max_ms:.1} ms)",
                total as f64 / secs,
                syncs as f64 / secs,
                total as f64 / syncs as f64
            );
        }
    }
}
