//! The heads a proxied exchange writes: the request head for the upstream (re-serialised from
//! the parsed request, so no byte of the client's framing reaches the upstream: RFC 9112 §11.2
//! smuggling), and the response head for the client (the upstream's end-to-end headers under
//! ampd's `Server`, `Date` and connection handling, with the framing ampd chose).
//!
//! Owns: which headers cross and which are ampd's own. Must not touch: bodies (`relay.rs`).

use std::net::IpAddr;

use ampd_http::request::{Method, RequestHead};
use ampd_http::upstream::{
    write_request, ForwardBody, ForwardRequest, Limits as ResponseLimits, ResponseHead,
};

use super::relay::ClientFraming;
use crate::config::{Config, ProxyHost, ProxySettings, UpstreamAddress};
use crate::conn::Exchange;
use crate::response::{common_fields, Head, HeadContext, Http1Framing};

/// Limits on an upstream's response head: the client's request limits, with room for the
/// larger heads applications send (cookies, security policies).
pub(super) fn response_limits(config: &Config) -> ResponseLimits {
    ResponseLimits {
        max_head_bytes: config.limits.max_head_bytes.max(64 << 10),
        max_headers: config.limits.max_headers.max(200),
    }
}

/// What one attempt sends: the request head for `server`.
pub(super) struct Forward<'a> {
    pub exchange: &'a Exchange,
    pub settings: &'a ProxySettings,
    /// Path and query to request.
    pub target: &'a str,
    pub client: IpAddr,
    /// The client's connection came over TLS (`X-Forwarded-Proto: https`).
    pub secure: bool,
    pub body: ForwardBody,
    pub websocket: bool,
    /// The pool keeps idle connections (`Connection: keep-alive`, else `close`).
    pub keep_alive: bool,
    pub server: &'a UpstreamAddress,
}

/// Write the request head of `forward` into `out`.
pub(super) fn forward(forward: &Forward<'_>, out: &mut Vec<u8>) {
    let head = &forward.exchange.head;
    let client_host = head.host();
    let server_host;
    let host = match &forward.settings.host {
        ProxyHost::Client if client_host.is_some() => client_host.unwrap_or_default(),
        ProxyHost::Literal(literal) => literal.as_str(),
        ProxyHost::Client | ProxyHost::Upstream => {
            server_host = match forward.server {
                UpstreamAddress::Tcp(address) => address.to_string(),
                UpstreamAddress::Unix(_) => "localhost".to_owned(),
            };
            server_host.as_str()
        }
    };
    let trust_incoming = forward
        .settings
        .forwarded_trust
        .iter()
        .any(|range| range.contains(forward.client));
    let request = ForwardRequest {
        method: &head.method,
        target: forward.target,
        host,
        client_headers: &head.headers,
        body: forward.body,
        client: forward.client,
        proto: if forward.secure { "https" } else { "http" },
        client_host,
        trust_incoming,
        upgrade: forward.websocket.then_some("websocket"),
        underscores: forward.settings.underscores,
        keep_alive: forward.keep_alive,
    };
    write_request(&request, out);
}

/// Instructions an upstream or a program gives its web server to send a file instead
/// (Apache's and lighttpd's `X-Sendfile`, lighttpd's older names): acted on by `deferred.rs`
/// where the location allows it, and never the client's to see (the value is a path on the
/// server's disk).
const SENDFILE_FIELDS: [&str; 4] = [
    "x-sendfile",
    "x-sendfile2",
    "x-lighttpd-send-file",
    "x-lighttpd-send-tempfile",
];

/// Whether an end-to-end field of the upstream's response is ampd's to write or to act on
/// instead: the `Server` and `Date` ampd writes itself (as nginx does), `X-Accel-*` and
/// `X-Sendfile` instructions meant for ampd (nginx likewise never passes `X-Accel-*` on),
/// whether or not the location acts on them. (Hop-by-hop fields, those `Connection` names and
/// the framing never reach here: `ResponseHead::end_to_end_headers`.)
fn ampds_own(name: &str) -> bool {
    name.eq_ignore_ascii_case("server")
        || name.eq_ignore_ascii_case("date")
        || name
            .get(..8)
            .is_some_and(|prefix| prefix.eq_ignore_ascii_case("x-accel-"))
        || SENDFILE_FIELDS
            .iter()
            .any(|field| field.eq_ignore_ascii_case(name))
}

