//! The PROXY protocol phase of a connection: before its first request, a connection accepted
//! from a trusted load balancer (`proxy_protocol_from`; others never get a `Conn`, see
//! `engine::admit`) must send a v1 or v2 header saying which client it carries. The client
//! address it names replaces the peer for the rest of the connection, so the access log,
//! `allow`/`deny` and the rate limits see the client, not the balancer.
//!
//! Owns: the `ReadingProxyHeader` state's step, and the one (rate-limited) log line for
//! connections closed over the header. A bad header is closed without a response: no HTTP has
//! been spoken yet (nginx closes too). A header that never comes runs into the header timeout.
//! Must not touch: trust (decided at accept), the HTTP head (`mod.rs` reads it next).

use std::net::IpAddr;

use ampd_http::proxy_protocol::{self, Origin, Parse};

use super::{Conn, Context, Ending, Need, State};
use crate::config::Level;
use crate::log::error::Throttle;
use crate::log::stats::{LoopStats, ProxyRefusal};

impl Conn {
    /// One step of `ReadingProxyHeader`: `Some(need)` to return to the engine, `None` when the
    /// state changed and `advance` goes on.
    pub(super) fn read_proxy_header(&mut self, context: &Context<'_>) -> Option<Need> {
        if self.consumed == self.input.len() && !self.peer_finished {
            return Some(Need::Read);
        }
        match proxy_protocol::parse(&self.input[self.consumed..]) {
            Ok(Parse::Partial) if self.peer_finished => {
                refused(
                    context.stats,
                    ProxyRefusal::Invalid,
                    self.peer,
                    "closed before its PROXY header was complete",
                );
                self.state = State::Closing(Ending::Close);
            }
            Ok(Parse::Partial) => return Some(Need::Read),
            Ok(Parse::Complete { header, len }) => {
                self.consumed += len;
                if let Origin::Forwarded { source, .. } = header.origin {
                    self.peer = canonical(source.ip());
                    self.peer_port = source.port();
                }
                self.state = State::ReadingHead;
            }
            Err(error) => {
                refused(
                    context.stats,
                    ProxyRefusal::Invalid,
                    self.peer,
                    &error.to_string(),
                );
                self.state = State::Closing(Ending::Close);
            }
        }
        None
    }

    /// The header never came (or never finished) within the header timeout: close, silently
    /// for the client, counted and logged here.
    pub(super) fn proxy_header_timed_out(&self, stats: &LoopStats) {
        refused(
            stats,
            ProxyRefusal::Invalid,
            self.peer,
            "no PROXY header within the header timeout",
        );
    }
}

/// An IPv4 client carried as an IPv4-mapped IPv6 address is logged and matched as IPv4.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

/// Count a connection closed over the PROXY protocol, and log it at info: throttled, since a
/// scan or a misconfigured balancer refuses every connection.
pub fn refused(stats: &LoopStats, why: ProxyRefusal, peer: IpAddr, what: &str) {
    static REFUSED: Throttle = Throttle::new();
    stats.proxy_refused(why);
    REFUSED.log(
        Level::Info,
        format_args!("PROXY protocol: connection from {peer} closed: {what}"),
    );
}
