//! A request's HTTP/2 fields → the `RequestHead` ampd serves (RFC 9113 §8.1.1, §8.2, §8.3).
//!
//! Owns the pseudo-header rules, the field syntax HTTP/2 requires, and the HTTP/1 shape of the
//! result (`host` from `:authority`, cookie crumbs joined, body framing). Must not touch HPACK
//! or streams: the Connection feeds it decoded fields and turns its fault into RST_STREAM.

use super::is_connection_specific;
use crate::authority::is_valid_authority;
use crate::message::{
    is_target_byte, split_target, BodyFraming, Header, Method, RequestHead, Version,
};
use crate::token::{is_field_value, is_tchar};

/// Why a request's fields do not make a request: a stream error, PROTOCOL_ERROR (§8.1.1),
/// except where noted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MalformedRequest {
    /// A pseudo-header is missing, repeated, unknown, after a regular field, or a response
    /// one (`:status`); or its value is malformed (`:method` not a token, `:path` empty or not
    /// origin form). Holds its name, or `"unknown"`; `"trailers"` for any pseudo-header in an
    /// HTTP/3 trailer section (RFC 9114 §4.3).
    PseudoHeader(&'static str),
    /// A field name with upper case or a character outside tchar, or a value with NUL, CR or
    /// LF (§8.2.1; other controls but HTAB too, as ampd's HTTP/1 parser refuses them) or
    /// leading/trailing whitespace.
    FieldSyntax,
    /// A connection-specific field (`connection`, `keep-alive`, `proxy-connection`,
    /// `transfer-encoding`, `upgrade`), or `te` other than `trailers` (§8.2.2).
    ConnectionSpecific,
    /// `content-length` is not a number, differs between repeats, or is not 0 on a request
    /// whose HEADERS ended the stream (§8.1.1); over HTTP/3, the DATA received is more or
    /// less than it says (RFC 9114 §4.1.2).
    ContentLength,
    /// `:authority` or `host` is not `host [":" port]`, or they disagree; over HTTP/3, both
    /// are missing from an `http` or `https` request (RFC 9114 §4.3.1).
    Authority,
    /// CONNECT, which ampd does not tunnel over HTTP/2 (answered 405 rather than reset).
    Connect,
}

/// Builds the request of one header block, a field at a time as the HPACK (or QPACK) decoder
/// yields them (the first fault is kept and reported by `finish`). HTTP/3 shares it: its
/// pseudo-header and field rules (RFC 9114 §4.2, §4.3.1) are HTTP/2's (RFC 9113 §8.2, §8.3.1).
#[derive(Debug, Default)]
pub struct RequestBuilder {
    /// `Http2` unless made by `for_version`.
    version: Option<Version>,
    method: Option<Method>,
    scheme_seen: bool,
    /// `:scheme` is `http` or `https`, whose URIs have a mandatory authority.
    scheme_has_authority: bool,
    path: Option<Box<str>>,
    authority: Option<Box<str>>,
    headers: Vec<Header>,
    /// A regular field has been seen: pseudo-headers may no longer come (§8.3).
    regular_seen: bool,
    /// Where the joined `cookie` field is in `headers`.
    cookie_at: Option<usize>,
    /// Where the first `host` field is in `headers`, and how many came.
    host_at: Option<usize>,
    host_count: usize,
    content_length: Option<u64>,
    expect_continue: bool,
    fault: Option<MalformedRequest>,
}

impl RequestBuilder {
    #[must_use]
    pub fn new() -> RequestBuilder {
        RequestBuilder::default()
    }

    /// A builder whose request says `version` (`Http3` for HTTP/3's request streams).
    #[must_use]
    pub fn for_version(version: Version) -> RequestBuilder {
        RequestBuilder {
            version: Some(version),
            ..RequestBuilder::default()
        }
    }

