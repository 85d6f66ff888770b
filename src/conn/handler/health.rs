//! The health handler: `200 ok` while serving, `503 draining` once a graceful stop began, so
//! a load balancer takes the instance out before its port closes (`drain_delay`).
//!
//! Owns: answering a `handler = "health"` location. Must not touch: the lifecycle itself.

use super::{Handler, Routed};
use crate::conn::reply::Parts;
use crate::conn::{Context, Outcome};

/// Answers at once; never holds a request.
#[derive(Debug)]
pub(in crate::conn) struct Health;

impl Handler for Health {
    fn start(routed: Routed, parts: &mut Parts<'_>, context: &mut Context<'_>) -> Outcome {
        let (status, body): (u16, &[u8]) = if context.draining {
            (503, b"draining\n")
        } else {
            (200, b"ok\n")
        };
        let exchange = &routed.exchange;
        parts.answer_text(
            exchange,
            &routed.route,
            status,
            b"text/plain",
            body,
            context,
        );
        Outcome::Responded(exchange.persistence)
    }
}
