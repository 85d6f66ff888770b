//! The PROXY protocol keys of `ampd.toml`: `proxy_protocol` and `proxy_protocol_from`.
//!
//! Owns: turning the two server-wide keys into `ProxyProtocol`, with file:line:key errors.
//! Trust is explicit: turning the protocol on without naming the balancers is an error, since
//! any client could otherwise claim any address (nginx's `set_real_ip_from` has no default
//! either).
//! Must not touch: other keys (`load.rs`), the header itself (`ampd_http::proxy_protocol`).

use super::load::{Loaded, Loader};
use super::raw::RawFile;
use super::{Config, ProxyProtocol};

impl Loader<'_> {
    pub(super) fn proxy_protocol(&self, raw: &RawFile, config: &mut Config) -> Loaded<()> {
        let from = match &raw.proxy_protocol_from {
            Some(list) => Some((self.addresses(list, "proxy_protocol_from")?, list.span())),
            None => None,
        };
        config.proxy_protocol = match (&raw.proxy_protocol, from) {
            (Some(on), Some((from, span))) if *on.get_ref() => {
                if from.is_empty() {
                    return Err(self.hinted(
                        span,
                        "proxy_protocol_from",
                        "no source may send a PROXY header",
                        "list the load balancers' addresses or blocks, like [\"10.0.0.0/8\"]",
                    ));
                }
                ProxyProtocol::Required { from }
            }
            (Some(on), None) if *on.get_ref() => {
                return Err(self.hinted(
                    on.span(),
                    "proxy_protocol",
                    "proxy_protocol = true needs proxy_protocol_from",
                    "list the load balancers' addresses or blocks, like [\"10.0.0.0/8\"]; \
                     nothing is trusted by default",
                ))
            }
            (None, Some((_, span))) => {
                return Err(self.hinted(
                    span,
                    "proxy_protocol_from",
                    "proxy_protocol_from without proxy_protocol",
                    "set proxy_protocol = true to read PROXY headers from these sources",
                ))
            }
            _ => ProxyProtocol::Off,
        };
        Ok(())
    }
}
