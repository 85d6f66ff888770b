//! Writing a response that is not a file, and accounting for every response: the access log
//! line and the scoreboard counters (one of each per response, whatever wrote it).
//!
//! Owns: the `ResponseContext` a request is answered under (its location's headers, cache
//! headers, `Date`, persistence), status pages and small text bodies, and `record`.
//! Must not touch: routing decisions (`route.rs`).

use std::time::Duration;

use ampd_http::request::Method;

use super::answer_as::AnswerAs;
use super::output::Mark;
use std::net::IpAddr;

use super::output::Output;
use super::{Conn, Context, Exchange, Job, Outcome};
use crate::config::Level;
use crate::content::sink::{ResponseContext, Sink};
use crate::log::access::{Entry, TlsEntry};
use crate::log::error::Throttle;
use crate::response::{common_fields, status_page, HeadContext, Http1Framing, Persistence};
use crate::site::Route;
use crate::tls::TlsInfo;

/// The facts a response is written under: `success` adds the location's cache headers (they
/// belong on `2xx`/`304` only); `secure` (a TLS connection) its site's HSTS.
pub(super) fn response_context<'a>(
    context: &Context<'a>,
    persistence: Persistence,
    route: Option<&'a Route>,
    secure: bool,
) -> ResponseContext<'a> {
    let settings = route.map(|route| &route.settings);
    ResponseContext {
        head: HeadContext {
            date: context.clock.date(),
            persistence,
            extra_headers: route.map_or(&[][..], |route| &route.extra_headers),
            strict_transport_security: match route {
                Some(route) if secure => &route.strict_transport_security,
                _ => &[],
            },
            cache_control: settings.and_then(|settings| settings.cache_control.as_deref()),
            expires: settings
                .and_then(|settings| settings.expires)
                .map(|ttl| (context.clock.unix() + ttl.as_secs(), ttl.as_secs())),
        },
        disk: context.disk,
        residency_test: context.config.caches.residency_test,
        sendfile_threshold: context.config.send.sendfile_threshold,
        max_ranges: context.config.limits.max_ranges,
    }
}

/// The parts of a connection a handler writes its answer with: the output queue, and what the
/// access log and a status page's `Strict-Transport-Security` need to know of the connection.
/// A handler gets these, not the whole `Conn`: where the connection goes next is `settle`'s.
pub(in crate::conn) struct Parts<'c> {
    pub output: &'c mut Output,
    /// Accepted on a TLS listener.
    pub secure: bool,
    pub peer: IpAddr,
    pub tls: Option<&'c TlsInfo>,
}

impl Conn {
    /// The parts a handler answers with (`Parts`).
    pub(super) fn parts(&mut self) -> Parts<'_> {
        Parts {
            output: &mut self.output,
            secure: self.secure,
            peer: self.peer,
            tls: self.tls.as_deref(),
        }
    }

    /// Answer `exchange` (or, with `None`, bytes that never became a request) with a status
    /// page, and account for it.
    pub(super) fn reply_to(
        &mut self,
        exchange: Option<&Exchange>,
        status: u16,
        persistence: Persistence,
        extra: &[(&str, &[u8])],
        context: &mut Context<'_>,
    ) {
        // A timeout or a refusal ends the connection: it is answered as it is, never by an
        // error page (nor with the status of one still being served).
        self.output.set_answer_as(None);
        self.answer_status(exchange, None, status, persistence, extra, context);
    }

    /// `Parts::answer_status` on this connection.
    pub(super) fn answer_status(
        &mut self,
        exchange: Option<&Exchange>,
        route: Option<&Route>,
        status: u16,
        persistence: Persistence,
        extra: &[(&str, &[u8])],
        context: &mut Context<'_>,
    ) {
        self.parts()
            .answer_status(exchange, route, status, persistence, extra, context);
    }

    /// Answer with a status page and go on per the exchange's persistence.
    pub(super) fn answer(
        &mut self,
        exchange: &Exchange,
        route: Option<&Route>,
        status: u16,
        extra: &[(&str, &[u8])],
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let outcome = self.parts().answer(exchange, route, status, extra, context);
        self.settle(outcome, context)
    }

    /// `Parts::record` on this connection.
    pub(super) fn record(
        &mut self,
        exchange: Option<&Exchange>,
        status: u16,
        mark: Mark,
        context: &mut Context<'_>,
    ) {
        self.parts().record(exchange, status, mark, context);
    }

    /// `Parts::record_sizes` on this connection.
    pub(super) fn record_sizes(
        &mut self,
        exchange: Option<&Exchange>,
        status: u16,
        head: u64,
        body: u64,
        context: &mut Context<'_>,
    ) {
        self.parts()
            .record_sizes(exchange, status, head, body, context);
    }
}

