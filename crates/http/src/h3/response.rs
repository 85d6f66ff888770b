//! A response's head and body → the frames of a request stream (RFC 9114 §4.1): HEADERS with
//! a QPACK field section, then DATA.
//!
//! Owns the `:status` field and which fields HTTP/3 must not carry (§4.2: the
//! connection-specific ones, whatever the handler's head had). Must not touch: what the
//! response says (the handlers build its `Head`), QUIC.

use super::frame::{kind, write_header, write_headers};
use super::qpack::Encoder;
use crate::h2::fields::is_connection_specific;
use crate::response_head::Head;

/// Appends the HEADERS frame of `head`: `:status` first (§4.3.2), then the fields in order with
/// their names in lower case (§4.2: an upper-case name is malformed), leaving out any
/// connection-specific field and any pseudo-header a head might hold (a handler's own `push`
/// does not check; HTTP/3 forbids both, §4.2, §4.3).
pub fn write_response_head(encoder: &Encoder, head: &Head, out: &mut Vec<u8>) {
    let mut digits = [b'0'; 3];
    let mut status = head.status.min(999);
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (status % 10) as u8;
        status /= 10;
    }
    // The lower-cased names back to back, each field as its name's span and its value.
    let mut names = Vec::new();
    let mut spans = Vec::with_capacity(head.len());
    for (name, value) in head.fields() {
        let start = names.len();
        names.extend(name.iter().map(u8::to_ascii_lowercase));
        spans.push((start, names.len(), value));
    }
    let mut section = Vec::new();
    let status_field = std::iter::once((&b":status"[..], &digits[..]));
    let regular = spans
        .iter()
        .map(|&(start, end, value)| (&names[start..end], value))
        .filter(|&(name, _)| name.first() != Some(&b':') && !is_connection_specific(name));
    encoder.encode_section(status_field.chain(regular), &mut section);
    write_headers(&section, out);
}

/// Appends the header of a DATA frame of `length` octets: its payload follows as is (so a
/// file's bytes are not copied into a frame buffer first). A zero-length DATA frame is legal
/// but never useful: callers skip it.
pub fn write_data_header(length: u64, out: &mut Vec<u8>) {
    write_header(kind::DATA, length, out);
}

/// Appends a DATA frame carrying `payload`.
pub fn write_data(payload: &[u8], out: &mut Vec<u8>) {
    write_data_header(payload.len() as u64, out);
    out.extend_from_slice(payload);
}
