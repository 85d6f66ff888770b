//! When a proxied exchange goes wrong: a retry on the next server while that is safe, else
//! `502` (refused, reset, an invalid response) or `504` (a timeout) with an error-log line naming
//! the upstream and the cause; a response already under way is cut (the client sees the
//! connection close before the end of the body). Never a hang: every path releases the upstream
//! socket and leaves the connection in a state that ends.
//!
//! Owns: those decisions. Must not touch: sockets.

use super::relay::BodyRefused;
use super::{Proxy, Stage, Step};
use crate::config::Level;
use crate::conn::upstream::{Failure, Opened, Release};
use crate::conn::{Conn, Context, Ending, State};
use crate::log::error::Throttle;
use crate::response::Persistence;
use crate::upstream::Report;

/// One line per kind of upstream failure, however many requests meet it.
static UPSTREAM_FAILED: Throttle = Throttle::new();

impl Failure {
    fn describe(self) -> String {
        match self {
            Failure::Connect(kind) => format!("connect failed: {}", std::io::Error::from(kind)),
            Failure::OutOfDescriptors => {
                "no socket: out of file descriptors (RLIMIT_NOFILE)".to_owned()
            }
            Failure::Io(kind) => format!("connection failed: {}", std::io::Error::from(kind)),
            Failure::Closed => "closed the connection".to_owned(),
            Failure::TimedOut => "timed out".to_owned(),
        }
    }
}

impl Conn {
    /// The current attempt failed: try the next server, or answer.
    pub(in crate::conn) fn proxy_failed(
        &mut self,
        mut proxy: Box<Proxy>,
        failure: Failure,
        context: &mut Context<'_>,
    ) -> Step {
        let answering = matches!(proxy.stage, Stage::Body { .. } | Stage::Tunnel { .. });
        // A pooled connection the upstream closed while it sat idle, found out only now: the
        // request never reached an application, so it goes again on a fresh connection,
        // without counting against the server or the tries.
        let stale = self
            .link
            .as_ref()
            .is_some_and(|link| link.opened == Opened::Reused && link.received == 0)
            && matches!(failure, Failure::Closed | Failure::Io(_));
        self.drop_link(Release::Close);
        if answering {
            return self.cut_short(proxy, &failure.describe(), context);
        }
        if failure == Failure::OutOfDescriptors {
            // Neither the server's fault (it is not blamed) nor one another server would
            // escape: the caches let go of files for the requests after this one, which is
            // told to come back (`proxy_error` adds `Retry-After` to a 503).
            context.caches.relieve("upstream socket");
            return self.proxy_error(proxy, 503, &failure.describe(), context);
        }
        if !stale {
            proxy.report(Report::Failure);
        }
        // A CGI script is not started twice: it may have acted on the request.
        let resendable =
            proxy.idempotent && proxy.request.kept().is_some() && proxy.pool().is_some();
        if resendable && stale {
            proxy.tried.pop();
            proxy.reuse = false;
            proxy.pick = None;
            proxy.stage = Stage::Connect;
            return Step::Again(proxy);
        }
        let tries = proxy.pool().map_or(1, |pool| {
            let settings = pool.settings();
            (settings.tries as usize).min(settings.servers.len())
        });
        if resendable && proxy.tried.len() < tries {
            self.log_failure(&proxy, &failure.describe(), "trying the next server");
            proxy.pick = None;
            proxy.stage = Stage::Connect;
            return Step::Again(proxy);
        }
        let status = if failure == Failure::TimedOut {
            504
        } else {
            502
        };
        self.proxy_error(proxy, status, &failure.describe(), context)
    }

    /// The upstream's response head (or its `101`) is not valid HTTP/1.1: never passed on.
    pub(in crate::conn) fn invalid_response(
        &mut self,
        proxy: Box<Proxy>,
        why: &str,
        context: &mut Context<'_>,
    ) -> Step {
        proxy.report(Report::Failure);
        self.drop_link(Release::Close);
        self.proxy_error(proxy, 502, &format!("invalid response: {why}"), context)
    }