impl Parts<'_> {
    /// Answer with the built-in status page; the outcome goes on per the exchange's
    /// persistence.
    pub(in crate::conn) fn answer_built_in(
        &mut self,
        exchange: &Exchange,
        route: Option<&Route>,
        status: u16,
        extra: &[(&str, &[u8])],
        context: &mut Context<'_>,
    ) -> Outcome {
        // A body left unread (a proxy location answering before forwarding it) may still be
        // arriving: the connection ends after this answer, lingering.
        if exchange.body.is_some() {
            let persistence = Persistence::Close;
            self.answer_status(Some(exchange), route, status, persistence, extra, context);
            return Outcome::RespondedUnread;
        }
        let persistence = exchange.persistence;
        self.answer_status(Some(exchange), route, status, persistence, extra, context);
        Outcome::Responded(persistence)
    }

    /// Write a status page for `exchange` under `route`'s added headers, and account for it:
    /// the one place every status page passes through (errors, redirects to `path/`, `204` to
    /// `OPTIONS`, `408`, `412`, `416`), whatever decided on it (`reply_to`, `answer`, the
    /// static handler's `StatusAnswer`), so what applies to all of them is done here once.
    pub(in crate::conn) fn answer_status(
        &mut self,
        exchange: Option<&Exchange>,
        route: Option<&Route>,
        status: u16,
        persistence: Persistence,
        extra: &[(&str, &[u8])],
        context: &mut Context<'_>,
    ) {
        let mark = self.output.mark();
        self.output
            .set_header_rules(route.and_then(|route| route.header_rules.as_ref()));
        let with_body = exchange.is_none_or(|exchange| exchange.head.method != Method::Head);
        {
            let mut response = response_context(context, persistence, None, false);
            response.head.extra_headers = route.map_or(&[][..], |route| &route.extra_headers);
            response.head.strict_transport_security =
                self.strict_transport_security(exchange, route, context);
            let head = self.output.begin_head(status);
            let page = status_page::fill(head, status, &response.head, extra);
            self.output.end_head(Http1Framing::delimited(persistence));
            if let (Some(page), true) = (page, with_body) {
                self.output.bytes().extend_from_slice(page.as_bytes());
            }
        }
        self.record(exchange, status, mark, context);
    }

    /// The `Strict-Transport-Security` line of a status page: its site's, over TLS only. An
    /// answer given before a location was found (`405`, `OPTIONS`, `413`) finds the site by
    /// `Host`, as routing would.
    fn strict_transport_security<'a>(
        &self,
        exchange: Option<&Exchange>,
        route: Option<&'a Route>,
        context: &Context<'a>,
    ) -> &'a [u8] {
        if !self.secure {
            return &[];
        }
        let sites = context.sites;
        let route = route.or_else(|| {
            let host = exchange?.head.host().map(str::as_bytes);
            Some(&**sites.route(host, "/"))
        });
        route.map_or(&[], |route| &route.strict_transport_security)
    }

    /// Answer with a body made here (metrics, health); the caller settles the connection.
    pub(in crate::conn) fn answer_text(
        &mut self,
        exchange: &Exchange,
        route: &Route,
        status: u16,
        content_type: &[u8],
        body: &[u8],
        context: &mut Context<'_>,
    ) {
        let persistence = exchange.persistence;
        let fields: &[(&str, &[u8])] = &[("Cache-Control", b"no-store")];
        let body = (content_type, body);
        self.write_body(exchange, route, status, persistence, fields, body, context);
    }

    /// Answer with a body the configuration gives (`return`), and `fields`; the outcome goes
    /// on per the exchange's persistence, as `answer`'s.
    pub(in crate::conn) fn answer_body(
        &mut self,
        exchange: &Exchange,
        route: &Route,
        status: u16,
        fields: &[(&str, &[u8])],
        body: (&[u8], &[u8]),
        context: &mut Context<'_>,
    ) -> Outcome {
        // A body left unread (a location of a proxied site) may still be arriving.
        let unread = exchange.body.is_some();
        let persistence = if unread {
            Persistence::Close
        } else {
            exchange.persistence
        };
        self.write_body(exchange, route, status, persistence, fields, body, context);
        if unread {
            Outcome::RespondedUnread
        } else {
            Outcome::Responded(persistence)
        }
    }

    /// Write a response with `body` (its content type, its bytes; none for `HEAD`) and
    /// `fields` under `route`'s headers, and account for it.
    #[allow(clippy::too_many_arguments)]
    fn write_body(
        &mut self,
        exchange: &Exchange,
        route: &Route,
        status: u16,
        persistence: Persistence,
        fields: &[(&str, &[u8])],
        (content_type, body): (&[u8], &[u8]),
        context: &mut Context<'_>,
    ) {
        let mark = self.output.mark();
        self.output.set_header_rules(route.header_rules.as_ref());
        {
            let mut response = response_context(context, persistence, Some(route), self.secure);
            if !(200..300).contains(&status) {
                // The location's cache headers belong on successes only.
                response.head.cache_control = None;
                response.head.expires = None;
            }
            let head = self.output.begin_head(status);
            common_fields(head, &response.head);
            head.push("Content-Type", content_type);
            for (name, value) in fields {
                head.push(name, value);
            }
            head.push_decimal("Content-Length", body.len() as u64);
            self.output.end_head(Http1Framing::delimited(persistence));
            if exchange.head.method != Method::Head {
                self.output.bytes().extend_from_slice(body);
            }
        }
        self.record(Some(exchange), status, mark, context);
    }

    /// Count the response written since `mark` and log it (head and body sizes as the output
    /// queue counted them).
    pub(in crate::conn) fn record(
        &mut self,
        exchange: Option<&Exchange>,
        status: u16,
        mark: Mark,
        context: &mut Context<'_>,
    ) {
        // Heads are counted as they are queued: no search for where one ends.
        let (head, body) = self.output.written_since(mark);
        self.record_sizes(exchange, status, head, body, context);
    }

    /// Count and log a response of `head` + `body` bytes (a streamed one, counted as it went).
    pub(in crate::conn) fn record_sizes(
        &mut self,
        exchange: Option<&Exchange>,
        status: u16,
        head: u64,
        body: u64,
        context: &mut Context<'_>,
    ) {
        let latency = exchange.map_or(Duration::ZERO, |exchange| exchange.started.elapsed());
        // An error page's response: the status sent, for the client's request.
        let answer_as = self.output.answer_as();
        let status = answer_as.map_or(status, |answer_as| answer_as.logged(status));
        context.stats.response(status, head + body, latency);
        if status == 500 {
            // The server's own failure: worth a line, but not one per request of a flood.
            static INTERNAL: Throttle = Throttle::new();
            let (method, target) = exchange.map_or(("-", "-"), |exchange| {
                (exchange.head.method.as_str(), &exchange.head.target[..])
            });
            INTERNAL.log(
                Level::Error,
                format_args!(
                    "500 Internal Server Error for {method} {} from {}",
                    target.escape_debug(),
                    self.peer
                ),
            );
        }
        if !context.log.enabled() {
            return;
        }
        let header = |name: &str| exchange.and_then(|exchange| exchange.head.header(name));
        let entry = Entry {
            peer: self.peer,
            user: exchange.and_then(|exchange| exchange.user.as_deref()),
            request: exchange.map(|exchange| {
                let (method, target) = answer_as.map_or(
                    (&exchange.head.method, &*exchange.head.target),
                    AnswerAs::request,
                );
                (
                    method.as_str().as_bytes(),
                    target.as_bytes(),
                    exchange.head.version.as_str(),
                )
            }),
            status,
            body_bytes: body,
            referer: header("referer"),
            user_agent: header("user-agent"),
            host: header("host"),
            duration: latency,
            tls: self.tls.map(|tls| TlsEntry {
                protocol: tls.protocol,
                cipher: tls.cipher,
                client_subject: tls.client.as_ref().map(|client| client.subject.as_str()),
            }),
        };
        context.log.record(&entry, context.clock);
    }
}
