//! `kore manifests`: writes `deploy/` from the operators' Rust descriptions, or checks that
//! it is in step with them.
//!
//! A file is ours when it starts with [`HEADER`]: writing removes such files that are no
//! longer generated, and `--check` reports them as stale. Other files (the Dockerfile) are
//! left alone.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use kore_operator::manifests::{self, DeployConfig, File, HEADER};

/// Options of `kore manifests`.
#[derive(Args, Clone)]
pub(crate) struct ManifestsArgs {
    /// The directory to write (or check).
    #[arg(long, default_value = "deploy")]
    out: PathBuf,
    /// Write nothing; fail listing the files that differ, are missing or are stale.
    #[arg(long)]
    check: bool,
    /// The operators' container image (default: ghcr.io/kore-dev/kore:VERSION, this build's version).
    #[arg(long)]
    image: Option<String>,
    /// The operators' namespace.
    #[arg(long, default_value = manifests::DEFAULT_NAMESPACE)]
    namespace: String,
}

/// How the directory differs from what is generated.
#[derive(Debug, Default, PartialEq, Eq)]
struct Drift {
    changed: Vec<String>,
    missing: Vec<String>,
    stale: Vec<String>,
}

impl Drift {
    fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.missing.is_empty() && self.stale.is_empty()
    }
}

/// Runs `kore manifests`.
pub(crate) fn manifests(args: &ManifestsArgs) -> anyhow::Result<()> {
    let mut config = DeployConfig::default().namespace(&args.namespace);
    if let Some(image) = &args.image {
        config = config.image(image);
    }
    let files = manifests::files(&crate::operators::all(), &config)?;
    let drift = drift(&args.out, &files)?;
    let out = args.out.display();
    if args.check {
        if drift.is_empty() {
            println!(
                "{out} is in step with the operators ({} files)",
                files.len()
            );
            return Ok(());
        }
        let mut report = format!("{out} differs from what `kore manifests` generates:");
        for (label, paths) in [
            ("changed", &drift.changed),
            ("missing", &drift.missing),
            ("stale", &drift.stale),
        ] {
            for path in paths {
                report.push_str(&format!("\n  {label}: {out}/{path}"));
            }
        }
        report.push_str(
            "\nrun `kore manifests` (cargo run -p kore-cli -- manifests) and commit the result",
        );
        anyhow::bail!(report);
    }
    for file in &files {
        if drift.changed.contains(&file.path) || drift.missing.contains(&file.path) {
            let path = args.out.join(&file.path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            std::fs::write(&path, &file.contents)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    for stale in &drift.stale {
        let path = args.out.join(stale);
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    println!(
        "{out}: {} files, {} written, {} removed",
        files.len(),
        drift.changed.len() + drift.missing.len(),
        drift.stale.len()
    );
    Ok(())
}

/// Compares `dir` with `files`.
fn drift(dir: &Path, files: &[File]) -> anyhow::Result<Drift> {
    let mut drift = Drift::default();
    for file in files {
        match std::fs::read(dir.join(&file.path)) {
            Ok(bytes) if bytes == file.contents.as_bytes() => {}
            Ok(_) => drift.changed.push(file.path.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                drift.missing.push(file.path.clone());
            }
            Err(e) => return Err(e).with_context(|| format!("reading {}", file.path)),
        }
    }
    let mut present = Vec::new();
    ours(dir, "", &mut present)?;
    drift.stale = present
        .into_iter()
        .filter(|p| !files.iter().any(|f| &f.path == p))
        .collect();
    drift.stale.sort();
    Ok(drift)
}

/// The generated files below `dir` (those starting with [`HEADER`]), as relative paths.
fn ours(dir: &Path, prefix: &str, out: &mut Vec<String>) -> anyhow::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = format!("{prefix}{name}");
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            ours(&path, &format!("{relative}/"), out)?;
        } else if std::fs::read(&path)
            .map(|b| b.starts_with(HEADER.as_bytes()))
            .unwrap_or(false)
        {
            out.push(relative);
        }
    }
    Ok(())
}
