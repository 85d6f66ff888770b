//! What this binary is: its version, the commit it was built from, the compiler and the target
//! (set by `build.rs`), for `ampd --version` and the `ampd_build_info` metric.
//!
//! Owns: these constants. Must not touch: anything at run time.

/// The package version (`Cargo.toml`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit (12 hex digits), or `unknown` for a build outside a git checkout.
pub const COMMIT: &str = env!("AMPD_COMMIT");
/// `rustc --version` of the compiler that built this binary.
pub const RUSTC: &str = env!("AMPD_RUSTC");
/// The target triple, e.g. `x86_64-unknown-linux-gnu`.
pub const TARGET: &str = env!("AMPD_TARGET");

/// The compiler's version number alone: `1.85.0` of `rustc 1.85.0 (4d91de4e4 2025-02-17)`.
#[must_use]
pub fn rustc_version() -> &'static str {
    RUSTC
        .strip_prefix("rustc ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or(RUSTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_filled_in() {
        assert!(COMMIT == "unknown" || COMMIT.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(rustc_version().starts_with("1."), "{RUSTC}");
        assert!(TARGET.contains("linux"), "{TARGET}");
    }
}
