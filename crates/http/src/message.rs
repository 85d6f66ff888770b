//! The HTTP/1 message vocabulary every parser and encoder of this crate shares: methods,
//! versions, field lines, body framing, the request head, and request-target forms
//! (RFC 9110 §6, §9; RFC 9112 §3.2, §6).
//!
//! Owns those types and `split_target`. Must not parse a head (`request`, `upstream`, `cgi`
//! do, through `head`) or decide framing (`framing`): they depend on this module, never the
//! reverse, which is what keeps `request` and `framing` out of a cycle.

use std::fmt;

use crate::authority::is_valid_authority;
use crate::token::is_token;

/// A request method (RFC 9110 §9). The registered ones are variants so matching is cheap;
/// extension methods keep their token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Options,
    Trace,
    Connect,
    Patch,
    /// Any other token, exactly as sent (methods are case-sensitive, RFC 9110 §9.1).
    Other(Box<str>),
}

impl Method {
    /// The method named by `token`, or `None` when `token` is not a valid token.
    #[inline]
    #[must_use]
    pub fn from_token(token: &[u8]) -> Option<Self> {
        Some(match token {
            b"GET" => Self::Get,
            b"HEAD" => Self::Head,
            b"POST" => Self::Post,
            b"PUT" => Self::Put,
            b"DELETE" => Self::Delete,
            b"OPTIONS" => Self::Options,
            b"TRACE" => Self::Trace,
            b"CONNECT" => Self::Connect,
            b"PATCH" => Self::Patch,
            other if is_token(other) => Self::Other(std::str::from_utf8(other).ok()?.into()),
            _ => return None,
        })
    }

    /// The method token.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Get => "GET",
            Self::Head => "HEAD",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Delete => "DELETE",
            Self::Options => "OPTIONS",
            Self::Trace => "TRACE",
            Self::Connect => "CONNECT",
            Self::Patch => "PATCH",
            Self::Other(token) => token,
        }
    }

    /// GET or HEAD: the methods conditional GET and ranges apply to (RFC 9110 §13.1.3, §14.2).
    #[inline]
    #[must_use]
    pub fn is_get_or_head(&self) -> bool {
        matches!(self, Self::Get | Self::Head)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The protocol version of a request. `HTTP/1.2`..`HTTP/1.9` are treated as 1.1, the highest
/// minor version ampd implements (RFC 9110 §6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Http10,
    Http11,
    /// A request that came over HTTP/2 (`h2::fields`): no chunked coding and no
    /// connection-level fields in its response; the stream's end ends a body.
    Http2,
    /// A request that came over HTTP/3 (`h3::request_stream`): framed like HTTP/2's.
    Http3,
}

impl Version {
    /// `"HTTP/1.0"`, `"HTTP/1.1"`, `"HTTP/2.0"` or `"HTTP/3.0"` (as logs and `SERVER_PROTOCOL`
    /// name it).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http10 => "HTTP/1.0",
            Self::Http11 => "HTTP/1.1",
            Self::Http2 => "HTTP/2.0",
            Self::Http3 => "HTTP/3.0",
        }
    }
}

/// One field line. The name keeps the case the client sent; the value has its surrounding OWS
/// removed (RFC 9112 §5.1) and may hold obs-text, hence bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    pub name: Box<str>,
    pub value: Box<[u8]>,
}

/// The value of the first of `headers` named `name` (ASCII case-insensitive): what a request's
/// and a response's `header` both answer.
#[inline]
#[must_use]
pub fn first_named<'a>(headers: &'a [Header], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|header| header.name.eq_ignore_ascii_case(name))
        .map(|header| &*header.value)
}

/// The values of every one of `headers` named `name`, in order.
#[inline]
pub fn all_named<'a>(headers: &'a [Header], name: &'a str) -> impl Iterator<Item = &'a [u8]> {
    headers
        .iter()
        .filter(move |header| header.name.eq_ignore_ascii_case(name))
        .map(|header| &*header.value)
}

