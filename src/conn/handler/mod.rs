//! The handler seam: what answers a request once the phases (`route.rs`) have chosen its
//! location and let it through. Every handler has the same shape: it takes the routed request
//! (`Routed`), writes its answer into the connection's output or asks for a job, and says which
//! methods it takes (`methods`), so a new handler (CGI, FastCGI) is one more file and one more
//! arm here.
//!
//! Owns: the dispatch from `config::Handler`, each handler's method rule. The handlers:
//! `static_files.rs` (the path cache, translation jobs, the static response), `status.rs`
//! (Prometheus metrics), `health.rs` (load balancers' check), `proxy/` (the exchange with an
//! upstream: the reverse proxy, FastCGI and CGI), `meta_variables.rs` (what CGI and FastCGI
//! programs are told of a request), `acme_challenge.rs` (ACME HTTP-01 answers, asked before
//! routing).
//! Must not touch: the phases before the handler (rewrite, rate, access, redirect), sockets.

pub(super) mod acme_challenge;
mod health;
mod meta_variables;
pub(super) mod proxy;
mod static_files;
mod status;

use std::sync::Arc;

use ampd_http::request::Method;

use super::{Conn, Context, Exchange, Job, RedirectBase};
use crate::config::Handler;
use crate::content::path::CleanPath;
use crate::site::Route;

/// A request the phases let through, with what its handler needs.
pub(super) struct Routed {
    pub exchange: Exchange,
    pub route: Arc<Route>,
    /// The decoded, normalised path it was routed by.
    pub clean: CleanPath,
    /// The path and query as sent, for a `301` to `path/` (and whether a rewrite changed it).
    pub redirect: RedirectBase,
}

/// What a handler does with a request's method (RFC 9110 §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Methods {
    /// It takes the request.
    Take,
    /// `OPTIONS` answered by ampd: `204` with `Allow`.
    Options(&'static [u8]),
    /// `405` with `Allow`.
    NotAllowed(&'static [u8]),
    /// An extension method no handler here knows: `501`.
    NotImplemented,
}

/// What a resource served by ampd itself allows (static files, status, health).
pub(super) const READ_ONLY: &[u8] = b"GET, HEAD, OPTIONS";

/// The method rule of `handler`.
pub(super) fn methods(handler: &Handler, method: &Method) -> Methods {
    match handler {
        Handler::Static | Handler::Status | Handler::Health => match method {
            Method::Get | Method::Head => Methods::Take,
            Method::Options => Methods::Options(READ_ONLY),
            Method::Other(_) => Methods::NotImplemented,
            _ => Methods::NotAllowed(READ_ONLY),
        },
        Handler::Proxy(_) | Handler::FastCgi(_) | Handler::Cgi(_) => proxy::methods(method),
    }
}

impl Conn {
    /// Hand a routed request to its location's handler.
    pub(super) fn handle(&mut self, routed: Routed, context: &mut Context<'_>) -> Option<Job> {
        match &routed.route.settings.handler {
            Handler::Static => self.serve_static(routed, context),
            Handler::Status => self.serve_status(&routed, context),
            Handler::Health => self.serve_health(&routed, context),
            Handler::Proxy(settings) => {
                let settings = settings.clone();
                self.serve_proxy(routed, settings, context)
            }
            Handler::FastCgi(settings) => {
                let settings = settings.clone();
                self.serve_fastcgi(routed, &settings, context)
            }
            Handler::Cgi(settings) => {
                let settings = settings.clone();
                self.serve_cgi(routed, settings)
            }
        }
    }
}
