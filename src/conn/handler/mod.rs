//! The handler seam: what answers a request once the phases (`route.rs`) have chosen its
//! location and let it through. A handler is a type behind `Handler`: `start` takes the routed
//! request (`Routed`) and writes its answer through the connection's `Parts` or asks for a job;
//! a handler that holds its request waits in the connection's one `State::Handling` arm, asked
//! only what `Handler` asks. It also says which methods it takes (`methods`). A new handler is
//! one more file and one more line in `Conn::handle` (with its `config::Handler` variant).
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

pub(super) use static_files::Trying;
mod status;

use std::fmt::Debug;
use std::sync::Arc;

use ampd_http::request::Method;

use super::reply::Parts;
use super::{Conn, Context, Exchange, Job, Outcome, Pending, Phase, RedirectBase};
use crate::config::Handler as Kind;
use crate::content::job::JobDone;
use crate::content::path::CleanPath;
use crate::site::Route;

/// A handler: it takes a routed request, reaches the connection only through `Parts` and says
/// where the connection goes next by the `Outcome` it returns.
pub(super) trait Handler {
    /// Take a routed request: answer it, or hold it while a job runs (`Outcome::NeedJob` with
    /// what implements `Waiting`).
    fn start(routed: Routed, parts: &mut Parts<'_>, context: &mut Context<'_>) -> Outcome;
}

/// What the connection asks of a request held in `State::Handling` (by a handler, or by the
/// access phase while a password is checked).
pub(super) trait Waiting: Debug + Send + Held {
    /// A job finished while this handler held the connection. One that is not its own (a
    /// page-in is the engine's) leaves it waiting.
    fn job_done(
        self: Box<Self>,
        done: JobDone,
        parts: &mut Parts<'_>,
        context: &mut Context<'_>,
    ) -> Outcome {
        let _ = (done, parts, context);
        Outcome::Wait(self.held())
    }

    /// Whether reading more of the client's input is useful now.
    fn wants_input(&self) -> bool {
        false
    }

    /// Where the request is, for timeouts and the scoreboard (while no output is queued).
    fn phase(&self) -> Phase {
        Phase::Busy
    }

    /// The connection timed out while this handler held it; it closes after this.
    fn timed_out(self: Box<Self>, parts: &mut Parts<'_>, context: &mut Context<'_>) {
        let _ = (parts, context);
    }
}

/// A held request as the connection holds it (implemented for every sized `Waiting`).
pub(super) trait Held {
    fn held(self: Box<Self>) -> Box<dyn Waiting>;
}

impl<T: Waiting + 'static> Held for T {
    fn held(self: Box<Self>) -> Box<dyn Waiting> {
        self
    }
}

/// A request the phases let through, with what its handler needs.
#[derive(Debug)]
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
pub(super) fn methods(handler: &Kind, method: &Method) -> Methods {
    match handler {
        Kind::Static | Kind::Status | Kind::Health => match method {
            Method::Get | Method::Head => Methods::Take,
            Method::Options => Methods::Options(READ_ONLY),
            Method::Other(_) => Methods::NotImplemented,
            _ => Methods::NotAllowed(READ_ONLY),
        },
        Kind::Proxy(_) | Kind::FastCgi(_) | Kind::Cgi(_) => proxy::methods(method),
    }
}

impl Conn {
    /// Hand a routed request to its location's handler: the registry, one line per handler.
    pub(super) fn handle(&mut self, routed: Routed, context: &mut Context<'_>) -> Option<Job> {
        match &routed.route.settings.handler {
            Kind::Static => self.start::<Pending>(routed, context),
            Kind::Status => self.start::<status::Status>(routed, context),
            Kind::Health => self.start::<health::Health>(routed, context),
            Kind::Proxy(settings) => {
                let settings = settings.clone();
                self.serve_proxy(routed, settings, context)
            }
            Kind::FastCgi(settings) => {
                let settings = settings.clone();
                self.serve_fastcgi(routed, &settings, context)
            }
            Kind::Cgi(settings) => {
                let settings = settings.clone();
                self.serve_cgi(routed, settings)
            }
        }
    }

    /// Start handler `H` on a routed request and go where its outcome says.
    pub(super) fn start<H: Handler>(
        &mut self,
        routed: Routed,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let outcome = H::start(routed, &mut self.parts(), context);
        self.settle(outcome, context)
    }
}
