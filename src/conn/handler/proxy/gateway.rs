//! The response side FastCGI and CGI share (RFC 3875 §6): the CGI fields at the head of the
//! program's output become an HTTP response head (`Status`, `Location`, the rest passed on), a
//! local `Location` is served inside ampd as a new `GET`, and a response the program got wrong
//! is a `502` with an error-log line, never passed through. The meta-variables both send are
//! built here from the request (`meta_variables.rs` has the rules).
//!
//! Owns: those steps. Must not touch: sockets, FastCGI records (`fastcgi.rs`), processes
//! (`crate::programs`).

use ampd_http::cgi::{CgiError, CgiKind, CgiParse};
use ampd_http::upstream::response_body;

use super::{Backend, Proxy, Step};
use crate::conn::handler::meta_variables::{self, ScriptPath};
use crate::conn::upstream::{Failure, Release};
use crate::conn::{Conn, Context, Need};
use crate::response::Persistence;
use crate::upstream::Report;

/// How the program's output stands when its head is not complete.
pub(super) struct Ended {
    /// The response stream ended (a script's output, FastCGI's standard output).
    pub output: bool,
    /// The upstream socket closed.
    pub link: bool,
    /// Nothing of the response has arrived.
    pub empty: bool,
}

impl Conn {
    /// The meta-variables of the exchange's request for a script at `script` (`None`: found by
    /// the launcher).
    pub(super) fn gateway_variables(
        &self,
        proxy: &Proxy,
        clean: &str,
        script: Option<&ScriptPath>,
        _context: &Context<'_>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        meta_variables::meta_variables(
            &meta_variables::Request {
                head: &proxy.exchange.head,
                requested: proxy.exchange.requested.as_deref(),
                clean,
                client: self.peer_address(),
                server: self.local_address(),
                content_length: proxy.request.content_length(),
                user: proxy.exchange.user.as_deref(),
                tls: self.tls(),
            },
            &proxy.route,
            script,
        )
    }

    /// FastCGI: take the application's records out of what its socket brought.
    pub(super) fn demultiplex(&mut self, proxy: &mut Proxy) -> Result<(), String> {
        let (Backend::FastCgi(application), Some(link)) = (&mut proxy.backend, self.link.as_mut())
        else {
            return Ok(());
        };
        application.demultiplex(&mut link.input)
    }

    /// Act on the CGI fields at the head of the program's output, or wait for the rest:
    /// `parsed` is what the parser made of it (`exchange_data`; a complete head is already
    /// taken off the output).
    pub(super) fn read_gateway_head(
        &mut self,
        mut proxy: Box<Proxy>,
        parsed: Result<CgiParse, CgiError>,
        ended: Ended,
        context: &mut Context<'_>,
    ) -> Step {
        match parsed {
            Ok(CgiParse::Partial) if ended.output || ended.link => {
                let (empty, ended) = (ended.empty, ended.output);
                if let Backend::Cgi(script) = &proxy.backend {
                    if let Some(status) = script.launch_failed() {
                        self.drop_link(Release::Close);
                        let route = proxy.route.clone();
                        if !proxy.request.done() {
                            proxy.exchange.persistence = Persistence::Close;
                        }
                        return self
                            .answer(&proxy.exchange, Some(&route), status, &[], context)
                            .map_or(Step::Over, Step::Job);
                    }
                }
                if empty && !ended {
                    // Nothing at all: the socket closed (a FastCGI application that died, a
                    // script that wrote nothing); a retry may be possible.
                    if let Some(link) = self.link.as_mut() {
                        link.failure = Some(Failure::Closed);
                    }
                    return Step::Again(proxy);
                }
                let why = if empty {
                    "no output"
                } else {
                    "output ended before the blank line after its header fields"
                };
                self.invalid_response(proxy, why, context)
            }
            Ok(CgiParse::Partial) => {
                if self.peer_finished && !proxy.request.done() {
                    return self.client_gone(proxy, context);
                }
                if self.peer_finished && self.consumed == self.input.len() {
                    return self.client_gave_up(proxy, context);
                }
                Step::Wait(proxy, Need::Read)
            }
            Ok(CgiParse::Complete { head, .. }) => {
                if let CgiKind::LocalRedirect(target) = &head.kind {
                    let target = target.clone();
                    return self.local_redirect(proxy, target, context);
                }
                let head = head.into_response_head();
                if head.status < 200 {
                    // CGI has no interim responses (RFC 3875 §6.3.3): sent as the final one, a
                    // 1xx would leave the client waiting for another response after it.
                    let why = format!("a final response with status {}", head.status);
                    return self.invalid_response(proxy, &why, context);
                }
                match response_body(&head, &proxy.exchange.head.method) {
                    Ok(body) => match self.deferred(proxy, &head, &body, context) {
                        Ok(step) => step,
                        Err(proxy) => self.begin_response(proxy, &head, &body, context),
                    },
                    Err(error) => self.invalid_response(proxy, &error.to_string(), context),
                }
            }
            Err(error) => self.invalid_response(proxy, &error.to_string(), context),
        }
    }

    /// RFC 3875 §6.2.2: a script's `Location: /path` (and no `Status`) is served inside ampd
    /// as a `GET` of that path, as if the client had asked for it.
    fn local_redirect(
        &mut self,
        proxy: Box<Proxy>,
        target: String,
        context: &mut Context<'_>,
    ) -> Step {
        proxy.report(Report::Success);
        let (exchange, route) = self.hand_back(proxy, Release::Close);
        self.route_again(exchange, &route, target, false, context)
            .map_or(Step::Over, Step::Job)
    }
}
