//! Error pages (nginx `error_page`): a status page a location (or, before one is found, its
//! site) lists in `error_pages` is not written; the request is routed again inside ampd to the
//! page's URI instead, as a `GET` (a `HEAD` stays one) without a body, `Range` or
//! preconditions (the page is served whole: never a `206` or `304` of it), reaching whatever
//! location serves that URI — a file, a proxy, a FastCGI script. Its answer goes out with the
//! original status (or the one the page states), keeping the fields that status needs (`Allow`,
//! `WWW-Authenticate`, `Retry-After`, `Location`, `Content-Range`; only when the original status
//! is sent) and dropping the page's validators and cache lifetime when it is not a `2xx`. The
//! access log names the client's request and the status sent.
//!
//! An error page's own request that ends in a status page is routed to the page that status
//! lists once more (`MAX_ERROR_PAGES`), then answered with the built-in page of the original
//! status: a missing page or a loop of pages ends at once, never in a hang. A connection over
//! its cap (`503`) and an answer with no request (`408`, a broken head) keep the built-in page.
//!
//! Owns: that decision (`Parts::answer`, the way every status page a handler or a phase gives
//! takes), and the internal request it makes. The status the response goes out with is
//! `answer_as.rs`'s. Must not touch: routing itself (`route.rs`), how each handler answers.

use ampd_http::request::{BodyFraming, Method};

use super::answer_as::AnswerAs;
use super::reply::Parts;
use super::{Conn, Context, Exchange, Job, Outcome};
use crate::response::Persistence;
use crate::site::Route;

/// Error pages one request may be routed to: its first, and one more for an error of that
/// page's own request (nginx routes once unless `recursive_error_pages` is on, and then at most
/// ten times; one further step serves a page whose location fails over to another page).
const MAX_ERROR_PAGES: u8 = 2;

/// Request fields the page's request goes without: it has no body, and a range or a
/// precondition of the client's is about the resource it asked for, not the page.
const DROPPED_FIELDS: [&str; 10] = [
    "content-length",
    "transfer-encoding",
    "content-type",
    "expect",
    "range",
    "if-range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
];

/// An error page's request, to be routed (`Conn::take_detour`).
#[derive(Debug)]
pub(super) struct Detour {
    exchange: Exchange,
    answer_as: AnswerAs,
    /// The client's body was left unread: the connection ends after the page, lingering.
    unread: bool,
}

/// What becomes of a status page (`Parts::error_answer`).
enum ErrorAnswer {
    /// Written as it is.
    BuiltIn,
    /// Routed to an error page.
    Detour(Box<Detour>),
    /// An error page's request failed: the built-in page of the original status, with its
    /// fields.
    Original(u16, Vec<(String, Vec<u8>)>),
}

impl Parts<'_> {
    /// Answer with a status page, or the error page listed for its status; the outcome goes on
    /// per the exchange's persistence.
    pub(in crate::conn) fn answer(
        &mut self,
        exchange: &Exchange,
        route: Option<&Route>,
        status: u16,
        extra: &[(&str, &[u8])],
        context: &mut Context<'_>,
    ) -> Outcome {
        match self.error_answer(exchange, route, status, extra, context) {
            ErrorAnswer::BuiltIn => self.answer_built_in(exchange, route, status, extra, context),
            ErrorAnswer::Detour(detour) => Outcome::ErrorPage(detour),
            ErrorAnswer::Original(status, fields) => {
                let extra: Vec<(&str, &[u8])> = fields
                    .iter()
                    .map(|(name, value)| (name.as_str(), &value[..]))
                    .collect();
                self.answer_built_in(exchange, route, status, &extra, context)
            }
        }
    }

    /// What becomes of a status page of `status` with `extra` for `exchange` under `route`
    /// (`None`: no location yet; its site's `/` location's pages apply, the site's own unless
    /// that location lists its own).
    fn error_answer(
        &mut self,
        exchange: &Exchange,
        route: Option<&Route>,
        status: u16,
        extra: &[(&str, &[u8])],
        context: &Context<'_>,
    ) -> ErrorAnswer {
        let pages = match route {
            Some(route) => route.settings.error_pages.as_ref(),
            None => {
                let host = exchange.head.host().map(str::as_bytes);
                context.sites.route(host, "/").settings.error_pages.as_ref()
            }
        };
        let page = pages.and_then(|pages| pages.find(status));
        let unread = exchange.body.is_some();
        if exchange.detours == 0 {
            let Some(page) = page else {
                return ErrorAnswer::BuiltIn;
            };
            let answer_as = AnswerAs {
                status: page.status.unwrap_or(status),
                original: status,
                fields: extra
                    .iter()
                    .map(|(name, value)| ((*name).to_owned(), value.to_vec()))
                    .collect(),
                method: exchange.head.method.clone(),
                target: exchange.head.target.clone(),
            };
            return ErrorAnswer::Detour(Box::new(Detour {
                exchange: page_request(exchange, &page.uri, unread),
                answer_as,
                unread,
            }));
        }
        // The page's own request ends in a status page.
        let Some(answer_as) = self.output.answer_as().cloned() else {
            return ErrorAnswer::BuiltIn;
        };
        match page {
            Some(page) if exchange.detours < MAX_ERROR_PAGES => {
                ErrorAnswer::Detour(Box::new(Detour {
                    exchange: page_request(exchange, &page.uri, unread),
                    answer_as,
                    unread,
                }))
            }
            _ => {
                if let Some(sent) = self.output.answer_as_mut() {
                    sent.status = sent.original;
                }
                ErrorAnswer::Original(answer_as.original, answer_as.fields)
            }
        }
    }
}

impl Conn {
    /// Route an error page's request; the job it needs, if any.
    pub(super) fn take_detour(&mut self, detour: Detour, context: &mut Context<'_>) -> Option<Job> {
        let Detour {
            exchange,
            answer_as,
            unread,
        } = detour;
        if unread {
            self.linger = true;
        }
        self.output.set_answer_as(Some(Box::new(answer_as)));
        self.route(exchange, context)
    }
}

/// The request for the page at `uri` made from `exchange`: a `GET` (or `HEAD`) without a body,
/// range or preconditions, that `internal` locations answer (as nginx's error pages reach
/// them), its `REQUEST_URI` still the client's.
fn page_request(exchange: &Exchange, uri: &str, unread: bool) -> Exchange {
    let mut head = exchange.head.clone();
    head.target = uri.into();
    if head.method != Method::Head {
        head.method = Method::Get;
    }
    head.body = BodyFraming::None;
    head.expect_continue = false;
    head.headers.retain(|field| {
        !DROPPED_FIELDS
            .iter()
            .any(|name| field.name.eq_ignore_ascii_case(name))
    });
    Exchange {
        head,
        persistence: if unread {
            Persistence::Close
        } else {
            exchange.persistence
        },
        started: exchange.started,
        user: exchange.user.clone(),
        body: None,
        internal: true,
        requested: Some(
            exchange
                .requested
                .clone()
                .unwrap_or_else(|| exchange.head.target.clone()),
        ),
        handoffs: exchange.handoffs,
        detours: exchange.detours + 1,
    }
}
