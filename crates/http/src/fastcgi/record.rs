//! Records (§3.3): the record types and the fixed 8-byte header every record starts with.
//!
//! Owns the header layout and padding. Must not interpret content (`reader.rs`, `write.rs`).

use super::MAX_CONTENT;

// The content length field is 16 bits, so a length that fits a `u16` is one a record carries.
const _: () = assert!(MAX_CONTENT == u16::MAX as usize);

/// `FCGI_VERSION_1`, the only version there is.
pub const VERSION_1: u8 = 1;
/// `FCGI_HEADER_LEN`.
pub const HEADER_LEN: usize = 8;

/// A record's type (§8: `FCGI_BEGIN_REQUEST` = 1 .. `FCGI_UNKNOWN_TYPE` = 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordType {
    BeginRequest,
    AbortRequest,
    EndRequest,
    Params,
    Stdin,
    Stdout,
    Stderr,
    Data,
    GetValues,
    GetValuesResult,
    UnknownType,
    /// A type this version of the protocol does not define.
    Other(u8),
}

impl RecordType {
    /// The type for its wire byte.
    #[must_use]
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => Self::BeginRequest,
            2 => Self::AbortRequest,
            3 => Self::EndRequest,
            4 => Self::Params,
            5 => Self::Stdin,
            6 => Self::Stdout,
            7 => Self::Stderr,
            8 => Self::Data,
            9 => Self::GetValues,
            10 => Self::GetValuesResult,
            11 => Self::UnknownType,
            other => Self::Other(other),
        }
    }

    /// Its wire byte.
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            Self::BeginRequest => 1,
            Self::AbortRequest => 2,
            Self::EndRequest => 3,
            Self::Params => 4,
            Self::Stdin => 5,
            Self::Stdout => 6,
            Self::Stderr => 7,
            Self::Data => 8,
            Self::GetValues => 9,
            Self::GetValuesResult => 10,
            Self::UnknownType => 11,
            Self::Other(code) => code,
        }
    }
}

/// The fixed header of a record, as sent (the version is checked by the reader, not here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub version: u8,
    pub record_type: RecordType,
    /// 0 for management records (§3.3), else the request the record belongs to.
    pub request_id: u16,
    pub content_length: u16,
    pub padding_length: u8,
}

impl RecordHeader {
    /// The header in the first [`HEADER_LEN`] bytes of `bytes`, or `None` when there are fewer.
    #[must_use]
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let header: &[u8; HEADER_LEN] = bytes.get(..HEADER_LEN)?.try_into().ok()?;
        Some(Self {
            version: header[0],
            record_type: RecordType::from_code(header[1]),
            request_id: u16::from_be_bytes([header[2], header[3]]),
            content_length: u16::from_be_bytes([header[4], header[5]]),
            padding_length: header[6],
        })
    }
}

/// Padding that brings `content_length` to a multiple of 8, as the specification recommends
/// (§3.3) and php-fpm and nginx do: the next header starts aligned.
#[must_use]
fn padding_for(content_length: usize) -> u8 {
    // The remainder is below 8, so the cast cannot truncate.
    ((8 - content_length % 8) % 8) as u8
}

/// Appends one record: the header, `content`, then zero padding to a multiple of 8.
///
/// # Panics
/// When `content` is longer than [`MAX_CONTENT`]: a caller bug, since every writer of this
/// module splits long content over several records first.
pub fn write_record(out: &mut Vec<u8>, record_type: RecordType, request_id: u16, content: &[u8]) {
    let length = u16::try_from(content.len()).expect("FastCGI record content over 65535 bytes");
    let padding = padding_for(content.len());
    out.reserve(HEADER_LEN + content.len() + usize::from(padding));
    out.push(VERSION_1);
    out.push(record_type.code());
    out.extend_from_slice(&request_id.to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
    out.push(padding);
    out.push(0);
    out.extend_from_slice(content);
    out.resize(out.len() + usize::from(padding), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_its_code() {
        for code in 0..=255u8 {
            assert_eq!(RecordType::from_code(code).code(), code);
        }
        assert_eq!(RecordType::from_code(6), RecordType::Stdout);
        assert_eq!(RecordType::from_code(12), RecordType::Other(12));
    }

    #[test]
    fn a_record_is_padded_to_eight() {
        let mut out = Vec::new();
        write_record(&mut out, RecordType::Stdout, 0x0102, b"hello");
        assert_eq!(out, b"\x01\x06\x01\x02\x00\x05\x03\x00hello\x00\x00\x00");
        let header = RecordHeader::parse(&out).expect("eight bytes");
        assert_eq!(
            header,
            RecordHeader {
                version: 1,
                record_type: RecordType::Stdout,
                request_id: 0x0102,
                content_length: 5,
                padding_length: 3,
            }
        );
        out.clear();
        write_record(&mut out, RecordType::Params, 1, b"");
        assert_eq!(out, b"\x01\x04\x00\x01\x00\x00\x00\x00");
        out.clear();
        write_record(&mut out, RecordType::Stdin, 1, &[7; 16]);
        assert_eq!(out.len(), 8 + 16, "a multiple of 8 needs no padding");
    }

    #[test]
    fn a_short_header_is_not_parsed() {
        assert_eq!(RecordHeader::parse(b"\x01\x06\x00\x01\x00\x00\x00"), None);
    }

    #[test]
    fn the_largest_record_fits() {
        let mut out = Vec::new();
        write_record(&mut out, RecordType::Stdout, 1, &vec![b'x'; MAX_CONTENT]);
        assert_eq!(&out[4..7], b"\xff\xff\x01");
        assert_eq!(out.len(), 8 + MAX_CONTENT + 1);
    }

    #[test]
    #[should_panic(expected = "over 65535")]
    fn content_over_the_limit_is_a_caller_bug() {
        write_record(
            &mut Vec::new(),
            RecordType::Stdout,
            1,
            &vec![0; MAX_CONTENT + 1],
        );
    }
}
