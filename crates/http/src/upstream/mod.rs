//! The sans-I/O side of the reverse proxy: what ampd sends an upstream and how it reads what
//! comes back (RFC 9110, RFC 9112, RFC 7239).
//!
//! Owns the upstream's wire protocol. Must not touch sockets, clocks, configuration or pools:
//! the server's proxy exchange feeds bytes in and writes the bytes out.
//!
//! * `parser.rs`: [`ResponseParser`], the resumable response-head parser and its line syntax.
//! * `head.rs`: [`ResponseHead`] and its helpers, [`Limits`], [`ResponseParse`].
//! * `framing.rs`: `Content-Length` / `Transfer-Encoding` validation and persistence.
//! * `body.rs`: [`response_body`], how the response body is delimited (RFC 9112 §6.3).
//! * `forward.rs`: [`write_request`], the request head re-serialised for the upstream.
//! * `forwarded.rs`: the `Forwarded` / `X-Forwarded-*` values (RFC 7239).
//! * `hop.rs`: [`is_hop_by_hop`] and the fields a `Connection` field names.
//! * `chunk.rs`: chunked framing of a relayed body ([`write_chunk_header`], [`LAST_CHUNK`]).
//! * `error.rs`: [`UpstreamError`]; every variant is a 502 for the client.
//!
//! Strictness is the point: a proxy that reads a response differently from the client behind
//! it, or a request differently from the upstream in front of it, lets one message smuggle
//! another. So the upstream's head is validated as strictly as RFC 9112 allows a recipient to
//! be, and the request is always written afresh from the parsed head, with one framing.

mod body;
mod chunk;
mod error;
mod forward;
mod forwarded;
pub(crate) mod framing;
mod head;
mod hop;
mod parser;

pub use body::{response_body, ResponseBody};
pub use chunk::{write_chunk_header, CHUNK_END, LAST_CHUNK};
pub use error::UpstreamError;
pub use forward::{write_request, ForwardBody, ForwardRequest};
pub use head::{Limits, ResponseHead, ResponseParse};
pub use hop::is_hop_by_hop;
pub use parser::ResponseParser;
