//! `uring`: a proactor on io_uring (JAWS's asynchronous dispatch, AFPA's batching). Each ring
//! thread starts operations and reacts to their completions: a multishot accept, a multishot
//! receive per connection into provided buffers, plain output sent from the ring thread on the
//! nonblocking socket (memory by `sendmsg`, file data by `sendfile` once its pages are
//! resident; a poll for room when the socket is full: `proactor/send.rs`), TLS records by a
//! `writev` on the ring, and all submissions of a turn in one `io_uring_enter`. Path translation, small-file loads and page-ins go to helpers, as under
//! `amped`, so a slow disk holds up no ring.
//!
//! Owns: probing for io_uring (and the reason it is unavailable), starting one ring per
//! `SO_REUSEPORT` listener. Must not touch: HTTP (`conn`), the ring's memory rules
//! (`ampd_sys::uring`).
//! Sources: io_uring(7); JAWS §3.3 (proactor); AFPA §4 (batching).

mod proactor;

use std::io;
use std::sync::Arc;

use ampd_sys::errno;
use ampd_sys::uring::Ring;

use super::event_loop::PagesInFlight;
use super::listener::Listener;
use crate::content::budget::CacheBudget;
use crate::ops::Control;

/// Environment variable for tests and demonstrations: `EPERM` or `ENOSYS` installs a seccomp
/// filter that makes the kernel refuse `io_uring_setup` with that error before the probe, as a
/// container profile would; the probe and fallback below then run exactly as they would there.
pub const DENY_ENV: &str = "AMPD_TEST_DENY_IO_URING";

/// Whether io_uring can run the `uring` engine here: `Err` says why not, in one line.
///
/// # Errors
/// io_uring is missing (`ENOSYS`), forbidden (`EPERM`: `kernel.io_uring_disabled`, a seccomp
/// profile), or too old for what the engine uses (`EINVAL`).
pub fn probe() -> Result<(), String> {
    if let Ok(name) = std::env::var(DENY_ENV) {
        let errno = match name.as_str() {
            "EPERM" => errno::EPERM,
            "ENOSYS" => errno::ENOSYS,
            other => return Err(format!("{DENY_ENV}={other}: expected EPERM or ENOSYS")),
        };
        ampd_sys::seccomp::deny(ampd_sys::seccomp::SYS_io_uring_setup, errno)
            .map_err(|error| format!("cannot install the {DENY_ENV} filter: {error}"))?;
    }
    match Ring::new(
        proactor::RING_ENTRIES,
        proactor::BUFFER_COUNT,
        proactor::BUFFER_SIZE,
    ) {
        Ok(_) => Ok(()),
        Err(error) => Err(explain(&error)),
    }
}

fn explain(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(errno::EPERM) => {
            let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
                .map(|text| text.trim().to_owned())
                .unwrap_or_default();
            if !disabled.is_empty() && disabled != "0" {
                format!("EPERM: kernel.io_uring_disabled = {disabled}")
            } else {
                "EPERM: refused by a seccomp profile (containers often forbid io_uring)".to_owned()
            }
        }
        Some(errno::ENOSYS) => "ENOSYS: this kernel has no io_uring".to_owned(),
        Some(errno::EINVAL) => {
            "EINVAL: kernel too old (multishot receive and buffer rings need Linux 6.0)".to_owned()
        }
        _ => error.to_string(),
    }
}

/// One ring per listener set, each on a thread of its own (the last on the main thread), each
/// joining `control` as an event loop does.
///
/// # Errors
/// A ring cannot be set up (after the probe succeeded: out of memory or locked memory).
pub fn run(control: &Arc<Control>, mut sets: Vec<Vec<Listener>>) -> io::Result<()> {
    let rings = sets.len();
    let budget = CacheBudget::of(&control.current().config, rings, rings);
    let last = sets.pop().expect("at least one listener set");
    // One table for all rings: a file one ring's helper is reading in is not resident for
    // another ring's `sendfile` either.
    let pages_in_flight = Arc::new(PagesInFlight::default());
    let mut handles = Vec::new();
    for (index, listeners) in sets.into_iter().enumerate() {
        let control = control.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("uring-{index}"))
                .spawn({
                    let budget = budget.clone();
                    let pages_in_flight = pages_in_flight.clone();
                    move || {
                        let name = format!("uring-{index}");
                        proactor::run(name, control, listeners, &budget, pages_in_flight)
                    }
                })?,
        );
    }
    let index = handles.len();
    let name = format!("uring-{index}");
    proactor::run(name, control.clone(), last, &budget, pages_in_flight)?;
    for handle in handles {
        handle
            .join()
            .map_err(|_| io::Error::other("a ring thread panicked"))??;
    }
    Ok(())
}
