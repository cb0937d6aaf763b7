//! `kore-bench`: measures kore-apiserver against its performance targets and against etcd on
//! the same machine, prints a Markdown table (metric, kore, etcd, ratio, target, PASS/MISS) and
//! writes `apiserver.md`, `apiserver.json` and `apiserver.svg` to the output directory.
//!
//! It builds nothing: run it through `bash bench/run.sh`, which builds the release binaries,
//! installs etcd when it is missing and passes the paths. What each number means and how it is
//! measured: `docs/design/benchmarks.md`.
//!
//! The servers under test run as separate processes (`kore apiserver`, `etcd`), so their memory
//! can be read from /proc and the load generator does not share their runtime. Only
//! `TestEnv::start()` runs in this process, because that is what it is for.

mod apply;
mod clients;
mod crd;
mod gc;
mod load;
mod manager;
mod operators;
mod operators_child;
mod operators_peers;
mod procs;
mod rbac;
mod report;
mod runtime_cache;
mod runtime_queue;
mod scenarios;
mod schema;
mod suite;
mod svg;
mod watch;
mod workloads;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;

use crate::procs::Storage;
use crate::report::{Machine, Peer, Results};
use crate::scenarios::Settings;

/// Benchmarks kore-apiserver against its targets and etcd (run it via `bash bench/run.sh`).
#[derive(Parser, Debug)]
#[command(name = "kore-bench", args_override_self = true)]
struct Args {
    /// The `kore` binary (a release build); needed by the apiserver suite.
    #[arg(long)]
    kore: Option<PathBuf>,
    /// The `etcd` binary; without it the etcd column reads n/a.
    #[arg(long)]
    etcd: Option<PathBuf>,
    /// Why etcd is not available (printed in the report when --etcd is absent).
    #[arg(long)]
    etcd_unavailable: Option<String>,
    /// Where to write apiserver.{md,json,svg}.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// Where servers keep data and logs; should be on the disk being measured, not tmpfs.
    #[arg(long, default_value = "target/kore-bench")]
    scratch: PathBuf,
    /// Warm-up before each throughput window, in seconds.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Length of each throughput window, in seconds.
    #[arg(long, default_value_t = 5.0)]
    window: f64,
    /// Concurrency levels of the throughput runs.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    clients: Vec<usize>,
    /// ConfigMaps stored for the memory measurement.
    #[arg(long, default_value_t = 100_000)]
    memory_objects: u64,
    /// ConfigMaps in the listed namespace.
    #[arg(long, default_value_t = 10_000)]
    list_objects: u64,
    /// Watchers in the fan-out test.
    #[arg(long, default_value_t = 100)]
    watchers: usize,
    /// Events written in the fan-out test.
    #[arg(long, default_value_t = 200)]
    watch_events: usize,
    /// Run one measurement only and print it, writing no files (to profile a server with
    /// perf or strace while it runs).
    #[arg(long, value_enum)]
    only: Option<Only>,
    /// Run another suite than the API server's and write `NAME.{md,json,svg}`.
    #[arg(long, value_enum)]
    suite: Option<Suite>,
    /// Reduced sizes: a smoke test of a suite, not a result.
    #[arg(long)]
    quick: bool,
    /// How many times the measurements with a peer (etcd, kube-runtime, …) run, kore and the
    /// peer alternately; the tables report the median ratio and its spread. Default 3, 1 with
    /// `--quick`.
    #[arg(long)]
    rounds: Option<usize>,
}

/// The suites beside the API server's.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Suite {
    /// kore-runtime: workqueue, reconciles, cache memory, sync time (issue 4).
    Runtime,
    /// Custom resources: schema validation, garbage collection, server-side apply (issue 3).
    Crd,
    /// The operators against kube-runtime and naive peers (issue 5).
    Operators,
    /// Pods, Deployments, rolling updates and Jobs on simulated nodes with the controller
    /// manager (issues 13 and 14); `--kore` runs the controller manager as its own process.
    Workloads,
}

impl Suite {
    fn name(self) -> &'static str {
        match self {
            Suite::Runtime => "runtime",
            Suite::Crd => "crd",
            Suite::Operators => "operators",
            Suite::Workloads => "workloads",
        }
    }
}

