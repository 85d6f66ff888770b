//! The status handler: the scoreboard, counters and upstream pools as Prometheus text.
//!
//! Owns: answering a `handler = "status"` location. Must not touch: how the figures are
//! counted (`log::stats`, `crate::upstream`).

use super::Routed;
use crate::config::Handler;
use crate::conn::{Conn, Context, Job};
use crate::log::metrics;

impl Conn {
    pub(super) fn serve_status(
        &mut self,
        routed: &Routed,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let mut text = metrics::render(context.metrics, context.draining);
        context.upstreams.render_metrics(&mut text);
        let runs_scripts = context.config.sites.iter().any(|site| {
            site.locations
                .iter()
                .any(|location| matches!(location.settings.handler, Handler::Cgi(_)))
        });
        if runs_scripts {
            context.launcher.render_metrics(&mut text);
        }
        self.answer_text(
            &routed.exchange,
            &routed.route,
            200,
            metrics::CONTENT_TYPE,
            text.as_bytes(),
            context,
        )
    }
}
