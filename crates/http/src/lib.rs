//! `ampd-http`: ampd's sans-I/O HTTP core: HTTP/1.x (RFC 9110, RFC 9112) and HTTP/2 (RFC 9113).
//!
//! Everything here takes bytes (and, where time matters, unix seconds passed by the caller)
//! and returns values. No module makes a system call, reads a clock or uses `unsafe`, so every
//! function can be unit-tested, property-tested and fuzzed, and every engine of the server
//! shares one protocol implementation.
//!
//! * [`accept`]: `Accept`, `Accept-Encoding` and `Accept-Language` with weights, and the
//!   choice of a coding or a variant by them (RFC 9110 §12).
//! * [`authority`]: `host [":" port]` of absolute-form targets and `Host`.
//! * [`cgi`]: the response head of a CGI script or a FastCGI application (RFC 3875 §6).
//! * [`message`]: the message vocabulary: [`Method`], [`Version`], [`Header`], [`RequestHead`].
//! * [`head`]: the one HTTP/1 head reader (lines, limits, field-line syntax, transfer codings)
//!   under the request, upstream-response and CGI parsers.
//! * [`request`]: resumable request-head parser ([`HeadParser`]).
//! * [`error`]: [`ParseError`], each variant with the status to answer.
//! * [`response`]: status line and header encoder into a caller's buffer.
//! * [`response_head`]: a response head as data ([`response_head::Head`]), written as HTTP/1
//!   here and HPACK-encoded by [`h2`].
//! * [`date`]: IMF-fixdate formatting and HTTP-date parsing.
//! * [`range`], [`multipart`]: `Range` requests and `multipart/byteranges` framing.
//! * [`conditional`]: entity tags and the RFC 9110 §13.2.2 precondition order.
//! * [`coding`]: `Accept-Encoding` negotiation.
//! * [`chunked`]: resumable chunked body decoder (request bodies, and the upstream responses
//!   the proxy relays).
//! * [`fastcgi`]: the FastCGI 1.0 record codec, client side: records, name-value pairs and a
//!   streaming reader of an application's answer.
//! * [`proxy_protocol`]: the PROXY protocol header (v1 text, v2 binary) a load balancer sends
//!   first.
//! * [`upstream`]: the reverse proxy's side of HTTP/1.1: the upstream's response head
//!   ([`upstream::ResponseParser`]), its body framing, and the request head written for it.
//! * [`h2`]: HTTP/2 (RFC 9113) and HPACK (RFC 7541): frames, header compression, one
//!   connection's streams and flow control, request fields → `RequestHead`, a `Head` → HEADERS.
//! * [`h3`]: HTTP/3 (RFC 9114) and QPACK (RFC 9204) over the streams of a QUIC connection
//!   the server runs: frames, settings, field sections, typed errors.
//! * [`fuzz`]: the entry point shared by the fuzz target and the corpus replay test.
#![forbid(unsafe_code)]

pub mod accept;
pub mod authority;
pub mod cgi;
pub mod chunked;
pub mod coding;
pub mod conditional;
pub mod date;
pub mod error;
pub mod fastcgi;
mod field_coding;
mod framing;
pub mod fuzz;
pub mod h2;
pub mod h3;
pub mod head;
pub mod message;
pub mod multipart;
pub mod proxy_protocol;
pub mod range;
pub mod request;
pub mod response;
pub mod response_head;
mod token;
pub mod upstream;

pub use chunked::{ChunkedDecoder, ChunkedError, Progress};
pub use coding::{negotiate, Coding};
pub use conditional::{evaluate, if_range_allows_partial, EntityTag, Precondition, Validators};
pub use date::{format_http_date, parse_http_date};
pub use error::ParseError;
pub use multipart::Multipart;
pub use range::{parse_range, ByteRange, RangeOutcome};
pub use request::{
    split_target, BodyFraming, HeadParser, Header, Limits, Method, Parse, RequestHead, Version,
};
pub use token::{is_tchar, is_token};
