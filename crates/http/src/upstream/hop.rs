//! Hop-by-hop fields: the ones that describe one connection and must not be forwarded
//! (RFC 9110 §7.6.1), and the extra ones a message's `Connection` field names.
//!
//! Owns the hop-by-hop list and the `Connection` option set. Must not write anything: the
//! request writer (`forward.rs`) and `ResponseHead::end_to_end_headers` apply them.

use crate::request::Header;
use crate::token::list_elements;

/// Fields that belong to one hop. RFC 9110 §7.6.1 names Connection, Proxy-Connection,
/// Keep-Alive, TE, Transfer-Encoding and Upgrade; Trailer announces trailer fields the relay
/// drops when it re-frames; Proxy-Authorization/Proxy-Authenticate are the credentials of
/// this proxy, not of the origin (RFC 9110 §11.7); HTTP2-Settings only means something with
/// an `Upgrade: h2c` (RFC 7540 §3.2.1). Go's `httputil.ReverseProxy` drops the same set.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "http2-settings",
    "proxy-authorization",
    "proxy-authenticate",
];

/// Whether the field `name` is hop-by-hop (ASCII case-insensitive). Fields named by a
/// message's `Connection` are hop-by-hop too; see [`named_by_connection`].
#[must_use]
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP
        .iter()
        .any(|hop| hop.len() == name.len() && hop.eq_ignore_ascii_case(name))
}

/// The field names listed by a message's `Connection` fields (RFC 9110 §7.6.1: a proxy MUST
/// remove them before forwarding).
#[derive(Debug, Default)]
pub(crate) struct ConnectionOptions<'a> {
    options: Vec<&'a [u8]>,
}

impl ConnectionOptions<'_> {
    /// Whether `name` is one of the options (ASCII case-insensitive).
    pub(crate) fn names(&self, name: &str) -> bool {
        self.options
            .iter()
            .any(|option| option.eq_ignore_ascii_case(name.as_bytes()))
    }
}

/// Collects the options of every `Connection` field in `headers`.
pub(crate) fn named_by_connection(headers: &[Header]) -> ConnectionOptions<'_> {
    let options = headers
        .iter()
        .filter(|header| header.name.eq_ignore_ascii_case("connection"))
        .flat_map(|header| list_elements(&header.value))
        .collect();
    ConnectionOptions { options }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, value: &str) -> Header {
        Header {
            name: name.into(),
            value: value.as_bytes().into(),
        }
    }

    #[test]
    fn the_hop_by_hop_set_ignores_case() {
        for name in [
            "Connection",
            "KEEP-ALIVE",
            "Proxy-Connection",
            "TE",
            "Trailer",
            "Transfer-Encoding",
            "Upgrade",
            "HTTP2-Settings",
            "Proxy-Authorization",
            "proxy-authenticate",
        ] {
            assert!(is_hop_by_hop(name), "{name}");
        }
        for name in [
            "Content-Length",
            "Host",
            "Trailers",
            "T",
            "Authorization",
            "",
        ] {
            assert!(!is_hop_by_hop(name), "{name}");
        }
    }

    #[test]
    fn connection_options_span_every_connection_field() {
        let headers = [
            header("Connection", "close, X-Secret"),
            header("X-Secret", "1"),
            header("connection", " ,x-other ,"),
        ];
        let options = named_by_connection(&headers);
        assert!(options.names("x-secret"));
        assert!(options.names("X-OTHER"));
        assert!(options.names("Close"));
        assert!(!options.names("X-Secre"));
        assert!(!options.names(""));
    }
}
