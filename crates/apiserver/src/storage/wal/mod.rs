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
//! The code is split by concern: `frame` (the format and its CRC), `writer` (the committer
//! thread: group commit, preallocation, compaction, the mark), `recovery` (reading the log
//! back and deciding what may be dropped and what is refused), and `file` (the files of the
//! data directory: the lock, snapshots written by rename, the mark, copies kept by a repair).
//!
//! # Files
//! All in the data directory:
//! - `kore.wal`: the log.
//! - `kore.wal.tmp`: a compaction in progress; removed at open (it never became the log).
//! - `kore.wal.mark`: the high-water mark: the highest revision the log is known to hold,
//!   and a ceiling no written revision exceeds (two checksummed slots, updated in place).
//! - `kore.wal.damaged-<unix time>`: a log a repair replaced, kept for a human to look at.
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
//! - The mark's `written` revision is recorded only after the log holds it on stable storage
//!   (after a commit's sync: at most every second while writes go on, when the committer goes
//!   idle, at a clean stop, and right after a compaction). Its `ceiling` is raised, and synced,
//!   before a frame with revisions above it is written.
//!
//! # Recovery
//! [`WalBackend::open`] reads the log frame by frame and replays it: the last put of a key
//! wins, a delete removes it, and the highest revision seen (deletes and snapshot headers
//! included) becomes [`Loaded::max_rv`]. A zero length word is the logical end: if at least
//! a frame header of zeros follows and everything after it is zero, the log is clean (the
//! zeros are synced once more, since after a kill they may have been in the page cache only).
//!
//! Only a torn final frame may be dropped: damage (a short frame, a failed CRC, non-zero
//! bytes after a zero length word) with no intact frame anywhere after it, whose claimed
//! length fits in the file with a zero frame header after it, and with at least a frame
//! header of zeros at the end of the file. That is what a crash leaves of the commit in
//! flight; it was never acknowledged. Its bytes are overwritten with zeros in place (with a
//! warning), so the log still ends on synced zeros. Everything else is refused with
//! [`BackendError::Corrupt`], naming the file, the byte offset and what to do:
//! - a damaged frame followed by an intact frame (the log was damaged after it was written);
//! - a frame that runs past the end of the file, or a log that ends without its zeros
//!   (truncation: a partial copy, a full disk, an operator's mistake);
//! - a frame that passes its CRC but does not decode, or a wrong magic;
//! - a log whose revisions end below the mark's `written` (truncated at a frame boundary and
//!   padded, or an older copy restored);
//! - a missing log while the mark exists, or while the server's credentials are in the
//!   directory (it was used before);
//! - a mark whose two slots are both unreadable.
//!
//! [`WalConfig::repair`] starts anyway: it keeps every frame before the damage, links the old
//! log to `kore.wal.damaged-<unix time>`, writes what it kept as a new log (a snapshot) whose
//! revision is the mark's ceiling (so the clock continues above every revision that may have
//! been acknowledged), and logs what was lost at error level.
//!
//! A directory without a mark was last used by a build that wrote none. Its log may end
//! without zeros, or with a frame cut short at the end of the file (a torn write, in those
//! builds): both are accepted, as those builds did, the file is preallocated and the mark
//! written, and the strict rules hold from then on. The search for an intact frame after
//! damage checks every byte offset, except inside runs of zeros (no frame starts with a zero
//! length word), and a candidate whose payload runs into zeros does not decode them one by
//! one.
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
//! - Damage to the last frame that looks like a crash's (bit rot over a frame that is followed
//!   by its zeros) cannot be told from a torn write: it is wiped like one, losing that commit
//!   even though it was acknowledged. So can a log cut at a frame boundary and padded with
//!   zeros, for the writes after the mark's last record (at most about a second of them).
//! - A compaction rewrites the whole live state on the committer thread; writes submitted
//!   meanwhile wait for it, about as long as writing and syncing the live data takes.
//! - Preallocation writes every byte of the log twice (zeros, then the frame) and the file is
//!   up to one step larger than the log. The stall of a step shows in tail latency.
//! - On a file system without a journal, blocks whose zeros never reached the disk (a crash
//!   during a preallocation) may read back as stale data of a deleted file, such as the log
//!   a compaction replaced. That data lies after the synced zero header that ends the log,
//!   so it is never replayed: recovery wipes it as a torn tail if zeros follow it, and
//!   otherwise refuses to start (a repair then loses nothing acknowledged).
//! - A write whose `done` got an error may still be on disk after a restart (the `write`
//!   succeeded but the `fdatasync` reported a failure): its outcome is unknown, as after a
//!   timeout from etcd. It is never half there.
//! - `done` callbacks run on the committer thread, and the next commit waits for them: keep
//!   them short. A panicking callback is caught and logged.

mod file;
mod frame;
mod recovery;
mod writer;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use super::backend::{Backend, BackendError, Durable, Loaded, Record};
use file::{TMP_FILE, lock_dir, sync_dir};
use frame::{ROUND_BYTES, put_size, snapshot_overhead};
use recovery::{Recovered, recover};
use writer::Committer;

/// The log may grow to this size before compaction is considered at all, by default.
const COMPACTION_FLOOR: u64 = 64 << 20;
/// Compaction is due when the log is this many times larger than the live data.
const COMPACTION_RATIO: u64 = 4;
/// An encode buffer grown beyond this by a large commit is freed afterwards.
pub(super) const BUF_KEEP: usize = 4 << 20;