    /// Answer the client with `status` (nothing of a response has gone out), log why.
    pub(in crate::conn) fn proxy_error(
        &mut self,
        mut proxy: Box<Proxy>,
        status: u16,
        why: &str,
        context: &mut Context<'_>,
    ) -> Step {
        self.log_failure(&proxy, why, &status.to_string());
        self.drop_link(Release::Close);
        if !proxy.request.done() {
            // The client may still be sending the body this answer ends.
            proxy.exchange.persistence = Persistence::Close;
            self.linger = true;
        }
        let route = proxy.route.clone();
        // A `503` is an upstream that cannot take the request now (an application's
        // `FCGI_OVERLOADED`): a passing state, so the client may try again (RFC 9110 §15.6.4).
        let extra: &[(&str, &[u8])] = if status == 503 {
            &[("Retry-After", b"1")]
        } else {
            &[]
        };
        // An error page's request may need a job.
        self.answer(&proxy.exchange, Some(&route), status, extra, context)
            .map_or(Step::Over, Step::Job)
    }

    /// The response is under way and cannot be completed: send what is queued, then close, so
    /// the client sees a body shorter than announced (or a chunked body without its end).
    pub(in crate::conn) fn cut_short(
        &mut self,
        proxy: Box<Proxy>,
        why: &str,
        context: &mut Context<'_>,
    ) -> Step {
        self.log_failure(&proxy, why, "response cut short");
        self.drop_link(Release::Close);
        let (status, head_bytes, body_bytes) = match &proxy.stage {
            Stage::Body {
                relay,
                status,
                head_bytes,
                ..
            } => (*status, *head_bytes, relay.body_bytes),
            Stage::Tunnel {
                head_bytes, down, ..
            } => (101, *head_bytes, *down),
            _ => (502, 0, 0),
        };
        self.record_sizes(
            Some(&proxy.exchange),
            status,
            head_bytes,
            body_bytes,
            context,
        );
        self.state = State::Closing(if proxy.request.done() {
            Ending::Close
        } else {
            Ending::Linger
        });
        Step::Over
    }

    /// The client closed its side before sending the whole body: the request cannot be
    /// completed, so it gets `400` and the connection ends.
    pub(in crate::conn) fn client_gone(
        &mut self,
        mut proxy: Box<Proxy>,
        context: &mut Context<'_>,
    ) -> Step {
        self.drop_link(Release::Close);
        proxy.exchange.persistence = Persistence::Close;
        let route = proxy.route.clone();
        // The client has finished sending: the connection closes at once after this.
        self.answer(&proxy.exchange, Some(&route), 400, &[], context)
            .map_or(Step::Over, Step::Job)
    }

    /// The client closed its side while the response was awaited, with no request of its own
    /// waiting behind this one: nobody is left to answer (nginx's "client prematurely closed
    /// connection"), so the upstream connection is let go and the exchange logged as `499`.
    pub(in crate::conn) fn client_gave_up(
        &mut self,
        proxy: Box<Proxy>,
        context: &mut Context<'_>,
    ) -> Step {
        self.drop_link(Release::Close);
        self.record_sizes(Some(&proxy.exchange), 499, 0, 0, context);
        self.state = State::Closing(Ending::Close);
        Step::Over
    }

    /// The client's body cannot be forwarded (`400` broken chunking, `413` past the limit).
    pub(in crate::conn) fn body_refused(
        &mut self,
        mut proxy: Box<Proxy>,
        refused: BodyRefused,
        context: &mut Context<'_>,
    ) -> Step {
        self.drop_link(Release::Close);
        if matches!(proxy.stage, Stage::Body { .. }) {
            return self.cut_short(proxy, "the client's body was refused", context);
        }
        proxy.exchange.persistence = Persistence::Close;
        self.linger = true;
        let route = proxy.route.clone();
        self.answer(&proxy.exchange, Some(&route), refused.0, &[], context)
            .map_or(Step::Over, Step::Job)
    }

    fn log_failure(&self, proxy: &Proxy, why: &str, outcome: &str) {
        let server = proxy
            .pick
            .as_ref()
            .map_or_else(|| "-".to_owned(), |pick| pick.address().to_string());
        UPSTREAM_FAILED.log(
            Level::Error,
            format_args!(
                "upstream {} server {server} {why} for {} {} from {}: {outcome}",
                proxy.upstream_name(),
                proxy.exchange.head.method.as_str(),
                proxy.exchange.head.target.escape_debug(),
                self.peer
            ),
        );
    }
}
