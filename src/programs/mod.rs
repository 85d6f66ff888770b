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
#[cfg(test)]
pub(crate) mod test_support;