/// Runs one suite's measurements, in order, `rounds` times for the parts whose rows have a
/// peer (kore and the peer alternate inside each part) and once for the others; the rounds
/// are combined into medians and spreads.
async fn run_suite(
    suite: Suite,
    quick: bool,
    rounds: usize,
    kore: Option<&Path>,
) -> anyhow::Result<Vec<suite::Measured>> {
    let mut rows = Vec::new();
    for round in 0..rounds.max(1) {
        let first = round == 0;
        if !first {
            eprintln!("kore-bench: round {} of {rounds}", round + 1);
        }
        match suite {
            Suite::Runtime => {
                rows.extend(runtime_queue::run(quick).await?);
                // `KORE_BENCH_RUNTIME=queue`: the workqueue rows alone.
                if !runtime_queue::queue_only() {
                    rows.extend(runtime_cache::run(quick).await?);
                    if first {
                        rows.extend(manager::run(quick).await?);
                    }
                }
            }
            Suite::Crd => {
                if first {
                    rows.extend(schema::run(quick).await?);
                }
                rows.extend(crd::run(quick).await?);
                if first {
                    rows.extend(gc::run(quick).await?);
                    rows.extend(apply::run(quick).await?);
                    rows.extend(rbac::run(quick).await?);
                }
            }
            Suite::Operators => rows.extend(operators::run(quick, first).await?),
            Suite::Workloads => {
                // No row of this suite has a measured peer: one round.
                if first {
                    rows.extend(workloads::run(quick, kore).await?);
                }
            }
        }
    }
    Ok(suite::combine(rows))
}

/// The measurements `--only` can pick.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Only {
    /// In-process `TestEnv::start()`.
    Testenv,
    /// Process start to ready.
    Start,
    /// Creates/s, in memory.
    CreatesMemory,
    /// Creates/s, durable.
    CreatesDurable,
    /// etcd puts/s (values the size of the posted ConfigMap).
    Etcd,
    /// The full list and the watch fan-out.
    ListWatch,
    /// Resident memory.
    Memory,
    /// Creates/s and memory per object of a ConfigMap, a Pod and a StatefulSet.
    Kinds,
    /// Discovery latency.
    Discovery,
}

/// The global allocator of the running binary: `kore-bench` keeps the system's, so that kore
/// and the libraries it is compared with run on the same neutral allocator;
/// `kore-bench-mimalloc` has `kore`'s, for the suite that stands for `kore up` itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocator {
    /// The system allocator (glibc malloc).
    System,
    /// mimalloc, as the `kore` binary uses.
    Mimalloc,
}

impl Allocator {
    fn name(self) -> &'static str {
        match self {
            Allocator::System => "the system allocator",
            Allocator::Mimalloc => "mimalloc, as in `kore`",
        }
    }
}

/// The sibling binary with `kore`'s allocator, next to this one.
const MIMALLOC_BIN: &str = "kore-bench-mimalloc";

/// Runs `kore-bench` with its arguments; `allocator` is the global allocator of the binary
/// that calls it.
///
/// The workloads suite runs the API server and the simulated nodes in this process, standing
/// for `kore up`, so it runs with `kore`'s allocator: `kore-bench` hands it to
/// `kore-bench-mimalloc` (built beside it by `cargo build -p kore-bench`) with the same
/// arguments. The other suites compare kore's libraries with their peers in one process and
/// stay on the system allocator.
pub fn main(allocator: Allocator) -> anyhow::Result<()> {
    if let Some(result) = runtime_cache::main_from_env() {
        return result;
    }
    if let Some(result) = operators_child::main_from_env() {
        return result;
    }
    let args = Args::parse();
    if args.suite == Some(Suite::Workloads) && allocator != Allocator::Mimalloc {
        return hand_over_to_mimalloc();
    }
    workloads::set_allocator(allocator.name());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(run(args))
}

/// Runs this command line again in `kore-bench-mimalloc`, the sibling binary, and exits with
/// its status.
fn hand_over_to_mimalloc() -> anyhow::Result<()> {
    let me = std::env::current_exe().context("locating kore-bench")?;
    let sibling = me.with_file_name(MIMALLOC_BIN);
    anyhow::ensure!(
        sibling.exists(),
        "the workloads suite runs in {} (kore's allocator), which is not built: \
         cargo build --release -p kore-bench",
        sibling.display()
    );
    eprintln!("kore-bench: the workloads suite runs in {MIMALLOC_BIN} (kore's allocator)");
    let status = Command::new(&sibling)
        .args(std::env::args_os().skip(1))
        .status()
        .with_context(|| format!("running {}", sibling.display()))?;
    anyhow::ensure!(status.success(), "{MIMALLOC_BIN} failed: {status}");
    Ok(())
}

async fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    std::fs::create_dir_all(&args.scratch)
        .with_context(|| format!("creating {}", args.scratch.display()))?;
    let scratch = std::fs::canonicalize(&args.scratch)?;
    let machine = machine(&scratch);
    let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 3 }).max(1);
    if let Some(which) = args.suite {
        eprintln!("kore-bench: suite {}", which.name());
        let kore = args
            .kore
            .as_deref()
            .map(std::fs::canonicalize)
            .transpose()?;
        let rounds = match which {
            Suite::Workloads => 1,
            _ => rounds,
        };
        let rows = run_suite(which, args.quick, rounds, kore.as_deref()).await?;
        let results = suite::SuiteResults {
            suite: which.name(),
            machine: &machine,
            quick: args.quick,
            rounds,
            rows: &rows,
        };
        return suite::write(&args.out, &results);
    }
    let kore = args
        .kore
        .as_deref()
        .context("--kore is required for the apiserver suite")?;
    let kore = std::fs::canonicalize(kore)
        .with_context(|| format!("no kore binary at {}", kore.display()))?;
    // Logs of the previous run would only confuse.
    let _ = std::fs::remove_dir_all(scratch.join("logs"));
    let settings = Settings {
        kore,
        scratch,
        warmup: Duration::from_secs_f64(args.warmup),
        measure: Duration::from_secs_f64(args.window),
        clients: args.clients.clone(),
        fill_clients: 64,
        memory_objects: args.memory_objects,
        // A fifth of the ConfigMaps of the memory row: a pod's stored JSON is several times
        // a ConfigMap's.
        kind_objects: (args.memory_objects / 5).max(1),
        discovery_repeats: 200,
        list_objects: args.list_objects,
        list_repeats: 9,
        watchers: args.watchers,
        watch_events: args.watch_events,
        watch_interval: Duration::from_millis(10),
        process_starts: 7,
        testenv_starts: 20,
    };

    if let Some(only) = args.only {
        return run_one(only, &settings, args.etcd.as_deref()).await;
    }

    eprintln!("kore-bench: in-process TestEnv::start()");
    let testenv_start = scenarios::testenv_start(&settings).await?;
    eprintln!("kore-bench: process start to ready");
    let process_start = vec![
        scenarios::process_start(&settings, Storage::Memory).await?,
        scenarios::process_start(&settings, Storage::Durable).await?,
    ];
    // The throughput rows have a peer (etcd): kore in memory, kore durable and etcd run in
    // turn, `rounds` times, and the table reports the median ratio and its spread.
    let etcd_version = match &args.etcd {
        Some(etcd) => Some(procs::etcd_version(etcd)?),
        None => None,
    };
    let mut creates_rounds = Vec::new();
    let mut sample = None;
    for round in 0..rounds {
        eprintln!(
            "kore-bench: creates/s, in memory (round {} of {rounds})",
            round + 1
        );
        let (kore_memory, s) = scenarios::kore_creates(&settings, Storage::Memory).await?;
        eprintln!(
            "kore-bench: creates/s, durable (round {} of {rounds})",
            round + 1
        );
        let (kore_durable, _) = scenarios::kore_creates(&settings, Storage::Durable).await?;
        let etcd_runs = match (&args.etcd, &etcd_version) {
            (Some(etcd), Some(version)) => {
                eprintln!(
                    "kore-bench: puts/s, {version} (round {} of {rounds})",
                    round + 1
                );
                scenarios::etcd_puts(&settings, etcd.clone(), s.clone()).await?
            }
            _ => Vec::new(),
        };
        creates_rounds.push(report::CreatesRound {
            kore_memory,
            kore_durable,
            etcd: scenarios::best_per_level(&etcd_runs),
            etcd_runs,
        });
        sample = Some(s);
    }
    let sample = sample.context("no throughput round ran")?;
    let etcd = match etcd_version {
        Some(version) => Peer {
            version: Some(version),
            unavailable: None,
            puts: report::median_per_level(creates_rounds.iter().map(|r| &r.etcd[..])),
            runs: creates_rounds
                .iter()
                .flat_map(|r| r.etcd_runs.iter().cloned())
                .collect(),
        },
        None => {
            let why = args
                .etcd_unavailable
                .clone()
                .unwrap_or_else(|| "no --etcd given".to_owned());
            eprintln!("kore-bench: WARNING: etcd is not available ({why}); no comparison");
            Peer {
                version: None,
                unavailable: Some(why),
                puts: Vec::new(),
                runs: Vec::new(),
            }
        }
    };
    let kore_memory = report::median_per_level(creates_rounds.iter().map(|r| &r.kore_memory[..]));
    let kore_durable = report::median_per_level(creates_rounds.iter().map(|r| &r.kore_durable[..]));
    eprintln!("kore-bench: list and watch fan-out");
    let (list, watch) = scenarios::list_and_watch(&settings).await?;
    eprintln!("kore-bench: resident memory");
    let memory = scenarios::memory(&settings).await?;
    eprintln!("kore-bench: creates/s and memory per object, by kind");
    let kinds = scenarios::kinds(&settings).await?;
    eprintln!("kore-bench: discovery");
    let discovery = scenarios::discovery(&settings).await?;

    let results = Results {
        machine,
        warmup_seconds: args.warmup,
        window_seconds: args.window,
        request_bytes: load::configmap("bench-m064-00-00000000").len(),
        stored_bytes: sample.len(),
        kore_memory,
        kore_durable,
        etcd,
        creates_rounds,
        list,
        watch,
        process_start,
        testenv_start,
        memory,
        kinds,
        discovery,
        runtime_seconds: started.elapsed().as_secs_f64(),
    };
    let rows = report::rows(&results);
    let table = report::markdown_table(&rows);
    println!("{table}");
    println!("{}", report::notes(&results));
    report::write_files(&args.out, &results, &rows, &table)?;
    eprintln!(
        "kore-bench: wrote {}/apiserver.{{md,json,svg}} in {:.0} s",
        args.out.display(),
        results.runtime_seconds
    );
    Ok(())
}

