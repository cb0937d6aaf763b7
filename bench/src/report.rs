//! The results: the table with targets, and the files under `bench/results/`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use crate::load::Throughput;
use crate::scenarios::{Discovery, KindCost, ListResult, Memory, Starts};
use crate::svg::{self, Series, thousands};
use crate::watch::FanOut;

/// Target: in-memory creates/s at the highest concurrency.
pub(crate) const TARGET_MEMORY_CREATES: f64 = 20_000.0;
/// Target: durable creates/s over etcd puts/s at the highest concurrency.
pub(crate) const TARGET_DURABLE_OVER_ETCD: f64 = 2.0;
/// Target: watch fan-out p99, in milliseconds.
pub(crate) const TARGET_WATCH_P99_MS: f64 = 10.0;
/// Target: in-process `TestEnv::start()`, in milliseconds (strictly less).
pub(crate) const TARGET_TESTENV_MS: f64 = 10.0;
/// Target: process start to ready, in milliseconds (strictly less).
pub(crate) const TARGET_PROCESS_READY_MS: f64 = 100.0;
/// Target: RSS growth over JSON bytes (issue 16's; the suite's first target was 2×).
pub(crate) const TARGET_MEMORY_RATIO: f64 = 1.5;

/// Where and on what the benchmark ran.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Machine {
    /// When the run started (UTC, RFC 3339).
    pub(crate) date: String,
    /// `git rev-parse --short=12 HEAD`, with `+dirty` when tracked files were modified.
    pub(crate) commit: String,
    /// Logical CPUs available (`nproc`).
    pub(crate) nproc: usize,
    /// `model name` from /proc/cpuinfo.
    pub(crate) cpu: String,
    /// MemTotal, in bytes.
    pub(crate) memory_bytes: u64,
    /// Kernel release.
    pub(crate) kernel: String,
    /// File system type of the scratch directory (durable data lives there).
    pub(crate) scratch_fs: String,
    /// Median time of a 512-byte append plus `fdatasync` there, in milliseconds.
    pub(crate) fdatasync_ms: Option<f64>,
    /// /proc/loadavg when the run started (other work on the machine skews the numbers).
    pub(crate) loadavg: String,
}

/// How the etcd comparison went.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Peer {
    /// `etcd --version`'s first line, if etcd ran.
    pub(crate) version: Option<String>,
    /// Why there is no etcd column, if there is none.
    pub(crate) unavailable: Option<String>,
    /// The best puts/s per concurrency level (of the connection layouts), which the table
    /// compares with.
    pub(crate) puts: Vec<Throughput>,
    /// Every run, both connection layouts.
    pub(crate) runs: Vec<Throughput>,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Results {
    /// The machine.
    pub(crate) machine: Machine,
    /// Warm-up and window of each throughput run, in seconds.
    pub(crate) warmup_seconds: f64,
    /// Measured window of each throughput run, in seconds.
    pub(crate) window_seconds: f64,
    /// Size of the ConfigMap JSON the clients POST, in bytes.
    pub(crate) request_bytes: usize,
    /// Size of a ConfigMap as kore returns it, and of every etcd value, in bytes.
    pub(crate) stored_bytes: usize,
    /// kore creates/s, in memory: per concurrency level, the median round.
    pub(crate) kore_memory: Vec<Throughput>,
    /// kore creates/s, with `--data-dir`: per concurrency level, the median round.
    pub(crate) kore_durable: Vec<Throughput>,
    /// etcd (`puts`: per concurrency level, the median round of the best layout).
    pub(crate) etcd: Peer,
    /// Every round of the throughput runs, in order; each ran kore in memory, kore durable
    /// and etcd in turn, and the ratios are taken within a round.
    pub(crate) creates_rounds: Vec<CreatesRound>,
    /// The full list.
    pub(crate) list: ListResult,
    /// Watch fan-out.
    pub(crate) watch: FanOut,
    /// Process starts, in memory and durable.
    pub(crate) process_start: Vec<Starts>,
    /// `TestEnv::start()`.
    pub(crate) testenv_start: Starts,
    /// Resident memory.
    pub(crate) memory: Memory,
    /// Creates/s and memory per object, by kind.
    pub(crate) kinds: Vec<KindCost>,
    /// Discovery latency.
    pub(crate) discovery: Discovery,
    /// Wall-clock time of the whole run, in seconds.
    pub(crate) runtime_seconds: f64,
}

