//! Build facts for `ampd --version` and the `ampd_build_info` metric: the git commit, the
//! compiler's version and the target, as `AMPD_COMMIT`, `AMPD_RUSTC`, `AMPD_TARGET`.
//!
//! A build from a tarball (no `.git`, or no `git`) says `unknown` for the commit, unless
//! `AMPD_COMMIT` is set in the environment (a packager who knows it). Cargo reruns this only
//! when HEAD moves or the environment override changes, not on every source edit.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=AMPD_COMMIT");
    let commit = std::env::var("AMPD_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=AMPD_COMMIT={}", commit.trim());

    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = output(Command::new(rustc).arg("--version"))
        .unwrap_or_else(|| "rustc (unknown version)".to_owned());
    println!("cargo:rustc-env=AMPD_RUSTC={version}");
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_owned());
    println!("cargo:rustc-env=AMPD_TARGET={target}");
}

/// The commit checked out, and a `rerun-if-changed` on the files that move with it.
fn git_commit() -> Option<String> {
    // Only this source tree's own repository: a tarball unpacked inside another checkout must
    // not report that checkout's commit.
    let top = output(Command::new("git").args(["rev-parse", "--show-toplevel"]))?;
    let here = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    if std::fs::canonicalize(top).ok()? != std::fs::canonicalize(here).ok()? {
        return None;
    }
    let commit = output(Command::new("git").args(["rev-parse", "--short=12", "HEAD"]))?;
    // HEAD itself (a checkout of another branch), the branch's ref (a commit on it) and
    // packed-refs (a `git gc`); paths as git reports them, so worktrees work too.
    for name in ["HEAD", "packed-refs"] {
        rerun_if_changed(&output(Command::new("git").args([
            "rev-parse",
            "--git-path",
            name,
        ])));
    }
    if let Some(branch) = output(Command::new("git").args(["symbolic-ref", "-q", "HEAD"])) {
        rerun_if_changed(&output(Command::new("git").args([
            "rev-parse",
            "--git-path",
            &branch,
        ])));
    }
    Some(commit)
}

fn rerun_if_changed(path: &Option<String>) {
    if let Some(path) = path {
        let path = PathBuf::from(path);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// A command's standard output, trimmed, if it ran and succeeded.
fn output(command: &mut Command) -> Option<String> {
    let output = command.output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}
