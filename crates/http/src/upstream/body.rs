//! How long a response body is (RFC 9112 §6.3), given the head and the request it answers.
//!
//! Owns `ResponseBody` and `response_body`. Must not read the body (the caller relays it,
//! decoding chunks with `ChunkedDecoder`) and must not parse syntax.

use crate::request::Method;

use super::error::UpstreamError;
use super::framing::{self, Declared};
use super::head::ResponseHead;

/// How the response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResponseBody {
    /// No body: the next response (or the end of the exchange) follows the head.
    None,
    /// Exactly this many bytes follow the head.
    Length(u64),
    /// A chunked body follows; decode it with `ChunkedDecoder` and re-frame it for the client.
    Chunked,
    /// The body runs until the upstream closes the connection (RFC 9112 §6.3 item 8), which
    /// therefore cannot be reused.
    UntilClose,
    /// The connection stops being HTTP after the head: `101 Switching Protocols`, or a 2xx to
    /// CONNECT. Bytes are relayed both ways until either side closes.
    Tunnel,
}

impl ResponseBody {
    /// Whether the body's end is known from its framing (`None`, `Length`, `Chunked`): only
    /// then can the upstream connection carry another request, if the head's `keep_alive`
    /// says so and the body was read to its end.
    #[must_use]
    pub fn is_delimited(&self) -> bool {
        matches!(self, Self::None | Self::Length(_) | Self::Chunked)
    }
}

/// The framing of `head`'s body, for a request made with `request_method` (RFC 9112 §6.3, in
/// its order): a `101` or a 2xx to CONNECT is a tunnel; a response to HEAD, any other 1xx,
/// 204 and 304 have no body whatever their fields say; then chunked, then Content-Length,
/// then until close.
///
/// A `101` is only valid after a request that asked to upgrade; the caller, which knows
/// whether it did, refuses an unasked-for one.
///
/// # Errors
/// The framing faults the parser refuses (so a head built by hand is judged the same way),
/// and [`UpstreamError::UnsupportedTransferCoding`] when a body that will be read is under a
/// coding besides chunked.
pub fn response_body(
    head: &ResponseHead,
    request_method: &Method,
) -> Result<ResponseBody, UpstreamError> {
    let declared = framing::declared(head.version, &head.headers)?;
    let status = head.status;
    if status == 101 || (*request_method == Method::Connect && (200..300).contains(&status)) {
        return Ok(ResponseBody::Tunnel);
    }
    if *request_method == Method::Head || status < 200 || status == 204 || status == 304 {
        return Ok(ResponseBody::None);
    }
    Ok(match declared {
        Declared::Chunked {
            other_codings: true,
        } => return Err(UpstreamError::UnsupportedTransferCoding),
        Declared::Chunked {
            other_codings: false,
        } => ResponseBody::Chunked,
        Declared::Length(length) => ResponseBody::Length(length),
        Declared::Unframed => ResponseBody::UntilClose,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::{Limits, ResponseParse, ResponseParser};

    fn head(input: &[u8]) -> ResponseHead {
        match ResponseParser::new(Limits::default()).parse(input) {
            Ok(ResponseParse::Complete { head, .. }) => head,
            other => panic!("{}: {other:?}", input.escape_ascii()),
        }
    }

    fn body(input: &[u8], method: &Method) -> Result<ResponseBody, UpstreamError> {
        response_body(&head(input), method)
    }

    #[test]
    fn framing_follows_rfc_9112_section_6_3() {
        let get = Method::Get;
        let cases: &[(&[u8], Method, ResponseBody)] = &[
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
                get.clone(),
                ResponseBody::Length(12),
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                get.clone(),
                ResponseBody::Chunked,
            ),
            (
                b"HTTP/1.1 200 OK\r\n\r\n",
                get.clone(),
                ResponseBody::UntilClose,
            ),
            (
                b"HTTP/1.0 200 OK\r\n\r\n",
                Method::Post,
                ResponseBody::UntilClose,
            ),
            (
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
                get.clone(),
                ResponseBody::Length(0),
            ),
            // HEAD, 1xx, 204 and 304 have no body whatever their fields say.
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
                Method::Head,
                ResponseBody::None,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                Method::Head,
                ResponseBody::None,
            ),
            (b"HTTP/1.1 200 OK\r\n\r\n", Method::Head, ResponseBody::None),
            (
                b"HTTP/1.1 100 Continue\r\n\r\n",
                Method::Put,
                ResponseBody::None,
            ),
            (
                b"HTTP/1.1 103 Early Hints\r\n\r\n",
                get.clone(),
                ResponseBody::None,
            ),
            (
                b"HTTP/1.1 204 No Content\r\n\r\n",
                Method::Delete,
                ResponseBody::None,
            ),
            (
                b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
                get.clone(),
                ResponseBody::None,
            ),
            (
                b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
                get.clone(),
                ResponseBody::None,
            ),
            (
                b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                get.clone(),
                ResponseBody::None,
            ),
            // Tunnels.
            (
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
                get.clone(),
                ResponseBody::Tunnel,
            ),
            (
                b"HTTP/1.1 200 Connection Established\r\n\r\n",
                Method::Connect,
                ResponseBody::Tunnel,
            ),
            (
                b"HTTP/1.1 407 Proxy Auth\r\nContent-Length: 3\r\n\r\n",
                Method::Connect,
                ResponseBody::Length(3),
            ),
        ];
        for (input, method, expected) in cases {
            assert_eq!(
                body(input, method),
                Ok(*expected),
                "{method} {}",
                input.escape_ascii()
            );
        }
    }

    #[test]
    fn a_coding_besides_chunked_is_refused_when_a_body_follows() {
        let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert!(matches!(
            ResponseParser::new(Limits::default()).parse(input),
            Ok(ResponseParse::Complete { .. })
        ));
        assert_eq!(
            body(input, &Method::Get),
            Err(UpstreamError::UnsupportedTransferCoding)
        );
        assert_eq!(body(input, &Method::Head), Ok(ResponseBody::None));
    }

    #[test]
    fn a_head_built_by_hand_is_judged_like_a_parsed_one() {
        let mut built = head(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n");
        built.headers.push(crate::request::Header {
            name: "Transfer-Encoding".into(),
            value: b"chunked"[..].into(),
        });
        assert_eq!(
            response_body(&built, &Method::Get),
            Err(UpstreamError::ContentLengthWithTransferEncoding)
        );
    }

    #[test]
    fn only_delimited_bodies_leave_a_reusable_connection() {
        assert!(ResponseBody::None.is_delimited());
        assert!(ResponseBody::Length(0).is_delimited());
        assert!(ResponseBody::Chunked.is_delimited());
        assert!(!ResponseBody::UntilClose.is_delimited());
        assert!(!ResponseBody::Tunnel.is_delimited());
    }
}
