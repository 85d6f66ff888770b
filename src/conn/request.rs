//! A parsed HTTP/1 request head, up to routing: its persistence (RFC 9112 §9.3), its body's
//! framing and limit, `100 Continue` (RFC 9110 §10.1.1), and discarding a body the handler
//! does not use before the next request is read (RFC 9112 §6.3).
//!
//! Owns: `on_request` and the `DiscardingBody` state. Must not touch: routing (`route.rs`),
//! what a handler does with a body it takes (`handler/proxy/`).

use ampd_http::chunked::ChunkedDecoder;
use ampd_http::request::{BodyFraming, RequestHead, Version};

use super::{BodyLeft, Conn, Context, Ending, Exchange, Job, Need, State};
use crate::response::Persistence;

impl Conn {
    /// A parsed request: persistence, body framing, then routing once the body is read.
    pub(super) fn on_request(
        &mut self,
        head: RequestHead,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        self.served += 1;
        // An earlier request's error page is answered.
        self.output.set_answer_as(None);
        let limits = &context.config.limits;
        let persistence = if !head.keep_alive
            || self.served >= limits.max_requests_per_connection
            || context.draining
            || self.refused
        {
            Persistence::Close
        } else if head.version == Version::Http10 {
            Persistence::KeepAlive
        } else {
            Persistence::Implicit
        };
        // A request with a body is located first: its location may forward the body (a proxy)
        // and sets how large it may be.
        let has_body = !matches!(head.body, BodyFraming::None | BodyFraming::Length(0));
        let located = if has_body {
            self.locate(&head, context).ok()
        } else {
            None
        };
        let max_body = located
            .as_ref()
            .and_then(|located| located.route.settings.max_body)
            .unwrap_or(limits.max_body);
        let body = match head.body {
            BodyFraming::None | BodyFraming::Length(0) => None,
            BodyFraming::Length(length) if length > max_body => {
                let exchange = Exchange {
                    head,
                    persistence: Persistence::Close,
                    started: context.clock.now(),
                    user: None,
                    body: None,
                    internal: false,
                    handoffs: 0,
                    detours: 0,
                    requested: None,
                };
                // The client may be sending the body we refused.
                self.linger = true;
                return self.answer(&exchange, None, 413, &[], context);
            }
            BodyFraming::Length(length) => Some(BodyLeft::Length(length)),
            BodyFraming::Chunked => Some(BodyLeft::Chunked(
                ChunkedDecoder::new().with_max_body(max_body),
            )),
        };
        if let Some(located) = located {
            let streams_body = located.route.settings.handler.passes_to_program();
            // A request redirected to its location's path with a '/' is answered, not
            // forwarded: its body is read and discarded below, as for any other answer.
            if streams_body && !located.add_slash && !self.refused {
                // The body goes to the upstream as it arrives (`proxy/`), after the location's
                // phases let the request through.
                let exchange = Exchange {
                    head,
                    persistence,
                    started: context.clock.now(),
                    user: None,
                    body,
                    internal: false,
                    handoffs: 0,
                    detours: 0,
                    requested: None,
                };
                if let Some(answered) = self.redirect_to_https(&exchange, &located, context) {
                    return answered;
                }
                if let Some(answered) = self.refuse_without_client_certificate(&exchange, context) {
                    return answered;
                }
                return self.phases(exchange, located, context);
            }
        }
        // A client waiting for `100 Continue` sends the body only after it (RFC 9110 §10.1.1).
        // When the head alone decides the answer (a refused connection or method), that final
        // status goes out instead, and the connection closes, lingering: the client may send
        // the body anyway. Otherwise invite it, then read and discard the body as for any other
        // request, so the connection stays usable (nginx does the same when it discards a body).
        if body.is_some() && head.expect_continue {
            if self.refuses_from_head(&head.method) {
                let exchange = Exchange {
                    head,
                    persistence: Persistence::Close,
                    started: context.clock.now(),
                    user: None,
                    body: None,
                    internal: false,
                    handoffs: 0,
                    detours: 0,
                    requested: None,
                };
                // The client may send the body anyway.
                self.linger = true;
                return self.route(exchange, context);
            }
            self.output.begin_head(100);
            self.output.end_head(crate::response::Http1Framing::INTERIM);
        }
        let exchange = Exchange {
            head,
            persistence,
            started: context.clock.now(),
            user: None,
            body: None,
            internal: false,
            handoffs: 0,
            detours: 0,
            requested: None,
        };
        match body {
            Some(left) => {
                self.state = State::DiscardingBody {
                    left,
                    exchange: Box::new(exchange),
                };
                None
            }
            None => self.route(exchange, context),
        }
    }

    /// Discard what input holds of the body of a `DiscardingBody` request; once it is read,
    /// route the request. `None`: go on advancing.
    pub(super) fn discard_body(&mut self, context: &mut Context<'_>) -> Option<Need> {
        let State::DiscardingBody { mut left, exchange } =
            std::mem::replace(&mut self.state, State::ReadingHead)
        else {
            return None;
        };
        match discard(&mut left, &self.input[self.consumed..]) {
            Discard::Consumed { used, done } => {
                self.consumed += used;
                if done {
                    return self.route(*exchange, context).map(Need::Job);
                }
                if self.peer_finished {
                    self.state = State::Closing(Ending::Close);
                    return None;
                }
                self.state = State::DiscardingBody { left, exchange };
                Some(Need::Read)
            }
            Discard::Refused(status) => {
                self.state = State::Closing(Ending::Linger);
                self.reply_to(Some(&exchange), status, Persistence::Close, &[], context);
                // The rest of the refused body is never read.
                self.state = State::Closing(Ending::Linger);
                None
            }
        }
    }
}

enum Discard {
    Consumed {
        used: usize,
        done: bool,
    },
    /// The body cannot be accepted: `413` past the limit, `400` when its framing is broken.
    Refused(u16),
}

/// Throw away body bytes from `input`; a chunked body past its limit ends the connection.
fn discard(left: &mut BodyLeft, input: &[u8]) -> Discard {
    match left {
        BodyLeft::Length(remaining) => {
            let used = usize::try_from(*remaining)
                .unwrap_or(usize::MAX)
                .min(input.len());
            *remaining -= used as u64;
            Discard::Consumed {
                used,
                done: *remaining == 0,
            }
        }
        BodyLeft::Chunked(decoder) => match decoder.feed(input, &mut |_| {}) {
            Ok(progress) => Discard::Consumed {
                used: progress.consumed,
                done: progress.done,
            },
            // `413` past the limit, `400` for broken framing.
            Err(error) => Discard::Refused(error.status()),
        },
    }
}
