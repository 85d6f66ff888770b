//! Moving a body across the proxy, re-framed on the way: the client's request body to the
//! upstream, and the upstream's response body to the client. Only what the other side has room
//! for is taken, so a slow reader on either side stops the reading on the other (bounded
//! buffers both ways; ampd never holds a whole upload or download).
//!
//! Owns: framing on each side (Content-Length, chunked, close-delimited) and the request bytes
//! kept for a retry.
//! Must not touch: sockets, the exchange's decisions (`mod.rs`).

use ampd_http::chunked::ChunkedDecoder;
use ampd_http::fastcgi;
use ampd_http::upstream::{write_chunk_header, ForwardBody, ResponseBody, LAST_CHUNK};

use crate::conn::BodyLeft;
use crate::response::body_stage::BodyStage;

/// Request bytes (head and body as forwarded) kept to send again to the next server when an
/// attempt fails before any response: past this, the request cannot be retried.
pub const RETRY_KEEP: usize = 64 << 10;

/// How the request body goes to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyEncoding {
    /// HTTP/1.1: with its length, or chunked if the client chunked it.
    Http,
    /// A CGI script's standard input: the bytes alone, their length in `CONTENT_LENGTH`.
    Raw,
    /// FastCGI `FCGI_STDIN` records (request id 1), ended by an empty one.
    FastCgi,
}

/// The FastCGI request id of ampd's requests: one request per connection at a time.
pub const FASTCGI_REQUEST: u16 = 1;

/// The client's request body on its way to the upstream.
#[derive(Debug)]
pub struct RequestRelay {
    /// What is left to read of it (`None`: no body, or all read).
    left: Option<BodyLeft>,
    encoding: BodyEncoding,
    /// How the body is framed upstream: chunked if the client chunked it, else its length.
    framing: ForwardBody,
    /// A chunked body read whole before anything goes out, for an upstream that must be told
    /// its length first (`Raw`, `FastCgi`: `CONTENT_LENGTH`); `spooled` of it went out.
    spool: Option<Vec<u8>>,
    spooled: usize,
    /// Everything forwarded so far, while it fits in `RETRY_KEEP`.
    kept: Option<Vec<u8>>,
}

/// Why the client's body cannot be forwarded: the status to answer (`400` broken chunking,
/// `413` past the limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyRefused(pub u16);

impl RequestRelay {
    pub fn new(left: Option<BodyLeft>, encoding: BodyEncoding) -> RequestRelay {
        let framing = match &left {
            None => ForwardBody::None,
            Some(BodyLeft::Length(length)) => ForwardBody::Length(*length),
            Some(BodyLeft::Chunked(_)) => ForwardBody::Chunked,
        };
        let spool = (encoding != BodyEncoding::Http && matches!(left, Some(BodyLeft::Chunked(_))))
            .then(Vec::new);
        RequestRelay {
            left,
            encoding,
            framing,
            spool,
            spooled: 0,
            kept: Some(Vec::new()),
        }
    }

    /// The whole body has been read from the client and forwarded (or there was none).
    pub fn done(&self) -> bool {
        self.left.is_none()
            && self
                .spool
                .as_ref()
                .is_none_or(|spool| self.spooled == spool.len())
    }

    /// A chunked body is still being read whole (`spool`): nothing can go upstream yet.
    pub fn spooling(&self) -> bool {
        self.spool.is_some() && self.left.is_some()
    }

    /// The body's length, once known (`CONTENT_LENGTH`); `None` without a body.
    pub fn content_length(&self) -> Option<u64> {
        match (&self.spool, self.framing) {
            (Some(spool), _) => Some(spool.len() as u64),
            (None, ForwardBody::Length(length)) => Some(length),
            _ => None,
        }
    }

    /// The bytes forwarded so far, if they can all be sent again.
    pub fn kept(&self) -> Option<&[u8]> {
        self.kept.as_deref()
    }

    /// Read a chunked body into the spool; returns the input bytes used.
    pub fn spool(&mut self, input: &[u8]) -> Result<usize, BodyRefused> {
        let (Some(BodyLeft::Chunked(decoder)), Some(spool)) = (self.left.as_mut(), &mut self.spool)
        else {
            return Ok(0);
        };
        let progress = decoder
            .feed(input, &mut |data| spool.extend_from_slice(data))
            .map_err(|error| BodyRefused(error.status()))?;
        if progress.done {
            self.left = None;
            if spool.is_empty() {
                // Nothing to send: the body is as if there were none.
                self.spool = None;
                self.framing = ForwardBody::None;
            }
        }
        Ok(progress.consumed)
    }

