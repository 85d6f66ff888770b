//! `intercept_errors` (nginx `proxy_intercept_errors`, `fastcgi_intercept_errors`): an
//! upstream's, FastCGI application's or CGI script's response whose status the location's
//! `error_pages` lists is not passed on; its body is never read or sent, and the upstream
//! connection is closed unless nothing of the response is left on it (an HTTP upstream's
//! response without a body, which leaves it reusable). The request is answered by the error
//! page instead, with the upstream's status and the fields that status needs.
//!
//! Owns: recognising such a response and handing the request to the error pages. Must not
//! touch: what an error page is (`conn::error_pages`), sockets.

use ampd_http::upstream::{ResponseBody, ResponseHead};

use super::{Backend, Proxy, Step};
use crate::conn::{Conn, Context};
use crate::upstream::Report;

/// The upstream's fields a status needs, kept on the page's response (RFC 9110 §10.2.3
/// `Retry-After`, §10.2.1 `Allow` of a `405`, §11.6.1 `WWW-Authenticate` of a `401`, §11.7.1
/// `Proxy-Authenticate` of a `407`, §10.2.2 `Location` of a `3xx`, §14.4 `Content-Range` of
/// a `416`).
const STATUS_FIELDS: [&str; 6] = [
    "Allow",
    "WWW-Authenticate",
    "Proxy-Authenticate",
    "Retry-After",
    "Location",
    "Content-Range",
];

impl Conn {
    /// If the location intercepts errors and lists `head`'s status, answer with the error
    /// page; otherwise give the exchange back untouched.
    pub(super) fn intercept(
        &mut self,
        proxy: Box<Proxy>,
        head: &ResponseHead,
        body: &ResponseBody,
        context: &mut Context<'_>,
    ) -> Result<Step, Box<Proxy>> {
        let settings = &proxy.route.settings;
        let listed = settings.intercept_errors
            && head.status >= 300
            && settings
                .error_pages
                .as_ref()
                .is_some_and(|pages| pages.find(head.status).is_some());
        if !listed {
            return Err(proxy);
        }
        // The upstream answered: it is healthy, whatever it said.
        proxy.report(Report::Success);
        let empty = matches!(body, ResponseBody::None | ResponseBody::Length(0));
        let request_done = proxy.request.done();
        let reusable = empty
            && head.keep_alive
            && matches!(proxy.backend, Backend::Http { .. })
            && request_done
            && self
                .link
                .as_ref()
                .is_some_and(|link| link.input.is_empty() && !link.finished);
        let release = proxy.release(reusable);
        let (exchange, route, _) = self.take_back_exchange(proxy, release);
        // The rest of the client's body may still be arriving: linger after the page.
        self.linger |= !request_done;
        let fields: Vec<(&str, &[u8])> = STATUS_FIELDS
            .iter()
            .filter_map(|name| head.header(name).map(|value| (*name, value)))
            .collect();
        let outcome = self
            .parts()
            .answer(&exchange, Some(&route), head.status, &fields, context);
        Ok(self.settle(outcome, context).map_or(Step::Over, Step::Job))
    }
}