/// One round of the throughput runs: kore in memory, kore durable, then etcd.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CreatesRound {
    /// kore creates/s, in memory, per concurrency level.
    pub(crate) kore_memory: Vec<Throughput>,
    /// kore creates/s, durable, per concurrency level.
    pub(crate) kore_durable: Vec<Throughput>,
    /// etcd puts/s, the better connection layout per concurrency level (empty without etcd).
    pub(crate) etcd: Vec<Throughput>,
    /// Every etcd run of the round, both connection layouts.
    #[serde(skip)]
    pub(crate) etcd_runs: Vec<Throughput>,
}

/// Per concurrency level, the round with the median ops/s (the lower middle one for an even
/// count), its errors replaced by the sum over all rounds so that no failure is hidden.
pub(crate) fn median_per_level<'a>(
    rounds: impl IntoIterator<Item = &'a [Throughput]>,
) -> Vec<Throughput> {
    let mut levels: Vec<Vec<&Throughput>> = Vec::new();
    for round in rounds {
        for t in round {
            match levels.iter_mut().find(|l| l[0].clients == t.clients) {
                Some(level) => level.push(t),
                None => levels.push(vec![t]),
            }
        }
    }
    levels
        .into_iter()
        .map(|mut level| {
            let errors = level.iter().map(|t| t.errors).sum();
            let first_error = level.iter().find_map(|t| t.first_error.clone());
            level.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
            let mut median = level[(level.len() - 1) / 2].clone();
            median.errors = errors;
            median.first_error = first_error;
            median
        })
        .collect()
}

/// kore ÷ etcd at one concurrency level in every round that ran both: the median ratio and
/// the spread, as "1.79× (1.70–2.10, 3 runs)", and the median for judging.
fn ratio_over_rounds(
    rounds: &[CreatesRound],
    kore: impl Fn(&CreatesRound) -> &[Throughput],
    clients: usize,
) -> Option<(f64, String)> {
    let ratios: Vec<f64> = rounds
        .iter()
        .filter_map(|r| {
            let k = kore(r).iter().find(|t| t.clients == clients)?;
            let e = r.etcd.iter().find(|t| t.clients == clients)?;
            (e.ops_per_sec > 0.0).then(|| k.ops_per_sec / e.ops_per_sec)
        })
        .collect();
    if ratios.is_empty() {
        return None;
    }
    let median = crate::suite::median(ratios.iter().copied());
    let (lo, hi) = ratios
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
            (lo.min(r), hi.max(r))
        });
    let text = if ratios.len() > 1 {
        format!("{median:.2}× ({lo:.2}–{hi:.2}, {} runs)", ratios.len())
    } else {
        format!("{median:.2}× (1 run)")
    };
    Some((median, text))
}

/// One line of the table.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Row {
    /// What is measured.
    pub(crate) metric: String,
    /// kore's number.
    pub(crate) kore: String,
    /// etcd's number, when there is one.
    pub(crate) peer: String,
    /// kore relative to the peer (or to its reference).
    pub(crate) ratio: String,
    /// The target, if this row has one.
    pub(crate) target: String,
    /// Whether the target is met; `None` when the row has no target or it cannot be judged.
    pub(crate) pass: Option<bool>,
}

impl Row {
    fn info(metric: String, kore: String) -> Row {
        Row {
            metric,
            kore,
            peer: String::new(),
            ratio: String::new(),
            target: String::new(),
            pass: None,
        }
    }
}

