//! The process around the server: the pid file, and giving up root after binding.
//!
//! Owns: the pid file's life (written after binding, removed on a graceful exit) and the
//! switch to `user`/`group`. Must not touch: sockets (they are bound before this runs).

use std::io;
use std::path::Path;

use crate::config::ProcessOptions;

/// Write our pid to `path` (`O_CREAT|O_TRUNC`, 0644).
///
/// # Errors
/// The file cannot be written.
pub fn write_pid_file(path: &Path) -> io::Result<()> {
    std::fs::write(path, format!("{}\n", std::process::id()))
}

/// Remove the pid file if it still holds our pid (a newer server may have replaced it).
pub fn remove_pid_file(path: &Path) {
    if let Ok(text) = std::fs::read_to_string(path) {
        if text.trim() == std::process::id().to_string() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Switch to the configured user and group. Nothing to do without `user`, nor when the process
/// runs as that user and group already (started by an upgrade from a server that had switched:
/// its sockets come bound); otherwise the process must be root (ports below 1024 are bound by
/// then).
///
/// # Errors
/// Not root, an unknown user or group, or the switch itself fails.
pub fn drop_privileges(options: &ProcessOptions) -> io::Result<()> {
    let Some(user) = &options.user else {
        return Ok(());
    };
    let (uid, primary_gid) = ampd_sys::process::user_ids(user)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no such user '{user}'")))?;
    let gid = match &options.group {
        Some(group) => ampd_sys::process::group_id(group)?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no such group '{group}'"))
        })?,
        None => primary_gid,
    };
    let euid = ampd_sys::process::effective_uid();
    if euid == uid && uid != 0 && ampd_sys::process::effective_gid() == gid {
        return Ok(());
    }
    if euid != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("user = \"{user}\" needs ampd to start as root"),
        ));
    }
    ampd_sys::process::drop_privileges(user, uid, gid)
}
