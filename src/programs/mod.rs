//! Programs ampd runs to answer requests: CGI scripts, one per request (RFC 3875), and the
//! persistent FastCGI applications it starts, keeps and stops (Flash §5.6's persistent CGI).
//!
//! Owns: processes and what comes with them: finding a script below its directory, spawning
//! it with its meta-variables and the request's socket as stdin and stdout, its stderr in the
//! error log, its timeout and reaping (`cgi`); binding an application's socket, its processes,
//! restarting the ones that die, stopping them (`applications`).
//! Must not touch: HTTP (the exchange over the socket is `conn`'s), event loops (an engine
//! hands the launcher one end of a socket pair and drives the other), configuration parsing.

pub mod applications;
pub mod cgi;
mod lines;

use ampd_sys::signal::{SignalSet, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};

/// The signals the server handles (blocked in every thread and process; `ops::signals` says
/// what each means). Here, beside the other processes ampd starts, because every copy of ampd
/// the server starts (a helper process, the ACME manager, the new process of an upgrade)
/// begins with them blocked.
pub const HANDLED_SIGNALS: [i32; 6] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2];

/// [`HANDLED_SIGNALS`] as a set: the mask a copy of ampd begins with, so that one of them sent
/// before the copy has blocked them itself waits for its signalfd instead of killing it.
#[must_use]
pub fn handled_signals() -> SignalSet {
    SignalSet::of(&HANDLED_SIGNALS)
}
#[cfg(test)]
pub(crate) mod test_support;