fn ms(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn clients(n: usize) -> String {
    if n == 1 {
        "1 client".to_owned()
    } else {
        format!("{n} clients")
    }
}

/// The table rows, targets judged.
pub(crate) fn rows(r: &Results) -> Vec<Row> {
    let mut rows = Vec::new();
    let etcd_at = |clients: usize| r.etcd.puts.iter().find(|t| t.clients == clients);
    let peer_text = |clients: usize| match etcd_at(clients) {
        Some(t) => format!("{}/s", thousands(t.ops_per_sec)),
        None => "n/a".to_owned(),
    };
    let memory_ratio =
        |clients: usize| ratio_over_rounds(&r.creates_rounds, |round| &round.kore_memory, clients);
    let durable_ratio =
        |clients: usize| ratio_over_rounds(&r.creates_rounds, |round| &round.kore_durable, clients);
    let top_memory = r.kore_memory.iter().map(|t| t.clients).max();
    for t in &r.kore_memory {
        let mut row = Row {
            metric: format!("creates/s, {}, in memory", clients(t.clients)),
            kore: format!("{}/s", thousands(t.ops_per_sec)),
            peer: peer_text(t.clients),
            ratio: memory_ratio(t.clients).map(|r| r.1).unwrap_or_default(),
            target: String::new(),
            pass: None,
        };
        if Some(t.clients) == top_memory {
            row.target = format!("≥ {}/s", thousands(TARGET_MEMORY_CREATES));
            row.pass = Some(t.ops_per_sec >= TARGET_MEMORY_CREATES && t.errors == 0);
        }
        rows.push(row);
    }
    let top_durable = r.kore_durable.iter().map(|t| t.clients).max();
    for t in &r.kore_durable {
        let mut row = Row {
            metric: format!("creates/s, {}, durable", clients(t.clients)),
            kore: format!("{}/s", thousands(t.ops_per_sec)),
            peer: peer_text(t.clients),
            ratio: durable_ratio(t.clients).map(|r| r.1).unwrap_or_default(),
            target: String::new(),
            pass: None,
        };
        if Some(t.clients) == top_durable {
            // Judged on the median of the per-round ratios; any failed client in any round
            // is a miss.
            row.target = format!("≥ {TARGET_DURABLE_OVER_ETCD}× etcd (median)");
            row.pass = durable_ratio(t.clients)
                .map(|(median, _)| t.errors == 0 && median >= TARGET_DURABLE_OVER_ETCD);
        }
        rows.push(row);
    }
    rows.push(Row::info(
        format!(
            "list {} ConfigMaps, one full list (median of {})",
            thousands(r.list.objects as f64),
            r.list.runs
        ),
        format!("{} ({})", ms(r.list.median_ms), mib(r.list.bytes)),
    ));
    let w = &r.watch;
    let watch_metric = |q: &str| {
        format!(
            "watch fan-out {q}, 1 writer → {} watchers ({} events)",
            w.watchers, w.events
        )
    };
    rows.push(Row::info(watch_metric("p50"), ms(w.p50_ms)));
    rows.push(Row {
        metric: watch_metric("p99"),
        kore: ms(w.p99_ms),
        peer: String::new(),
        ratio: String::new(),
        target: format!("≤ {TARGET_WATCH_P99_MS} ms"),
        pass: Some(w.p99_ms <= TARGET_WATCH_P99_MS && w.missing == 0),
    });
    for s in &r.process_start {
        let metric = format!(
            "process start → /readyz 200, {} (median of {})",
            s.what,
            s.runs - 1
        );
        if s.what.contains("in memory") {
            rows.push(Row {
                metric,
                kore: ms(s.median_ms),
                peer: String::new(),
                ratio: String::new(),
                target: format!("< {TARGET_PROCESS_READY_MS} ms"),
                pass: Some(s.median_ms < TARGET_PROCESS_READY_MS),
            });
        } else {
            rows.push(Row::info(metric, ms(s.median_ms)));
        }
    }
    let t = &r.testenv_start;
    rows.push(Row {
        metric: format!("in-process TestEnv::start() (median of {})", t.runs - 1),
        kore: ms(t.median_ms),
        peer: String::new(),
        ratio: String::new(),
        target: format!("< {TARGET_TESTENV_MS} ms"),
        pass: Some(t.median_ms < TARGET_TESTENV_MS),
    });
    rows.push(Row::info(
        "in-process TestEnv::start(), first in the process".to_owned(),
        ms(t.first_ms),
    ));
    let m = &r.memory;
    rows.push(Row {
        metric: format!(
            "RSS growth with {} ConfigMaps vs their JSON",
            thousands(m.objects as f64)
        ),
        kore: mib(m.rss_growth),
        peer: format!("JSON {}", mib(m.json_bytes)),
        ratio: format!("{:.2}× JSON", m.ratio),
        target: format!("≤ {TARGET_MEMORY_RATIO}× JSON"),
        pass: Some(m.ratio <= TARGET_MEMORY_RATIO),
    });
    for k in &r.kinds {
        rows.push(Row::info(
            format!(
                "creates/s, {} clients, {} (filling {})",
                k.clients,
                k.kind.name(),
                thousands(k.objects as f64)
            ),
            format!("{}/s", thousands(k.creates_per_sec)),
        ));
    }
    for k in &r.kinds {
        let objects = k.objects.max(1) as f64;
        rows.push(Row {
            metric: format!(
                "RSS per stored {} ({}) vs its JSON",
                k.kind.name(),
                thousands(k.objects as f64)
            ),
            kore: format!("{:.0} B", k.bytes_per_object),
            peer: format!("JSON {:.0} B", k.json_bytes as f64 / objects),
            ratio: format!("{:.2}× JSON", k.ratio),
            target: String::new(),
            pass: None,
        });
    }
    let d = &r.discovery;
    rows.push(Row::info(
        format!(
            "GET /apis, aggregated discovery ({} groups, {} resources) (median of {})",
            d.groups, d.resources, d.runs
        ),
        format!(
            "{} ({:.0} KiB)",
            ms(d.aggregated_ms),
            d.aggregated_bytes as f64 / 1024.0
        ),
    ));
    rows.push(Row::info(
        format!("GET /api, aggregated discovery (median of {})", d.runs),
        ms(d.legacy_ms),
    ));
    rows
}

/// The rows as an aligned Markdown table.
pub(crate) fn markdown_table(rows: &[Row]) -> String {
    let header = ["metric", "kore", "etcd", "ratio", "target", "result"];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let result = match r.pass {
                Some(true) => "PASS",
                Some(false) => "MISS",
                None if r.target.is_empty() => "",
                None => "n/a",
            };
            [
                r.metric.clone(),
                r.kore.clone(),
                r.peer.clone(),
                r.ratio.clone(),
                r.target.clone(),
                result.to_owned(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::from("|");
        for (cell, w) in cells.iter().zip(widths) {
            let pad = w - cell.chars().count();
            let _ = write!(out, " {cell}{} |", " ".repeat(pad));
        }
        out.push('\n');
        out
    };
    let mut table = line(&header.map(str::to_owned));
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    table.push_str(&line(&rule));
    for row in &cells {
        table.push_str(&line(row));
    }
    table
}

/// Notes printed under the table: how to read the etcd column, and anything that went wrong.
pub(crate) fn notes(r: &Results) -> String {
    let mut out = String::new();
    match (&r.etcd.version, &r.etcd.unavailable) {
        (Some(version), _) => {
            let _ = writeln!(
                out,
                "etcd: {version}, puts/s of values the size of a stored ConfigMap ({} bytes), the better of \
                 one gRPC connection per client and all clients on one connection (as kube-apiserver \
                 connects). Throughput: kore in memory, kore durable and etcd ran in turn, {} \
                 time(s); the values are the median round, the ratio (kore / etcd) is the median of \
                 the per-round ratios with their spread (min–max), and PASS/MISS judges that median.",
                r.stored_bytes,
                r.creates_rounds.len()
            );
        }
        (None, why) => {
            let _ = writeln!(
                out,
                "etcd: NOT RUN ({}); no comparison, and the durable target cannot be judged.",
                why.as_deref().unwrap_or("unavailable")
            );
        }
    }
    let runs = [
        ("kore in memory", &r.kore_memory),
        ("kore durable", &r.kore_durable),
        ("etcd", &r.etcd.runs),
    ];
    for (name, results) in runs {
        for t in results.iter().filter(|t| t.errors > 0) {
            let _ = writeln!(
                out,
                "WARNING: {name}, {} clients: {} clients failed and stopped early (first error: {}).",
                t.clients,
                t.errors,
                t.first_error.as_deref().unwrap_or("?")
            );
        }
    }
    if r.watch.missing > 0 {
        let _ = writeln!(
            out,
            "WARNING: {} watch deliveries did not arrive (counted as a MISS).",
            r.watch.missing
        );
    }
    out
}

/// Details below the table in the Markdown report: latencies and CPU use of each run.
fn details(r: &Results) -> String {
    let mut out = String::new();
    out.push_str(
        "| run | clients | connections | ops/s | p50 | p99 | server CPU (cores) \
         | load generator CPU (cores) | other CPU (cores) | errors |\n",
    );
    out.push_str(
        "|-----|---------|-------------|-------|-----|-----|--------------------\
         |----------------------------|-------------------|--------|\n",
    );
    let rounds = r.creates_rounds.len();
    let mut runs: Vec<(String, &[Throughput])> = Vec::new();
    for (i, round) in r.creates_rounds.iter().enumerate() {
        let of = if rounds > 1 {
            format!(" (round {} of {rounds})", i + 1)
        } else {
            String::new()
        };
        runs.push((format!("kore, in memory{of}"), &round.kore_memory));
        runs.push((format!("kore, durable{of}"), &round.kore_durable));
        runs.push((format!("etcd{of}"), &round.etcd_runs));
    }
    for (name, results) in runs {
        for t in results {
            let _ = writeln!(
                out,
                "| {name} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {} |",
                t.clients,
                t.connections,
                thousands(t.ops_per_sec),
                ms(t.p50_ms),
                ms(t.p99_ms),
                t.server_cores,
                t.client_cores,
                t.other_cores,
                match &t.first_error {
                    Some(e) => format!("{} (first: {e})", t.errors),
                    None => "0".to_owned(),
                }
            );
        }
    }
    let w = &r.watch;
    let _ = writeln!(
        out,
        "\nWatch fan-out: {} deliveries measured, {} missing, max {}; one write every {} ms, \
         its own create latency p50 {} / p99 {}.",
        w.samples,
        w.missing,
        ms(w.max_ms),
        w.interval_ms,
        ms(w.write_p50_ms),
        ms(w.write_p99_ms)
    );
    let l = &r.list;
    let _ = writeln!(
        out,
        "List: {} bytes of JSON; fastest {}, slowest {}.",
        l.bytes,
        ms(l.min_ms),
        ms(l.max_ms)
    );
    for s in r.process_start.iter().chain([&r.testenv_start]) {
        let _ = writeln!(
            out,
            "Start of {}: first {}, min {}, median {}, max {} over {} starts.",
            s.what,
            ms(s.first_ms),
            ms(s.min_ms),
            ms(s.median_ms),
            ms(s.max_ms),
            s.runs
        );
    }
    let m = &r.memory;
    let _ = writeln!(
        out,
        "Memory: VmRSS {} when empty, {} with {} ConfigMaps ({} bytes of JSON, {:.0} bytes each); \
         filled at {}/s.",
        mib(m.rss_empty),
        mib(m.rss_full),
        thousands(m.objects as f64),
        m.json_bytes,
        m.json_bytes as f64 / m.objects.max(1) as f64,
        thousands(m.fill_per_sec)
    );
    out
}

/// The Markdown report: table, machine, details.
fn markdown(r: &Results, table: &str) -> String {
    let m = &r.machine;
    let mut out = String::new();
    out.push_str("# kore-apiserver benchmark\n\n");
    out.push_str("Produced by `bash bench/run.sh`; what each number means: ");
    out.push_str("[docs/design/benchmarks.md](../../docs/design/benchmarks.md).\n\n");
    out.push_str(table);
    out.push('\n');
    out.push_str(&notes(r));
    let etcd = match (&r.etcd.version, &r.etcd.unavailable) {
        (Some(v), _) => v.clone(),
        (None, Some(why)) => format!("not run: {why}"),
        (None, None) => "not run".to_owned(),
    };
    let _ = write!(
        out,
        "\n## Machine\n\n\
         - date: {}\n- commit: {}\n- nproc: {}\n- CPU: {}\n- memory: {}\n- kernel: {}\n\
         - scratch file system (durable data of kore and etcd): {}\n\
         - one 512-byte append + fdatasync there (median of 300): {}\n- load average at start: {}\n\
         - peer: {etcd}\n- runtime of the benchmark: {:.0} s\n\n",
        m.date,
        m.commit,
        m.nproc,
        m.cpu,
        mib(m.memory_bytes),
        m.kernel,
        m.scratch_fs,
        m.fdatasync_ms.map_or_else(|| "unknown".to_owned(), ms),
        m.loadavg,
        r.runtime_seconds
    );
    let _ = write!(
        out,
        "ConfigMaps: {} bytes of JSON posted, {} bytes as stored and returned by kore; etcd values \
         are that stored JSON. Throughput: {} s warm-up, then a {} s window per row.\n\n",
        r.request_bytes, r.stored_bytes, r.warmup_seconds, r.window_seconds
    );
    out.push_str("## Details\n\n");
    out.push_str(&details(r));
    out
}

/// The bar chart of creates/s and puts/s.
fn chart(r: &Results) -> String {
    let levels: Vec<usize> = r.kore_memory.iter().map(|t| t.clients).collect();
    let values = |results: &[Throughput]| -> Vec<Option<f64>> {
        levels
            .iter()
            .map(|c| {
                results
                    .iter()
                    .find(|t| t.clients == *c)
                    .map(|t| t.ops_per_sec)
            })
            .collect()
    };
    let series = [
        Series {
            name: "kore, in memory (HTTPS creates)".into(),
            color: "#2b6cb0",
            values: values(&r.kore_memory),
        },
        Series {
            name: "kore, durable (HTTPS creates)".into(),
            color: "#2f855a",
            values: values(&r.kore_durable),
        },
        Series {
            name: "etcd (gRPC puts)".into(),
            color: "#c05621",
            values: values(&r.etcd.puts),
        },
    ];
    let groups: Vec<String> = levels.iter().map(|c| clients(*c)).collect();
    svg::bar_chart(
        &format!(
            "Writes per second, {} cores, {}",
            r.machine.nproc, r.machine.date
        ),
        "writes per second",
        &groups,
        &series,
    )
}

/// Writes `apiserver.md`, `apiserver.json` and `apiserver.svg` into `dir`.
pub(crate) fn write_files(
    dir: &Path,
    r: &Results,
    rows: &[Row],
    table: &str,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: &str, contents: &str| {
        let path = dir.join(name);
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))
    };
    write("apiserver.md", &markdown(r, table))?;
    let json = serde_json::json!({ "table": rows, "results": r });
    write(
        "apiserver.json",
        &(serde_json::to_string_pretty(&json).context("serializing the results")? + "\n"),
    )?;
    write("apiserver.svg", &chart(r))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(clients: usize, ops_per_sec: f64, errors: u64) -> Throughput {
        Throughput {
            clients,
            connections: clients,
            ops: 0,
            seconds: 1.0,
            ops_per_sec,
            p50_ms: 0.0,
            p99_ms: 0.0,
            errors,
            first_error: (errors > 0).then(|| "boom".to_owned()),
            server_cores: 0.0,
            client_cores: 0.0,
            other_cores: 0.0,
        }
    }

    fn round(kore: f64, etcd: f64, errors: u64) -> CreatesRound {
        CreatesRound {
            kore_memory: vec![run(64, kore * 2.0, 0)],
            kore_durable: vec![run(64, kore, errors)],
            etcd: vec![run(64, etcd, 0)],
            etcd_runs: vec![run(64, etcd, 0)],
        }
    }

    #[test]
    fn the_median_round_of_each_level_keeps_every_rounds_errors() {
        let rounds = [
            round(30.0, 10.0, 0),
            round(10.0, 10.0, 1),
            round(20.0, 10.0, 0),
        ];
        let median = median_per_level(rounds.iter().map(|r| &r.kore_durable[..]));
        assert_eq!(median.len(), 1);
        assert_eq!(median[0].ops_per_sec, 20.0);
        assert_eq!(median[0].errors, 1);
        assert_eq!(median[0].first_error.as_deref(), Some("boom"));
    }

    #[test]
    fn the_durable_ratio_is_the_median_of_the_rounds_ratios() {
        // Ratios 3.0, 1.5 and 2.2: the median passes although one round missed.
        let rounds = vec![
            round(30.0, 10.0, 0),
            round(15.0, 10.0, 0),
            round(22.0, 10.0, 0),
        ];
        let (median, text) = ratio_over_rounds(&rounds, |r| &r.kore_durable, 64).expect("etcd ran");
        assert!((median - 2.2).abs() < 1e-9);
        assert_eq!(text, "2.20× (1.50–3.00, 3 runs)");
    }
}