    /// Move body bytes from `input` (or the spool) to `out`, at most about `room` of them.
    /// Returns the input bytes used.
    pub fn relay(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        room: usize,
    ) -> Result<usize, BodyRefused> {
        let start = out.len();
        let used = if let Some(spool) = &self.spool {
            if self.left.is_some() {
                return Ok(0);
            }
            let take = (spool.len() - self.spooled).min(room);
            encode(
                self.encoding,
                &spool[self.spooled..self.spooled + take],
                out,
            );
            self.spooled += take;
            if self.spooled == spool.len() {
                end(self.encoding, out);
            }
            0
        } else {
            let Some(left) = self.left.as_mut() else {
                return Ok(0);
            };
            let encoding = self.encoding;
            let (used, done) = match left {
                BodyLeft::Length(remaining) => {
                    let take = usize::try_from(*remaining)
                        .unwrap_or(usize::MAX)
                        .min(input.len())
                        .min(room);
                    encode(encoding, &input[..take], out);
                    *remaining -= take as u64;
                    (take, *remaining == 0)
                }
                BodyLeft::Chunked(decoder) => {
                    let window = &input[..input.len().min(room.max(64))];
                    let progress = decoder
                        .feed(window, &mut |data| {
                            write_chunk_header(data.len(), out);
                            out.extend_from_slice(data);
                            out.extend_from_slice(b"\r\n");
                        })
                        .map_err(|error| BodyRefused(error.status()))?;
                    if progress.done {
                        out.extend_from_slice(LAST_CHUNK);
                    }
                    (progress.consumed, progress.done)
                }
            };
            if done {
                self.left = None;
                end(encoding, out);
            }
            used
        };
        if let Some(kept) = self.kept.as_mut() {
            if kept.len() + (out.len() - start) <= RETRY_KEEP {
                kept.extend_from_slice(&out[start..]);
            } else {
                self.kept = None;
            }
        }
        Ok(used)
    }

    /// The framing the upstream request announces.
    pub fn forward_body(&self) -> ForwardBody {
        self.framing
    }
}

/// Body bytes in the upstream's encoding (chunks are written by the caller, as they are
/// decoded).
fn encode(encoding: BodyEncoding, data: &[u8], out: &mut Vec<u8>) {
    match encoding {
        BodyEncoding::Http | BodyEncoding::Raw => out.extend_from_slice(data),
        BodyEncoding::FastCgi if data.is_empty() => {}
        BodyEncoding::FastCgi => fastcgi::write_stdin(out, FASTCGI_REQUEST, data),
    }
}

/// What ends a body in the upstream's encoding once its last byte went out.
fn end(encoding: BodyEncoding, out: &mut Vec<u8>) {
    if encoding == BodyEncoding::FastCgi {
        fastcgi::write_stdin(out, FASTCGI_REQUEST, &[]);
    }
}

/// How the response body is framed towards the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFraming {
    /// No body (HEAD, 1xx, 204, 304).
    None,
    /// `Content-Length` from the upstream, passed on.
    Length,
    /// Re-chunked (the upstream chunked it, or ends it by closing, and the client speaks 1.1).
    Chunked,
    /// Ended by closing the connection (an HTTP/1.0 client of a body without a length).
    Close,
}

/// How the upstream's body ends.
#[derive(Debug)]
enum UpstreamBody {
    None,
    Length(u64),
    Chunked(ChunkedDecoder),
    UntilClose,
}

/// The upstream's response body on its way to the client: de-framed from the upstream's
/// framing, passed through the response stage's body filters (`BodyStage`, none for most
/// responses), framed for the client.
#[derive(Debug)]
pub struct ResponseRelay {
    upstream: UpstreamBody,
    pub framing: ClientFraming,
    /// Body bytes passed to the client (as sent: transformed, without chunk framing).
    pub body_bytes: u64,
    stage: BodyStage,
    /// The end of the body has gone out (the filters' rest, the last chunk).
    ended: bool,
    /// The plain body taken from the upstream in one call, on its way into the filters.
    plain: Vec<u8>,
    /// What the filters made of it, on its way to the client's framing.
    transformed: Vec<u8>,
}

/// The upstream's body broke its framing (bad chunking), or a body filter failed: the
/// response cannot be completed (why, for the error log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrokenBody(pub &'static str);

impl ResponseRelay {
    pub fn new(body: &ResponseBody, client_http11: bool) -> ResponseRelay {
        let (upstream, framing) = match body {
            ResponseBody::None | ResponseBody::Tunnel => (UpstreamBody::None, ClientFraming::None),
            ResponseBody::Length(length) => (UpstreamBody::Length(*length), ClientFraming::Length),
            ResponseBody::Chunked => (
                UpstreamBody::Chunked(ChunkedDecoder::new()),
                chunked_or_close(client_http11),
            ),
            ResponseBody::UntilClose => (UpstreamBody::UntilClose, chunked_or_close(client_http11)),
        };
        ResponseRelay {
            upstream,
            framing,
            body_bytes: 0,
            stage: BodyStage::default(),
            ended: false,
            plain: Vec::new(),
            transformed: Vec::new(),
        }
    }