/// The upstream's end-to-end fields but ampd's own; with `site_hsts`, its
/// `Strict-Transport-Security` too: the site's policy is the one a browser keeps (RFC 6797
/// §8.1 keeps only the first field).
fn end_to_end_headers(out: &mut Head, head: &ResponseHead, site_hsts: bool) {
    for header in head.end_to_end_headers() {
        let replaced = site_hsts
            && header
                .name
                .eq_ignore_ascii_case("strict-transport-security");
        if !ampds_own(&header.name) && !replaced {
            out.push(&header.name, &header.value);
        }
    }
}

/// Fill the client's response head (`out`, its status set) for an upstream `head` answering
/// `request`, whose body goes out as `framing`; returns what an HTTP/1 connection adds to it
/// (`Transfer-Encoding: chunked` for a body of unknown length, the connection's persistence).
pub(super) fn response_head(
    out: &mut Head,
    head: &ResponseHead,
    request: &RequestHead,
    framing: ClientFraming,
    response: &HeadContext<'_>,
) -> Http1Framing {
    common_fields(out, response);
    end_to_end_headers(out, head, !response.strict_transport_security.is_empty());
    if let ClientFraming::Length | ClientFraming::None = framing {
        if let Some(length) = passed_length(head, request) {
            out.push_decimal("Content-Length", length);
        }
    }
    Http1Framing {
        persistence: response.persistence,
        chunked: framing == ClientFraming::Chunked,
    }
}

/// The upstream's `Content-Length` as the client may get it: the body's, or for a response to
/// HEAD the representation's it describes, passed on as one value. RFC 9110 §8.6: never on a
/// 1xx or a 204 (which have no content to measure); on a 304 only in answer to a conditional
/// GET or HEAD (RFC 9110 §15.4.5), where it is the length of the representation the client
/// holds; a 304 to anything else is no answer to a validator, and a length on it would
/// describe nothing the client has.
fn passed_length(head: &ResponseHead, request: &RequestHead) -> Option<u64> {
    let length = head.content_length()?;
    match head.status {
        100..=199 | 204 => None,
        304 => {
            let conditional = matches!(request.method, Method::Get | Method::Head)
                && (request.header("if-none-match").is_some()
                    || request.header("if-modified-since").is_some());
            conditional.then_some(length)
        }
        _ => Some(length),
    }
}

/// The `101` passed to the client when a WebSocket tunnel opens.
pub(super) fn write_switching_head(out: &mut Vec<u8>, head: &ResponseHead, date: &[u8; 29]) {
    let mut fields = Head::new(101);
    fields.push("Server", b"ampd");
    fields.push("Date", date);
    end_to_end_headers(&mut fields, head, false);
    fields.write_http1(out);
    // Connection-specific, so HTTP/1's alone (a WebSocket tunnel is opened over HTTP/1 only).
    out.extend_from_slice(b"Connection: upgrade\r\nUpgrade: websocket\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use ampd_http::upstream::{Limits, ResponseParse, ResponseParser};

    use super::end_to_end_headers;
    use crate::response::Head;

    #[test]
    fn hop_by_hop_framing_and_connection_named_headers_stay_behind() {
        let wire = b"HTTP/1.1 200 OK\r\nConnection: x-secret\r\nKeep-Alive: 5\r\n\
            Transfer-Encoding: chunked\r\nServer: app\r\nX-Accel-Redirect: /a\r\n\
            X-Sendfile: /etc/passwd\r\nx-lighttpd-send-file: /etc/group\r\n\
            x-secret: 1\r\nContent-Type: text/plain\r\nSet-Cookie: a=b\r\nETag: \"e\"\r\n\
            X-Accel: kept\r\n\r\n";
        let mut parser = ResponseParser::new(Limits {
            max_head_bytes: 4096,
            max_headers: 32,
        });
        let Ok(ResponseParse::Complete { head, .. }) = parser.parse(wire) else {
            panic!("the head parses");
        };
        let mut fields = Head::new(200);
        end_to_end_headers(&mut fields, &head, false);
        let mut out = Vec::new();
        fields.write_http1(&mut out);
        let out = String::from_utf8(out).unwrap().to_ascii_lowercase();
        for name in [
            "connection:",
            "keep-alive:",
            "transfer-encoding:",
            "content-length:",
            "server:",
            "x-accel-redirect:",
            "x-sendfile:",
            "x-lighttpd-send-file:",
            "x-secret:",
        ] {
            assert!(!out.contains(name), "{name} passed on: {out}");
        }
        for name in ["content-type:", "set-cookie:", "etag:", "x-accel:"] {
            assert!(out.contains(name), "{name} left behind: {out}");
        }
    }
}
