//! AFPA's deferred response: the upstream decides what to send and hands the sending back to
//! ampd's static path (its caches, `sendfile`, ranges and conditional requests). With
//! `X-Accel-Redirect: /path` (nginx) the request is routed again inside ampd, where `internal`
//! locations answer it; with `X-Sendfile: /file/system/path` (Apache, lighttpd), a file below
//! the location's `x_sendfile_root` is served, and anything outside it is refused.
//!
//! Owns: recognising the instruction and re-dispatching the request. Must not touch: sockets,
//! how files are served (`route.rs` and `content`).

use ampd_http::request::{split_target, BodyFraming, Method};
use ampd_http::upstream::{ResponseBody, ResponseHead};

use super::{Proxy, Step};
use crate::conn::handler::Routed;
use crate::conn::upstream::Release;
use crate::conn::{Conn, Context, Exchange, Pending, RedirectBase, State};
use crate::content::path::{self, PathOptions};
use crate::response::Persistence;
use crate::site::Route;
use crate::upstream::Report;
use std::sync::Arc;

/// Paths named by `X-Sendfile` are judged like request paths, dot-files included: the
/// upstream chose the file; confinement to the root is what matters.
const SENDFILE_PATHS: PathOptions = PathOptions {
    allow_dotfiles: true,
    userdir: false,
};

impl Conn {
    /// The exchange is over upstream and the request is ampd's again, as a `GET` (or `HEAD`)
    /// without a body: release the upstream socket as `release` says.
    pub(super) fn hand_back(
        &mut self,
        proxy: Box<Proxy>,
        release: Release,
    ) -> (Exchange, Arc<Route>) {
        let (mut exchange, route, _) = self.take_back_exchange(proxy, release);
        if exchange.head.method != Method::Head {
            exchange.head.method = Method::Get;
        }
        exchange.head.body = BodyFraming::None;
        (exchange, route)
    }

    /// Ends the exchange upstream (the socket released as `release` says) and takes the
    /// request back for ampd to answer (a hand-back, an intercepted error): the connection
    /// reads heads again, and ends after the answer if the client's body was not read whole.
    /// Returns whether it was.
    pub(super) fn take_back_exchange(
        &mut self,
        proxy: Box<Proxy>,
        release: Release,
    ) -> (Exchange, Arc<Route>, bool) {
        self.drop_link(release);
        let request_done = proxy.request.done();
        let Proxy {
            mut exchange,
            route,
            ..
        } = *proxy;
        if !request_done {
            // The rest of the client's body is never read: the connection ends after this.
            exchange.persistence = Persistence::Close;
        }
        self.state = State::ReadingHead;
        (exchange, route, request_done)
    }

    /// If the upstream's `head` hands the response back to ampd, serve it here; otherwise give
    /// the exchange back untouched.
    pub(in crate::conn) fn deferred(
        &mut self,
        proxy: Box<Proxy>,
        head: &ResponseHead,
        body: &ResponseBody,
        context: &mut Context<'_>,
    ) -> Result<Step, Box<Proxy>> {
        // An error the location intercepts comes first, as in nginx.
        let proxy = match self.intercept(proxy, head, body, context) {
            Ok(answered) => return Ok(answered),
            Err(proxy) => proxy,
        };
        let (x_accel_redirect, x_sendfile_root) = proxy.handback();
        let accel = x_accel_redirect
            .then(|| head.header("x-accel-redirect"))
            .flatten()
            .map(<[u8]>::to_vec);
        let sendfile = x_sendfile_root.and_then(|root| {
            head.header("x-sendfile")
                .map(|value| (root.clone(), value.to_vec()))
        });
        if accel.is_none() && sendfile.is_none() {
            return Err(proxy);
        }
        proxy.report(Report::Success);
        // The upstream's own body is not wanted: an HTTP connection is kept only if there is
        // none (a FastCGI or CGI one is closed: its output would have to be read to its end).
        let empty = matches!(body, ResponseBody::None | ResponseBody::Length(0));
        let reusable = empty
            && head.keep_alive
            && matches!(proxy.backend, super::Backend::Http { .. })
            && proxy.request.done()
            && self
                .link
                .as_ref()
                .is_some_and(|link| link.input.is_empty() && !link.finished);
        let release = proxy.release(reusable);
        let (exchange, route) = self.hand_back(proxy, release);
        if let Some(target) = accel {
            let target = match String::from_utf8(target) {
                Ok(target) if target.starts_with('/') => target,
                _ => {
                    let job = self.answer(&exchange, Some(&route), 502, &[], context);
                    return Ok(job.map_or(Step::Over, Step::Job));
                }
            };
            let job = self.route_again(exchange, &route, target, true, context);
            return Ok(job.map_or(Step::Over, Step::Job));
        }
        let (root, file) = sendfile.expect("one of the two is set");
        let below_root = std::str::from_utf8(&file)
            .ok()
            .and_then(|file| std::path::Path::new(file).strip_prefix(&root).ok())
            .and_then(|relative| relative.to_str())
            .and_then(|relative| path::normalize(&format!("/{relative}"), &SENDFILE_PATHS).ok());
        let Some(clean) = below_root else {
            static OUTSIDE: crate::log::error::Throttle = crate::log::error::Throttle::new();
            OUTSIDE.log(
                crate::config::Level::Error,
                format_args!(
                    "X-Sendfile {} is not below x_sendfile_root {}",
                    String::from_utf8_lossy(&file).escape_debug(),
                    root.display()
                ),
            );
            let job = self.answer(&exchange, Some(&route), 502, &[], context);
            return Ok(job.map_or(Step::Over, Step::Job));
        };
        let (raw_path, query) = match split_target(&exchange.head.target) {
            Some((_, raw_path, query)) => (raw_path.to_owned(), query.map(str::to_owned)),
            None => ("/".to_owned(), None),
        };
        let redirect = RedirectBase {
            path: raw_path,
            query,
            rewritten: false,
        };
        Ok(self
            .start::<Pending>(
                Routed {
                    exchange,
                    route,
                    clean,
                    redirect,
                },
                context,
            )
            .map_or(Step::Over, Step::Job))
    }
}