    /// Pass the body through `stage`'s filters: its length is then unknown, so it goes out
    /// chunked to an HTTP/1.1 client and delimited by the close otherwise (HTTP/1.0; an
    /// HTTP/2 stream, whose DATA frames carry it as it is). A response without a body (to
    /// HEAD, a 204) has nothing to transform: its head alone says what a GET would get.
    pub fn transform(&mut self, stage: BodyStage, client_http11: bool) {
        if !stage.is_active() || self.framing == ClientFraming::None {
            return;
        }
        self.framing = chunked_or_close(client_http11);
        self.stage = stage;
    }

    /// Whether the body is complete without the upstream closing.
    pub fn complete(&self) -> bool {
        match &self.upstream {
            UpstreamBody::None => true,
            UpstreamBody::Length(left) => *left == 0,
            UpstreamBody::Chunked(decoder) => decoder.is_done(),
            UpstreamBody::UntilClose => false,
        }
    }

    /// Whether the upstream connection may be reused after this body (its end is known without
    /// a close).
    pub fn delimited(&self) -> bool {
        !matches!(self.upstream, UpstreamBody::UntilClose)
    }

    /// Move body bytes from `input` (the upstream's) to `out` (the client's), at most about
    /// `room`. Returns the input bytes used; the body's end goes out with its last bytes.
    pub fn relay(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        room: usize,
    ) -> Result<usize, BrokenBody> {
        let framing = self.framing;
        let filtered = self.stage.is_active();
        let plain = &mut self.plain;
        plain.clear();
        let mut passed = 0u64;
        // A piece of the plain body: to the filters, or framed for the client as it is.
        let mut deliver = |data: &[u8], out: &mut Vec<u8>| {
            if filtered {
                plain.extend_from_slice(data);
            } else {
                emit(framing, data, out);
                passed += data.len() as u64;
            }
        };
        let used = match &mut self.upstream {
            UpstreamBody::None => 0,
            UpstreamBody::Length(left) => {
                let take = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(input.len())
                    .min(room);
                deliver(&input[..take], out);
                *left -= take as u64;
                take
            }
            UpstreamBody::UntilClose => {
                let take = input.len().min(room);
                deliver(&input[..take], out);
                take
            }
            UpstreamBody::Chunked(decoder) => {
                let window = &input[..input.len().min(room.max(64))];
                let progress = decoder
                    .feed(window, &mut |data| deliver(data, out))
                    .map_err(|_| BrokenBody("invalid chunked body"))?;
                progress.consumed
            }
        };
        self.body_bytes += passed;
        if filtered && !self.plain.is_empty() {
            self.transformed.clear();
            self.stage
                .feed(&self.plain, &mut self.transformed)
                .map_err(|_| BrokenBody("the body filter failed"))?;
            self.pass_transformed(out);
        }
        if self.complete() {
            self.end(out)?;
        }
        Ok(used)
    }

    /// The upstream paused (everything it sent is used and more is awaited): what the filters
    /// hold of the body so far goes out now, so a streamed response arrives live.
    pub fn upstream_paused(&mut self, out: &mut Vec<u8>) -> Result<(), BrokenBody> {
        if self.ended || !self.stage.is_active() {
            return Ok(());
        }
        self.transformed.clear();
        self.stage
            .pause(&mut self.transformed)
            .map_err(|_| BrokenBody("the body filter failed"))?;
        self.pass_transformed(out);
        Ok(())
    }

    /// The body is complete: the filters' rest and the last chunk, once.
    pub fn end(&mut self, out: &mut Vec<u8>) -> Result<(), BrokenBody> {
        if std::mem::replace(&mut self.ended, true) {
            return Ok(());
        }
        if self.stage.is_active() {
            self.transformed.clear();
            self.stage
                .finish(&mut self.transformed)
                .map_err(|_| BrokenBody("the body filter failed"))?;
            self.pass_transformed(out);
        }
        if self.framing == ClientFraming::Chunked {
            out.extend_from_slice(LAST_CHUNK);
        }
        Ok(())
    }

    /// Frame what the filters made (`transformed`) for the client.
    fn pass_transformed(&mut self, out: &mut Vec<u8>) {
        emit(self.framing, &self.transformed, out);
        self.body_bytes += self.transformed.len() as u64;
    }

