//! The health handler: `200 ok` while serving, `503 draining` once a graceful stop began, so
//! a load balancer takes the instance out before its port closes (`drain_delay`).
//!
//! Owns: answering a `handler = "health"` location. Must not touch: the lifecycle itself.

use super::Routed;
use crate::conn::{Conn, Context, Job};

impl Conn {
    pub(super) fn serve_health(
        &mut self,
        routed: &Routed,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let (status, body): (u16, &[u8]) = if context.draining {
            (503, b"draining\n")
        } else {
            (200, b"ok\n")
        };
        self.answer_text(
            &routed.exchange,
            &routed.route,
            status,
            b"text/plain",
            body,
            context,
        )
    }
}