/// How the request body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BodyFraming {
    /// No Content-Length and no Transfer-Encoding: the request has no body.
    None,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// A chunked body follows; decode it with `ChunkedDecoder`.
    Chunked,
}

/// A parsed and validated request head.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestHead {
    pub method: Method,
    /// The request-target exactly as sent; see [`split_target`].
    pub target: Box<str>,
    pub version: Version,
    pub headers: Vec<Header>,
    pub body: BodyFraming,
    /// Whether the connection persists after this exchange (RFC 9112 §9.3): HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    pub keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request (HTTP/1.0 ones are ignored, RFC 9110
    /// §10.1.1). Other expectations are left in `headers` for the caller to answer 417.
    pub expect_continue: bool,
}

impl RequestHead {
    /// The value of the first field named `name` (ASCII case-insensitive).
    #[inline]
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        first_named(&self.headers, name)
    }

    /// The values of every field named `name`, in the order sent.
    #[inline]
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
        all_named(&self.headers, name)
    }

    /// The authority the request is for: an absolute-form target's authority wins over `Host`
    /// (RFC 9112 §3.2.2); otherwise the `Host` value, which the parser has validated as ASCII.
    #[must_use]
    pub fn host(&self) -> Option<&str> {
        if let Some((Some(authority), _, _)) = split_target(&self.target) {
            return Some(authority);
        }
        std::str::from_utf8(self.header("host")?).ok()
    }

    /// Writes the head back out in wire form; parsing the result yields an equal head. Used by
    /// the proxy to forward a request and by the fuzz target to check the parser.
    pub fn encode(&self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(self.method.as_str().as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(self.target.as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(self.version.as_str().as_bytes());
        buf.extend_from_slice(b"\r\n");
        for header in &self.headers {
            buf.extend_from_slice(header.name.as_bytes());
            buf.extend_from_slice(b": ");
            buf.extend_from_slice(&header.value);
            buf.extend_from_slice(b"\r\n");
        }
        buf.extend_from_slice(b"\r\n");
    }
}

/// Splits a request-target into `(authority, path, query)`.
///
/// origin-form `/p?q` gives `(None, "/p", Some("q"))`; absolute-form `http://h:1/p?q` gives
/// `(Some("h:1"), "/p", Some("q"))`, with path `"/"` when the target has none (RFC 9112
/// §3.2.1); asterisk-form gives `(None, "*", None)`. Returns `None` for anything else:
/// authority-form, other schemes, and an authority that is not `host [":" port]`
/// (`authority::is_valid_authority`: an empty host, a bad port, or userinfo, which RFC 9110
/// §4.2.4 says to treat as an error).
#[must_use]
pub fn split_target(target: &str) -> Option<(Option<&str>, &str, Option<&str>)> {
    if target == "*" {
        return Some((None, "*", None));
    }
    let (authority, rest) = if target.starts_with('/') {
        (None, target)
    } else {
        let after_scheme = strip_prefix_ignore_case(target, "http://")
            .or_else(|| strip_prefix_ignore_case(target, "https://"))?;
        let end = after_scheme.find(['/', '?']).unwrap_or(after_scheme.len());
        let authority = &after_scheme[..end];
        if !is_valid_authority(authority.as_bytes(), false) {
            return None;
        }
        (Some(authority), &after_scheme[end..])
    };
    // `memchr`, not `split_once('?')`: this runs several times per request (routing, the
    // host check, the handlers), and `str`'s char search was 6 % of a cached response's
    // instructions (callgrind).
    let (path, query) = match memchr::memchr(b'?', rest.as_bytes()) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let path = if path.is_empty() { "/" } else { path };
    Some((authority, path, query))
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// A byte a request-target may hold: visible ASCII without `#` (a fragment is never sent,
/// RFC 9112 §3.2).
#[inline]
pub(crate) fn is_target_byte(byte: u8) -> bool {
    byte > b' ' && byte < 0x7f && byte != b'#'
}
