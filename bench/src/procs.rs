//! The processes under test, `kore apiserver` and `etcd`: started on loopback with a temporary
//! directory on the scratch file system, timed from `spawn` until they answer, measured (RSS,
//! CPU time) and stopped with SIGTERM.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tempfile::TempDir;

use crate::clients::{KoreTarget, probe_etcd_health, probe_readyz, probe_tls_config};

/// How long a process may take to become ready before the benchmark gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a process may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between two readiness probes. Small, so the measured start time is precise to a
/// fraction of a millisecond; a refused connection costs microseconds.
const PROBE_INTERVAL: Duration = Duration::from_micros(200);
/// Linux reports CPU times in /proc in units of USER_HZ, which is 100 on every architecture.
const USER_HZ: u64 = 100;

/// A free TCP port on 127.0.0.1 (bound and released; another process could take it in
/// between, which on a benchmark machine does not happen in practice).
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr().context("finding a free port")?.port())
}

/// A child process that is terminated when dropped.
pub(crate) struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    fn spawn(name: &str, command: &mut Command, log: PathBuf) -> anyhow::Result<Process> {
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().context("duplicating the log file")?;
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {name} ({:?})", command.get_program()))?;
        Ok(Process {
            name: name.to_owned(),
            child,
            log,
        })
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size (`VmRSS` of /proc/PID/status), in bytes.
    pub(crate) fn rss_bytes(&self) -> anyhow::Result<u64> {
        rss_bytes(self.pid())
    }

    /// CPU time used so far (user + system, all threads).
    pub(crate) fn cpu_time(&self) -> anyhow::Result<Duration> {
        cpu_time(&format!("/proc/{}/stat", self.pid()))
    }

    /// Calls `probe` until it succeeds and returns the time since `started`; fails if the
    /// process exits or `READY_TIMEOUT` passes.
    fn wait_ready(
        &mut self,
        started: Instant,
        mut probe: impl FnMut() -> bool,
    ) -> anyhow::Result<Duration> {
        loop {
            if probe() {
                return Ok(started.elapsed());
            }
            if let Some(status) = self.child.try_wait().context("checking the child")? {
                bail!(
                    "{} exited during startup ({status}); its log {} ends with:\n{}",
                    self.name,
                    self.log.display(),
                    self.log_tail()
                );
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!(
                    "{} was not ready within {READY_TIMEOUT:?}; its log {} ends with:\n{}",
                    self.name,
                    self.log.display(),
                    self.log_tail()
                );
            }
            std::thread::sleep(PROBE_INTERVAL);
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Sends SIGTERM and waits for the exit; kills the process if it takes too long.
    fn terminate(&mut self) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        // std offers only SIGKILL, and this crate has no unsafe code for libc::kill.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.child.kill()?;
        self.child.wait()?;
        bail!(
            "{} did not stop within {STOP_TIMEOUT:?} of SIGTERM and was killed",
            self.name
        )
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Err(e) = self.terminate() {
            eprintln!("warning: stopping {}: {e:#}", self.name);
        }
    }
}

/// `VmRSS` of a process, in bytes.
pub(crate) fn rss_bytes(pid: u32) -> anyhow::Result<u64> {
    status_bytes(pid, "VmRSS")
}

/// A size field of /proc/PID/status (`VmRSS`, `RssAnon`, `RssFile`…), in bytes.
pub(crate) fn status_bytes(pid: u32, field: &str) -> anyhow::Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .with_context(|| format!("no {field} in {path}"))?;
    Ok(kib * 1024)
}

/// User + system CPU time from a `/proc/…/stat` file.
pub(crate) fn cpu_time(path: &str) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    // The command name (field 2) is in parentheses and may contain spaces; fields after it
    // start at field 3, so utime (14) and stime (15) are at indexes 11 and 12.
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .with_context(|| format!("unexpected {path}"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .with_context(|| format!("unexpected {path}"))
    };
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_millis(total * 1000 / USER_HZ))
}

/// CPU time the whole machine spent busy so far (all CPUs: user, nice, system, irq, softirq,
/// steal), from the first line of /proc/stat.
pub(crate) fn machine_busy() -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("cpu "))
        .context("unexpected /proc/stat")?
        .split_whitespace()
        .map(|f| f.parse::<u64>().context("unexpected /proc/stat"))
        .collect::<anyhow::Result<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let busy: u64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .filter_map(|&i| fields.get(i))
        .sum();
    Ok(Duration::from_millis(busy * 1000 / USER_HZ))
}