/// Settings of a [`WalBackend`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WalConfig {
    /// Start even if acknowledged writes are missing from the log (it is damaged, truncated,
    /// older than the high-water mark, or gone), keeping what can be read. The old log is
    /// kept next to the new one as `kore.wal.damaged-<unix time>`, and the revision clock
    /// continues above every revision handed out before. Off by default: the server refuses
    /// to start instead.
    pub repair: bool,
    /// The log size under which compaction is never due (64 MiB by default).
    pub compaction_floor: u64,
}

impl Default for WalConfig {
    fn default() -> Self {
        WalConfig {
            repair: false,
            compaction_floor: COMPACTION_FLOOR,
        }
    }
}

impl WalConfig {
    /// Sets [`WalConfig::repair`].
    #[must_use]
    pub fn repair(mut self, on: bool) -> Self {
        self.repair = on;
        self
    }

    /// Sets [`WalConfig::compaction_floor`]. Lower it to compact small logs (tests do, to
    /// crash during a compaction); compaction stays due only once the log is also four times
    /// the live data.
    #[must_use]
    pub fn compaction_floor(mut self, bytes: u64) -> Self {
        self.compaction_floor = bytes;
        self
    }
}

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
pub(super) struct Shared {
    pub(super) queue: Mutex<Queue>,
    /// Signalled when the queue becomes non-empty or the backend closes.
    pub(super) wake: Condvar,
    /// Logical bytes in the current log file (up to the end of the last synced frame; the
    /// preallocated zeros after it are not counted).
    pub(super) log_bytes: AtomicU64,
    /// Bytes a snapshot of the live data would take.
    pub(super) live_bytes: AtomicU64,
    /// The log size under which compaction is never due.
    pub(super) compaction_floor: AtomicU64,
    /// A compaction is queued or running.
    pub(super) compaction_queued: AtomicBool,
    /// A write failed; nothing more is accepted.
    pub(super) poisoned: AtomicBool,
    /// [`ROUND_BYTES`]; tests lower it to exercise frame splitting.
    pub(super) round_bytes: AtomicUsize,
    /// fsyncs of the log (commits), for tests of group commit.
    #[cfg(test)]
    pub(super) syncs: AtomicU64,
    /// Preallocations by the committer, and the total and longest time they took.
    #[cfg(test)]
    pub(super) extensions: AtomicU64,
    #[cfg(test)]
    pub(super) extension_nanos: AtomicU64,
    #[cfg(test)]
    pub(super) extension_max_nanos: AtomicU64,
    /// Makes the next commit fail as if the disk had failed.
    #[cfg(test)]
    pub(super) fail_next_commit: AtomicBool,
}

#[derive(Default)]
pub(super) struct Queue {
    pub(super) jobs: VecDeque<Job>,
    pub(super) closing: bool,
    /// While the committer lingers: wake it once this many jobs are queued (0 otherwise).
    pub(super) want: usize,
}

/// One queued piece of work for the committer.
pub(super) enum Job {
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

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WalBackend {
    /// Opens the log in `dir` with the default [`WalConfig`]; see [`WalBackend::open_with`].
    ///
    /// # Errors
    /// As [`WalBackend::open_with`].
    pub fn open(dir: &Path) -> Result<WalBackend, BackendError> {
        WalBackend::open_with(dir, &WalConfig::default())
    }

    /// Opens the log in `dir`, creating the directory and the log if needed, and recovers it
    /// (see [Recovery](self#recovery)). The state it holds is returned by [`Backend::load`].
    ///
    /// # Errors
    /// - [`BackendError::Io`] if the directory cannot be created or read, or if another
    ///   process (or another `WalBackend` in this one) has it open.
    /// - [`BackendError::Corrupt`] if acknowledged writes may be missing: the log is damaged
    ///   other than by a torn final write, truncated, older than the high-water mark, or
    ///   missing from a directory that was used before. The message names the file, the byte
    ///   offset and what to do. Do not delete the log: it holds every acknowledged write up to
    ///   the damage. [`WalConfig::repair`] starts anyway, accepting the loss.
    pub fn open_with(dir: &Path, config: &WalConfig) -> Result<WalBackend, BackendError> {
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
        let Recovered {
            file,
            records,
            max_rv,
            end: log_bytes,
            allocated,
            mark,
        } = recover(dir, config.repair)?;

        let mut sizes = HashMap::with_capacity(records.len());
        let mut live_bytes = snapshot_overhead();
        for record in &records {
            if let Some(value) = &record.value {
                let size = put_size(&record.key, value);
                live_bytes += size;
                sizes.insert(record.key.clone(), size);
            }
        }

        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            log_bytes: AtomicU64::new(log_bytes),
            live_bytes: AtomicU64::new(live_bytes),
            compaction_floor: AtomicU64::new(config.compaction_floor),
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
            buf: Vec::new(),
            in_flight: Vec::new(),
            poisoned: false,
            mark,
            marked_at: Instant::now(),
            synced_rv: max_rv,
        };
        let handle = thread::Builder::new()
            .name("kore-wal".into())
            .spawn(move || committer.run())?;
        Ok(WalBackend {
            dir: dir.to_path_buf(),
            shared,
            recovered: Mutex::new(Some(Loaded { records, max_rv })),
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
