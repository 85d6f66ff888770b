//! String literals (RFC 7541 §5.2): an H flag, a 7-bit-prefix length, then the octets, raw or
//! Huffman-coded.
//!
//! Owns the literal's framing and the choice of coding when encoding. Must not know whether a
//! string is a name or a value.

use std::ops::Range;

use super::{huffman, integer, HpackError};

/// Where a decoded string is: raw literals stay in the block (no copy), Huffman ones are
/// decoded into the decoder's scratch buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Text {
    Block(Range<usize>),
    Scratch(Range<usize>),
}

impl Text {
    /// The string's bytes.
    #[inline]
    pub(super) fn get<'a>(&self, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Text::Block(range) => &block[range.clone()],
            Text::Scratch(range) => &scratch[range.clone()],
        }
    }
}

/// Reads the string literal at `block[*at]`, moving `*at` past it. A Huffman string is
/// appended to `scratch`.
///
/// # Errors
/// `Truncated` when the block ends inside it; Huffman and integer errors.
#[inline]
pub(super) fn decode(
    block: &[u8],
    at: &mut usize,
    scratch: &mut Vec<u8>,
) -> Result<Text, HpackError> {
    let huffman_coded = block.get(*at).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = integer::decode(block, at, 7)?;
    let start = *at;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| start.checked_add(len))
        .filter(|&end| end <= block.len())
        .ok_or(HpackError::Truncated)?;
    *at = end;
    if !huffman_coded {
        return Ok(Text::Block(start..end));
    }
    let from = scratch.len();
    huffman::decode(&block[start..end], scratch)?;
    Ok(Text::Scratch(from..scratch.len()))
}

/// Appends `text` as a string literal, Huffman-coded when that is shorter (a tie stays raw:
/// cheaper for the peer to read).
#[inline]
pub(super) fn encode(text: &[u8], out: &mut Vec<u8>) {
    let coded_len = huffman::encoded_len(text);
    if coded_len < text.len() {
        integer::encode(coded_len, 7, 0x80, out);
        huffman::encode(text, out);
    } else {
        integer::encode(text.len(), 7, 0, out);
        out.extend_from_slice(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(text, &mut out);
        let mut scratch = Vec::new();
        let mut at = 0;
        let decoded = decode(&out, &mut at, &mut scratch).unwrap();
        assert_eq!(at, out.len());
        assert_eq!(decoded.get(&out, &scratch), text);
        out
    }

    #[test]
    fn literals_take_the_shorter_coding() {
        // C.4.1: "www.example.com" is 12 octets coded, 15 raw.
        assert_eq!(round_trip(b"www.example.com")[0], 0x80 | 12);
        // Bytes with long codes stay raw.
        assert_eq!(round_trip(b"\x00\x01\x02"), [3, 0, 1, 2]);
        assert_eq!(round_trip(b""), [0]);
    }

    #[test]
    fn a_raw_literal_is_read_in_place() {
        let block = b"\x03abcX";
        let mut scratch = Vec::new();
        let mut at = 0;
        assert_eq!(decode(block, &mut at, &mut scratch), Ok(Text::Block(1..4)));
        assert_eq!(at, 4);
        assert!(scratch.is_empty());
    }

    #[test]
    fn a_length_past_the_block_is_truncated() {
        let mut scratch = Vec::new();
        for block in [&b"\x04abc"[..], b"\x84\xff", b"", b"\x7f\xff\xff\xff\x0f"] {
            let mut at = 0;
            assert_eq!(
                decode(block, &mut at, &mut scratch),
                Err(HpackError::Truncated),
                "{block:?}"
            );
        }
    }
}