/// Where kore keeps its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Storage {
    /// No `--data-dir`: everything in memory.
    Memory,
    /// `--data-dir` on the scratch file system: every acknowledged write is fsynced.
    Durable,
}

/// A running `kore apiserver`.
pub(crate) struct KoreServer {
    // Declared before `_dir`: the process stops before its directory is removed.
    process: Process,
    /// How to reach it.
    pub(crate) target: KoreTarget,
    /// Time from `spawn` to the first `200` from `/readyz`.
    pub(crate) ready_after: Duration,
    _dir: TempDir,
}

impl KoreServer {
    /// Starts `kore apiserver` on a free loopback port and waits until `/readyz` answers 200
    /// and the kubeconfig is written. Blocking.
    pub(crate) fn start(
        kore: &Path,
        scratch: &Path,
        storage: Storage,
    ) -> anyhow::Result<KoreServer> {
        let dir = tempfile::Builder::new()
            .prefix("kore-")
            .tempdir_in(scratch)
            .context("creating a directory for kore")?;
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let kubeconfig = dir.path().join("kubeconfig");
        let mut command = Command::new(kore);
        command
            .arg("apiserver")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env("RUST_LOG", "info");
        if storage == Storage::Durable {
            command.arg("--data-dir").arg(dir.path().join("data"));
        }
        let log = log_path(scratch, "kore", addr.port())?;
        let tls = probe_tls_config()?;
        let started = Instant::now();
        let mut process = Process::spawn("kore", &mut command, log)?;
        let ready_after = process.wait_ready(started, || probe_readyz(addr, &tls))?;
        // The kubeconfig is written right after the socket is bound, so it may trail /readyz.
        let deadline = Instant::now() + Duration::from_secs(10);
        let target = loop {
            match KoreTarget::from_kubeconfig(&kubeconfig) {
                Ok(target) => break target,
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        };
        Ok(KoreServer {
            process,
            target,
            ready_after,
            _dir: dir,
        })
    }

    /// The server process.
    pub(crate) fn process(&self) -> &Process {
        &self.process
    }

    /// Stops the server (SIGTERM) and removes its directory.
    pub(crate) fn stop(mut self) -> anyhow::Result<()> {
        self.process.terminate()
    }
}

/// A running single-member etcd.
pub(crate) struct EtcdServer {
    process: Process,
    /// Its client URL's address (gRPC and HTTP on one port).
    pub(crate) addr: SocketAddr,
    _dir: TempDir,
}

impl EtcdServer {
    /// Starts etcd with default durability settings on free loopback ports and waits until
    /// `/health` reports healthy. Blocking.
    pub(crate) fn start(etcd: &Path, scratch: &Path) -> anyhow::Result<EtcdServer> {
        let dir = tempfile::Builder::new()
            .prefix("etcd-")
            .tempdir_in(scratch)
            .context("creating a directory for etcd")?;
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let client_url = format!("http://{addr}");
        let peer_url = format!("http://127.0.0.1:{}", free_port()?);
        let mut command = Command::new(etcd);
        command
            .arg("--name=bench")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=bench={peer_url}"))
            .arg("--initial-cluster-state=new")
            .arg("--logger=zap")
            .arg("--log-level=warn");
        let log = log_path(scratch, "etcd", addr.port())?;
        let started = Instant::now();
        let mut process = Process::spawn("etcd", &mut command, log)?;
        process.wait_ready(started, || probe_etcd_health(addr))?;
        Ok(EtcdServer {
            process,
            addr,
            _dir: dir,
        })
    }

    /// The server process.
    pub(crate) fn process(&self) -> &Process {
        &self.process
    }

    /// Stops etcd (SIGTERM) and removes its directory.
    pub(crate) fn stop(mut self) -> anyhow::Result<()> {
        self.process.terminate()
    }
}

/// `etcd --version`'s first line, shortened to e.g. `etcd 3.4.23`.
pub(crate) fn etcd_version(etcd: &Path) -> anyhow::Result<String> {
    let output = Command::new(etcd)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", etcd.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text
        .lines()
        .next()
        .unwrap_or("etcd (unknown version)")
        .trim();
    Ok(line.replacen("etcd Version: ", "etcd ", 1))
}

fn log_path(scratch: &Path, name: &str, port: u16) -> anyhow::Result<PathBuf> {
    let dir = scratch.join("logs");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.join(format!("{name}-{port}.log")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_rss_and_cpu_time_are_readable() {
        let rss = rss_bytes(std::process::id()).expect("VmRSS");
        assert!(rss > 0);
        cpu_time("/proc/self/stat").expect("CPU time");
        machine_busy().expect("machine CPU time");
    }
}
