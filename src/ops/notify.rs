//! systemd readiness notification (sd_notify(3)): `READY=1` once serving, `RELOADING=1` while
//! a reload runs, `STOPPING=1` when draining. A datagram to `$NOTIFY_SOCKET`, nothing when the
//! variable is unset (not run by systemd), so callers need not check.
//!
//! Owns: the socket address and the message format. Must not touch: anything else.

use std::os::unix::net::UnixDatagram;

/// Send `state` (lines like `READY=1`) to systemd, if it is listening.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(socket) = UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    // A leading '@' names a socket in the abstract namespace.
    let _ = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        match std::os::unix::net::SocketAddr::from_abstract_name(name) {
            Ok(address) => socket.send_to_addr(state.as_bytes(), &address),
            Err(error) => Err(error),
        }
    } else {
        socket.send_to(state.as_bytes(), path)
    };
}

/// `MONOTONIC_USEC=…` for `RELOADING=1` (systemd ≥ 253 wants it with `Type=notify-reload`).
#[must_use]
pub fn monotonic_usec() -> u64 {
    ampd_sys::process::monotonic_micros()
}
