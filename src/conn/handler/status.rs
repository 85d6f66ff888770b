//! The status handler: the scoreboard, counters and upstream pools as Prometheus text.
//!
//! Owns: answering a `handler = "status"` location. Must not touch: how the figures are
//! counted (`log::stats`, `crate::upstream`).

use super::{Handler, Routed};
use crate::config::Handler as Kind;
use crate::conn::reply::Parts;
use crate::conn::{Context, Outcome};
use crate::log::metrics;

/// Answers at once; never holds a request.
#[derive(Debug)]
pub(in crate::conn) struct Status;

impl Handler for Status {
    fn start(routed: Routed, parts: &mut Parts<'_>, context: &mut Context<'_>) -> Outcome {
        let mut text = metrics::render(context.metrics, context.draining);
        context.upstreams.render_metrics(&mut text);
        let runs_scripts = context.config.sites.iter().any(|site| {
            site.locations
                .iter()
                .any(|location| matches!(location.settings.handler, Kind::Cgi(_)))
        });
        if runs_scripts {
            context.launcher.render_metrics(&mut text);
        }
        let exchange = &routed.exchange;
        let body = text.as_bytes();
        parts.answer_text(
            exchange,
            &routed.route,
            200,
            metrics::CONTENT_TYPE,
            body,
            context,
        );
        Outcome::Responded(exchange.persistence)
    }
}