    /// The upstream closed: a close-delimited body ends here (returns true); any other body
    /// that is not complete was cut short.
    pub fn upstream_closed(&mut self, out: &mut Vec<u8>) -> Result<bool, BrokenBody> {
        match self.upstream {
            UpstreamBody::UntilClose => {
                self.upstream = UpstreamBody::None;
                self.end(out)?;
                Ok(true)
            }
            _ => Ok(self.complete()),
        }
    }
}

fn chunked_or_close(client_http11: bool) -> ClientFraming {
    if client_http11 {
        ClientFraming::Chunked
    } else {
        ClientFraming::Close
    }
}

fn emit(framing: ClientFraming, data: &[u8], out: &mut Vec<u8>) {
    if data.is_empty() {
        return;
    }
    if framing == ClientFraming::Chunked {
        write_chunk_header(data.len(), out);
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_request_is_forwarded_chunked_and_kept_for_a_retry() {
        let mut relay = RequestRelay::new(
            Some(BodyLeft::Chunked(ChunkedDecoder::new())),
            BodyEncoding::Http,
        );
        let mut out = Vec::new();
        let input = b"5\r\nhello\r\n0\r\n\r\nGET /next";
        let used = relay.relay(input, &mut out, 1 << 20).unwrap();
        assert_eq!(&input[..used], b"5\r\nhello\r\n0\r\n\r\n");
        assert!(relay.done());
        assert_eq!(out, b"5\r\nhello\r\n0\r\n\r\n");
        assert_eq!(relay.kept(), Some(&out[..]));
    }

    #[test]
    fn a_length_body_moves_only_as_much_as_there_is_room_for() {
        let mut relay = RequestRelay::new(Some(BodyLeft::Length(10)), BodyEncoding::Http);
        let mut out = Vec::new();
        assert_eq!(relay.relay(b"0123456789tail", &mut out, 4).unwrap(), 4);
        assert!(!relay.done());
        assert_eq!(relay.relay(b"456789tail", &mut out, 100).unwrap(), 6);
        assert!(relay.done());
        assert_eq!(out, b"0123456789");
    }

    #[test]
    fn a_large_body_is_not_kept() {
        let mut relay = RequestRelay::new(
            Some(BodyLeft::Length(RETRY_KEEP as u64 + 1)),
            BodyEncoding::Http,
        );
        let input = vec![b'x'; RETRY_KEEP + 1];
        let mut out = Vec::new();
        relay.relay(&input, &mut out, usize::MAX).unwrap();
        assert!(relay.kept().is_none());
    }

    #[test]
    fn broken_request_chunking_is_refused_with_400() {
        let mut relay = RequestRelay::new(
            Some(BodyLeft::Chunked(ChunkedDecoder::new())),
            BodyEncoding::Http,
        );
        let mut out = Vec::new();
        assert_eq!(relay.relay(b"zz\r\n", &mut out, 100), Err(BodyRefused(400)));
    }

    #[test]
    fn a_close_delimited_response_is_rechunked_for_http11_and_ended_by_the_close() {
        let mut relay = ResponseRelay::new(&ResponseBody::UntilClose, true);
        let mut out = Vec::new();
        assert_eq!(relay.relay(b"abc", &mut out, 100).unwrap(), 3);
        assert!(!relay.complete());
        assert!(relay.upstream_closed(&mut out).unwrap());
        assert_eq!(out, b"3\r\nabc\r\n0\r\n\r\n");
        assert_eq!(relay.body_bytes, 3);
    }

    #[test]
    fn a_chunked_response_to_an_http10_client_is_decoded_and_ends_with_the_close() {
        let mut relay = ResponseRelay::new(&ResponseBody::Chunked, false);
        assert_eq!(relay.framing, ClientFraming::Close);
        let mut out = Vec::new();
        relay
            .relay(b"3\r\nabc\r\n0\r\n\r\n", &mut out, 100)
            .unwrap();
        assert!(relay.complete());
        assert_eq!(out, b"abc");
    }

    #[test]
    fn a_length_response_cut_short_is_not_complete() {
        let mut relay = ResponseRelay::new(&ResponseBody::Length(5), true);
        let mut out = Vec::new();
        relay.relay(b"abc", &mut out, 100).unwrap();
        assert!(!relay.upstream_closed(&mut out).unwrap());
        assert_eq!(relay.relay(b"de", &mut out, 1).unwrap(), 1);
        assert!(!relay.complete());
    }

    #[test]
    fn broken_response_chunking_is_reported() {
        let mut relay = ResponseRelay::new(&ResponseBody::Chunked, true);
        let mut out = Vec::new();
        assert_eq!(relay.relay(b"5\r\nab", &mut out, 100).unwrap(), 5);
        assert_eq!(
            relay.relay(b"cdeXX", &mut out, 100),
            Err(BrokenBody("invalid chunked body"))
        );
    }
}