    /// The next decoded field, in block order.
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.fault.is_some() {
            return;
        }
        let taken = if name.first() == Some(&b':') {
            self.pseudo_header(name, value)
        } else {
            self.regular_field(name, value)
        };
        if let Err(fault) = taken {
            self.fault = Some(fault);
        }
    }

    /// The request the fields make. `end_stream`: the HEADERS frame ended the stream (no
    /// body; HTTP/3 has no such flag and passes `false`). `version` is `Version::Http2` or the
    /// one given to `for_version`; `:authority` stands for `Host` (§8.3.1: it is
    /// added as a `host` field when the client sent none); `body` is `Length(n)` with a
    /// `content-length`, `None` when the stream ended with the head, otherwise `Chunked` (the
    /// server re-frames DATA as chunks for the HTTP/1 body readers); `keep_alive` true;
    /// `expect_continue` from `expect: 100-continue`.
    ///
    /// # Errors
    /// The list is malformed (§8.1.1).
    pub fn finish(self, end_stream: bool) -> Result<RequestHead, MalformedRequest> {
        if let Some(fault) = self.fault {
            return Err(fault);
        }
        let method = self
            .method
            .ok_or(MalformedRequest::PseudoHeader(":method"))?;
        // CONNECT has no :scheme or :path (§8.5); it is answered rather than reset.
        if method == Method::Connect {
            return Err(MalformedRequest::Connect);
        }
        if !self.scheme_seen {
            return Err(MalformedRequest::PseudoHeader(":scheme"));
        }
        let target = self.path.ok_or(MalformedRequest::PseudoHeader(":path"))?;
        // Origin form, or `*` for OPTIONS alone (§8.3.1, RFC 9112 §3.2.4).
        let origin_or_asterisk = matches!(split_target(&target), Some((None, _, _)));
        if !origin_or_asterisk || (&*target == "*" && method != Method::Options) {
            return Err(MalformedRequest::PseudoHeader(":path"));
        }

        // RFC 9114 §4.3.1 makes a MUST of what RFC 9113 §8.3.1 leaves to clients: a scheme
        // with a mandatory authority needs `:authority` or `Host`.
        let version = self.version.unwrap_or(Version::Http2);
        if version == Version::Http3
            && self.scheme_has_authority
            && self.authority.is_none()
            && self.host_at.is_none()
        {
            return Err(MalformedRequest::Authority);
        }
        let mut headers = self.headers;
        // ... and neither may be empty there (HTTP/1 allows an empty Host, RFC 9112 §3.2).
        let empty_host = self.host_at.is_some_and(|at| headers[at].value.is_empty());
        if version == Version::Http3 && empty_host {
            return Err(MalformedRequest::Authority);
        }
        if self.host_count > 1 {
            return Err(MalformedRequest::Authority);
        }
        if let Some(authority) = self.authority {
            match self.host_at {
                // §8.3.1: a Host that names another entity than :authority is malformed.
                Some(at) => {
                    if !headers[at].value.eq_ignore_ascii_case(authority.as_bytes()) {
                        return Err(MalformedRequest::Authority);
                    }
                }
                None => headers.insert(
                    0,
                    Header {
                        name: "host".into(),
                        value: authority.into_boxed_bytes(),
                    },
                ),
            }
        }

        let body = match self.content_length {
            // HEADERS with END_STREAM is followed by no DATA: any other length is wrong.
            Some(length) if end_stream && length != 0 => {
                return Err(MalformedRequest::ContentLength)
            }
            Some(length) => BodyFraming::Length(length),
            None if end_stream => BodyFraming::None,
            None => BodyFraming::Chunked,
        };
        Ok(RequestHead {
            method,
            target,
            version,
            headers,
            body,
            keep_alive: true,
            expect_continue: self.expect_continue,
        })
    }

    /// A pseudo-header (§8.3.1): known, once each, before every regular field.
    fn pseudo_header(&mut self, name: &[u8], value: &[u8]) -> Result<(), MalformedRequest> {
        let known = match name {
            b":method" => ":method",
            b":scheme" => ":scheme",
            b":path" => ":path",
            b":authority" => ":authority",
            // A response's pseudo-header in a request (h2spec 8.1.2.1).
            b":status" => return Err(MalformedRequest::PseudoHeader(":status")),
            _ => return Err(MalformedRequest::PseudoHeader("unknown")),
        };
        let fault = MalformedRequest::PseudoHeader(known);
        if self.regular_seen {
            return Err(fault);
        }
        match name {
            b":method" => {
                if self.method.is_some() {
                    return Err(fault);
                }
                self.method = Some(Method::from_token(value).ok_or(fault)?);
            }
            b":scheme" => {
                if self.scheme_seen || !is_scheme(value) {
                    return Err(fault);
                }
                self.scheme_seen = true;
                self.scheme_has_authority =
                    value.eq_ignore_ascii_case(b"http") || value.eq_ignore_ascii_case(b"https");
            }
            b":path" => {
                // Its form is checked by `finish`, once the method is known.
                if self.path.is_some()
                    || value.is_empty()
                    || !value.iter().all(|&b| is_target_byte(b))
                {
                    return Err(fault);
                }
                self.path = Some(ascii(value).ok_or(fault)?);
            }
            _ => {
                if self.authority.is_some() {
                    return Err(fault);
                }
                // No userinfo (§8.3.1), and the grammar ampd holds `Host` to.
                if !is_valid_authority(value, false) {
                    return Err(MalformedRequest::Authority);
                }
                self.authority = Some(ascii(value).ok_or(MalformedRequest::Authority)?);
            }
        }
        Ok(())
    }

    /// A regular field: lower-case token name, value without NUL/CR/LF or surrounding
    /// whitespace (§8.2.1), no connection-specific field (§8.2.2).
    fn regular_field(&mut self, name: &[u8], value: &[u8]) -> Result<(), MalformedRequest> {
        self.regular_seen = true;
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b) && !b.is_ascii_uppercase()) {
            return Err(MalformedRequest::FieldSyntax);
        }
        // RFC 9113 refuses NUL, CR and LF; the other controls are refused as ampd's HTTP/1
        // parser refuses them, so a request cannot carry over HTTP/2 what it could not over
        // HTTP/1 (to a CGI script or an upstream, say).
        let padded = matches!(value.first(), Some(b' ' | b'\t'))
            || matches!(value.last(), Some(b' ' | b'\t'));
        if padded || !is_field_value(value) {
            return Err(MalformedRequest::FieldSyntax);
        }
        if is_connection_specific(name) {
            return Err(MalformedRequest::ConnectionSpecific);
        }
        match name {
            b"te" if !value.eq_ignore_ascii_case(b"trailers") => {
                return Err(MalformedRequest::ConnectionSpecific)
            }
            b"content-length" => {
                let length = parse_content_length(value).ok_or(MalformedRequest::ContentLength)?;
                if self.content_length.is_some_and(|earlier| earlier != length) {
                    return Err(MalformedRequest::ContentLength);
                }
                self.content_length = Some(length);
            }
            b"host" => {
                if !is_valid_authority(value, true) {
                    return Err(MalformedRequest::Authority);
                }
                self.host_count += 1;
                self.host_at.get_or_insert(self.headers.len());
            }
            b"cookie" => {
                // §8.2.3: crumbs are joined with "; " for an HTTP/1 context.
                if let Some(at) = self.cookie_at {
                    let joined = &mut self.headers[at].value;
                    let mut cookie = std::mem::take(joined).into_vec();
                    cookie.extend_from_slice(b"; ");
                    cookie.extend_from_slice(value);
                    *joined = cookie.into_boxed_slice();
                    return Ok(());
                }
                self.cookie_at = Some(self.headers.len());
            }
            b"expect" => self.expect_continue |= value.eq_ignore_ascii_case(b"100-continue"),
            _ => {}
        }
        self.headers.push(Header {
            name: ascii(name).ok_or(MalformedRequest::FieldSyntax)?,
            value: value.into(),
        });
        Ok(())
    }
}

/// `bytes` as a string, when they are ASCII (every caller has checked a grammar that is).
fn ascii(bytes: &[u8]) -> Option<Box<str>> {
    std::str::from_utf8(bytes).ok().map(Into::into)
}

/// `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` (RFC 3986 §3.1).
fn is_scheme(value: &[u8]) -> bool {
    value.first().is_some_and(u8::is_ascii_alphabetic)
        && value
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// `1*DIGIT` that fits a `u64` (a list, even of equal members, is refused).
fn parse_content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |total, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        total.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}
