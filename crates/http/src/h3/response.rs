//! A response's heads and body → the frames of a request stream (RFC 9114 §4.1): any number of
//! interim (1xx) HEADERS, the final HEADERS with a QPACK field section, then DATA.
//!
//! Owns the `:status` field, which fields HTTP/3 must not carry (§4.2: the connection-specific
//! ones, whatever the handler's head had), and the check of a head against the peer's
//! SETTINGS_MAX_FIELD_SECTION_SIZE. Must not touch: what the response says (the handlers build
//! its `Head`), the order of heads (the handler sends interim ones first), QUIC.

use super::frame::{kind, write_header, write_headers};
use super::qpack::Encoder;
use crate::h2::fields::is_connection_specific;
use crate::response_head::Head;

/// What a field costs in a field section's size beyond its name and value (§4.2.2, as in
/// RFC 9113 §6.5.2).
const FIELD_OVERHEAD: u64 = 32;

/// Why a head cannot be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// The head's field section (`size` as §4.2.2 counts it) is larger than the peer's
    /// SETTINGS_MAX_FIELD_SECTION_SIZE (`limit`): the client would refuse it (§4.2.2), so the
    /// caller sends a smaller head (a 500) instead.
    TooLarge { size: u64, limit: u64 },
    /// 101 (Switching Protocols): HTTP/3 has no upgrade (§4.1).
    SwitchingProtocols,
}

impl std::fmt::Display for HeadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeadError::TooLarge { size, limit } => write!(
                f,
                "a response field section of {size} octets, past the client's limit of {limit}"
            ),
            HeadError::SwitchingProtocols => write!(f, "a 101 response over HTTP/3"),
        }
    }
}

impl std::error::Error for HeadError {}

/// Appends the HEADERS frame of `head`: `:status` first (§4.3.2), then the fields in order with
/// their names in lower case (§4.2: an upper-case name is malformed), leaving out any
/// connection-specific field and any pseudo-header a head might hold (a handler's own `push`
/// does not check; HTTP/3 forbids both, §4.2, §4.3). A 1xx head is interim: any number may
/// come before the final head on the same stream (§4.1), 103 Early Hints and 100 Continue
/// among them.
///
/// # Errors
/// `HeadError::TooLarge` when the field section passes `max_field_section` (the peer's
/// SETTINGS_MAX_FIELD_SECTION_SIZE, `None` for unlimited), `HeadError::SwitchingProtocols`
/// for a 101; nothing is appended then.
pub fn write_response_head(
    encoder: &Encoder,
    head: &Head,
    max_field_section: Option<u64>,
    out: &mut Vec<u8>,
) -> Result<(), HeadError> {
    if head.status == 101 {
        return Err(HeadError::SwitchingProtocols);
    }
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
    let status_field = std::iter::once((&b":status"[..], &digits[..]));
    let regular = spans
        .iter()
        .map(|&(start, end, value)| (&names[start..end], value))
        .filter(|&(name, _)| name.first() != Some(&b':') && !is_connection_specific(name));
    let fields = status_field.chain(regular);
    if let Some(limit) = max_field_section {
        let size = fields
            .clone()
            .map(|(name, value)| (name.len() + value.len()) as u64 + FIELD_OVERHEAD)
            .sum();
        if size > limit {
            return Err(HeadError::TooLarge { size, limit });
        }
    }
    let mut section = Vec::new();
    encoder.encode_section(fields, &mut section);
    write_headers(&section, out);
    Ok(())
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