/// Runs one measurement and prints what it found.
async fn run_one(only: Only, settings: &Settings, etcd: Option<&Path>) -> anyhow::Result<()> {
    match only {
        Only::Testenv => {
            eprintln!("{:?}", scenarios::testenv_start(settings).await?);
        }
        Only::Start => {
            for storage in [Storage::Memory, Storage::Durable] {
                eprintln!("{:?}", scenarios::process_start(settings, storage).await?);
            }
        }
        Only::CreatesMemory => {
            scenarios::kore_creates(settings, Storage::Memory).await?;
        }
        Only::CreatesDurable => {
            scenarios::kore_creates(settings, Storage::Durable).await?;
        }
        Only::Etcd => {
            let etcd = etcd.context("--only etcd needs --etcd")?.to_path_buf();
            let value = load::configmap("bench-s000-00-00000000");
            scenarios::etcd_puts(settings, etcd, value).await?;
        }
        Only::ListWatch => {
            scenarios::list_and_watch(settings).await?;
        }
        Only::Memory => {
            scenarios::memory(settings).await?;
        }
        Only::Kinds => {
            scenarios::kinds(settings).await?;
        }
        Only::Discovery => {
            scenarios::discovery(settings).await?;
        }
    }
    Ok(())
}

/// Facts about the machine, each best-effort ("unknown" when unreadable).
fn machine(scratch: &Path) -> Machine {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown", |(_, v)| v.trim())
        .to_owned();
    let memory_bytes = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024);
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(hash) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(status) if !status.is_empty() => format!("{hash}+dirty"),
            _ => hash,
        },
        None => "unknown".to_owned(),
    };
    Machine {
        date: jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .map_or_else(|_| jiff::Timestamp::now().to_string(), |t| t.to_string()),
        commit,
        nproc: std::thread::available_parallelism().map_or(0, usize::from),
        cpu,
        memory_bytes,
        kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
        scratch_fs: filesystem_of(scratch, &read("/proc/mounts")),
        fdatasync_ms: fdatasync_ms(scratch).ok(),
        loadavg: read("/proc/loadavg").trim().to_owned(),
    }
}

/// Median time of appending 512 bytes to a file in `dir` and `fdatasync`ing it: what one
/// durable commit costs at least on this disk.
fn fdatasync_ms(dir: &Path) -> anyhow::Result<f64> {
    use std::io::Write as _;
    let mut file = tempfile::tempfile_in(dir).context("creating a file to sync")?;
    let block = [0x5a_u8; 512];
    let mut samples = Vec::with_capacity(300);
    for _ in 0..300 {
        let began = Instant::now();
        file.write_all(&block)?;
        file.sync_data()?;
        samples.push(began.elapsed());
    }
    Ok(load::median_ms(&samples))
}

/// The type and device of the mount holding `path` (the longest mount point that prefixes it).
fn filesystem_of(path: &Path, mounts: &str) -> String {
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let device = fields.next()?;
            let mount_point = fields.next()?;
            let fs_type = fields.next()?;
            path.starts_with(mount_point).then(|| {
                (
                    mount_point.len(),
                    format!("{fs_type} ({device} on {mount_point})"),
                )
            })
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown".to_owned(), |(_, fs)| fs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_mount_point_wins() {
        let mounts = "/dev/vda / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n";
        assert_eq!(
            filesystem_of(Path::new("/tmp/x"), mounts),
            "tmpfs (tmpfs on /tmp)"
        );
        assert_eq!(
            filesystem_of(Path::new("/work/x"), mounts),
            "ext4 (/dev/vda on /)"
        );
    }
}
