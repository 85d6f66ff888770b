//! `SIGHUP`: read the configuration file again and, if it is good, make it serve new requests.
//!
//! Owns: the reload decision. A bad file is rejected with its error in the error log and the
//! old generation keeps serving; a good one is installed for new requests (its persistent
//! applications applied first, so a request routed to a new one finds its socket), and no
//! connection is touched (requests in flight finish under the generation they started with). Settings
//! that only a restart can change (listeners, engine, threads, helpers and their mode, user,
//! pid file, cache sizes) keep their running values, with a warning for each one that differs.
//! Must not touch: connections, sockets.

use std::path::Path;

use super::notify::{monotonic_usec, notify};
use super::{applications, log_format, Control, Role};
use crate::config::{load_file, Config, Level, Listen};
use crate::log::error;
use crate::site::Generation;

/// Read `path` again and build the generation after `current` from it: restart-only settings
/// keep their running values. The `mp` master calls it to validate a reload before it passes
/// the reload on to its workers. `warn`: log each restart-only setting that differs, and the new
/// generation's warnings (once per server: not again in each worker).
///
/// # Errors
/// The file's error, or a document root that cannot be opened, as one line.
pub fn prepare(current: &Generation, path: &Path, warn: bool) -> Result<Generation, String> {
    let mut config = load_file(path).map_err(|error| error.to_string())?;
    let differ = keep_restart_only(&current.config, &mut config);
    if warn {
        for key in differ {
            error::log(
                Level::Warn,
                format_args!("reload: '{key}' changes only on restart; keeping the running value"),
            );
        }
    }
    let generation =
        Generation::build(config, current.number + 1).map_err(|error| error.to_string())?;
    if warn {
        for warning in &generation.warnings {
            error::log(Level::Warn, format_args!("reload: {warning}"));
        }
    }
    Ok(generation)
}

/// Reload from `path`. A worker (`Role::Worker`) reloads quietly: its master has checked the
/// file, counted the reload and told systemd.
pub fn reload(control: &Control, path: &Path) {
    let server = matches!(control.role, Role::Server);
    if server {
        notify(&format!("RELOADING=1\nMONOTONIC_USEC={}", monotonic_usec()));
    }
    let current = control.current();
    match prepare(&current, path, server) {
        Ok(generation) => {
            if let Err(failure) = error::configure(&generation.config.logs) {
                error::log(Level::Error, format_args!("reload: error log: {failure}"));
            }
            if generation.config.logs.access != current.config.logs.access {
                control
                    .access_log
                    .open(generation.config.logs.access.clone());
            }
            let number = generation.number;
            let format = log_format(&generation);
            if server {
                applications::reload(&generation.config.applications);
                crate::tls::acme::update(&generation.config);
            }
            control.install(generation);
            if server {
                control.stats.count_reload(true);
                reloaded(path, number, format.is_some());
            }
        }
        Err(failure) => {
            if server {
                control.stats.count_reload(false);
            }
            rejected(current.number, &failure);
        }
    }
    if server {
        notify("READY=1");
    }
}

/// The log line of a reload that took effect.
pub fn reloaded(path: &Path, number: u64, access_log: bool) {
    error::log(
        Level::Info,
        format_args!(
            "configuration reloaded from {} (generation {number}, access log {})",
            path.display(),
            if access_log { "on" } else { "off" }
        ),
    );
}

/// The log line of a reload that was refused.
pub fn rejected(number: u64, failure: &str) {
    error::log(
        Level::Error,
        format_args!("reload rejected, generation {number} keeps serving: {failure}"),
    );
}

/// Settings a running server cannot change: the new config keeps the running values. Returns
/// the keys that differed.
fn keep_restart_only(running: &Config, new: &mut Config) -> Vec<&'static str> {
    let mut differ = Vec::new();
    // The running entries are the addresses as bound: a file's port 0 is the same entry.
    let same_entry = |new: &Listen, running: &Listen| {
        new.tls == running.tls
            && new.address.ip() == running.address.ip()
            && (new.address.port() == running.address.port() || new.address.port() == 0)
    };
    // The `[::]` half of a `:PORT` entry is not bound on a machine without IPv6.
    let running_has = |entry: &Listen| {
        running
            .listen
            .iter()
            .any(|bound| bound.tls == entry.tls && bound.address.ip() == entry.address.ip())
    };
    let wanted: Vec<&Listen> = new
        .listen
        .iter()
        .filter(|entry| !entry.ipv6_half || running_has(entry))
        .collect();
    if wanted.len() != running.listen.len()
        || !wanted
            .iter()
            .zip(&running.listen)
            .all(|(new, running)| same_entry(new, running))
    {
        differ.push("listen");
    }
    new.listen.clone_from(&running.listen);
    if new.arch != running.arch {
        differ.push("arch");
        new.arch = running.arch;
    }
    if new.threads != running.threads {
        differ.push("threads");
        new.threads = running.threads;
    }
    if new.helpers != running.helpers {
        differ.push("helpers");
        new.helpers = running.helpers;
    }
    if new.helpers_max != running.helpers_max {
        differ.push("helpers_max");
        new.helpers_max = running.helpers_max;
    }
    if new.helper_mode != running.helper_mode {
        differ.push("helpers_mode");
        new.helper_mode = running.helper_mode;
    }
    if new.process.user != running.process.user || new.process.group != running.process.group {
        differ.push("user/group");
        new.process.user.clone_from(&running.process.user);
        new.process.group.clone_from(&running.process.group);
    }
    if new.process.pid_file != running.process.pid_file {
        differ.push("pid_file");
        new.process.pid_file.clone_from(&running.process.pid_file);
    }
    let (old_caches, new_caches) = (&running.caches, &new.caches);
    if (
        old_caches.path_cache,
        old_caches.header_cache,
        old_caches.file_cache,
    ) != (
        new_caches.path_cache,
        new_caches.header_cache,
        new_caches.file_cache,
    ) || (
        old_caches.path_cache_entries,
        old_caches.header_cache_entries,
        old_caches.file_cache_bytes,
        old_caches.compressed_size,
        old_caches.compressed_max_file,
    ) != (
        new_caches.path_cache_entries,
        new_caches.header_cache_entries,
        new_caches.file_cache_bytes,
        new_caches.compressed_size,
        new_caches.compressed_max_file,
    ) {
        differ.push("caches");
        new.caches = running.caches.clone();
    }
    differ
}
