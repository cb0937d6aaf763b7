//! Who may talk to the server: transport security, the admin credential and the kubeconfig that
//! carries both to clients (spec §15).
//!
//! - [`tls`]: the CA and the serving certificate it signs, kept in a data directory or in memory.
//! - [`token`]: the admin bearer token and the `Authorization` header parser.
//! - [`x509`]: who a client certificate speaks for (user from the CN, groups from the O values),
//!   checked against kore's CA and the client CA bundle.
//! - [`csr`]: signing CertificateSigningRequests with the CA under the built-in signers' rules.
//! - [`authenticate`]: who a bearer token (the admin token or a ServiceAccount JWT) speaks for,
//!   shared by the HTTP middleware and the TokenReview resource.
//! - [`kubeconfig`]: the kubeconfig handed out to kubectl, client-go, kube-rs and Python clients.
//! - [`sa_token`]: the key that signs ServiceAccount tokens (JWTs) and checks presented ones.
//! - [`rbac`]: request attributes, rule matching and the RBAC index that decides requests.
//! - [`policy`]: the default cluster policy created at startup.
//! - [`audit`]: a tally of RBAC decisions per user and permission, for tests that prove least
//!   privilege.
//! - [`escalation`]: which permissions a Role or binding would grant that its writer lacks.
//!
//! The HTTP middleware that applies all this to requests is `http/authz.rs`. Secret files are written with mode 0600 through
//! a temporary file and a rename, so a crash never leaves a half-written key behind.

pub(crate) mod aggregation;
pub mod audit;
pub mod authenticate;
pub mod csr;
pub mod escalation;
pub mod kubeconfig;
pub mod policy;
pub mod rbac;
pub mod sa_token;
pub mod tls;
pub mod token;
pub mod x509;

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Mode of files only the server's user may read: keys, tokens, kubeconfigs.
const PRIVATE_MODE: u32 = 0o600;

/// Mode of files anyone may read: certificates.
const PUBLIC_MODE: u32 = 0o644;

/// Writes `contents` to `path` atomically: into a temporary file next to it (created with `mode`
/// on Unix), flushed to disk, then renamed over `path`. Creates missing parent directories.
fn write_file_atomically(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    fs::create_dir_all(dir)?;
    let temp = dir.join(format!(
        ".{}.{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
    ));
    let written = write_new_file(&temp, contents, mode).and_then(|()| fs::rename(&temp, path));
    if written.is_err() {
        // Best effort: the temporary file is garbage either way.
        let _ = fs::remove_file(&temp);
        return written;
    }
    // Make the rename itself durable. Some filesystems refuse to sync directories; the file's
    // contents are already on disk, so that is not worth failing over.
    #[cfg(unix)]
    if let Ok(dir) = fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Creates `path` (which must not exist) with `mode`, writes `contents` and syncs it.
fn write_new_file(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Reads `path`, or `None` if it does not exist.
fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}
