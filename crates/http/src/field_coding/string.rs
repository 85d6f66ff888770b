//! String literals (RFC 7541 §5.2; RFC 9204 §4.1.2): an H flag, a length with an N-bit prefix
//! (7 in HPACK; 7, 5 or 3 in QPACK, whose representations keep flags in the same octet), then
//! the octets, raw or Huffman-coded.
//!
//! Owns the literal's framing and the choice of coding when encoding. Must not know whether a
//! string is a name or a value.

use std::ops::Range;

use super::{huffman, integer, CodingError};

/// Where a decoded string is: raw literals stay in the block (no copy), Huffman ones are
/// decoded into the decoder's scratch buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Text {
    Block(Range<usize>),
    Scratch(Range<usize>),
}

impl Text {
    /// The string's bytes.
    #[inline]
    pub(crate) fn get<'a>(&self, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Text::Block(range) => &block[range.clone()],
            Text::Scratch(range) => &scratch[range.clone()],
        }
    }
}

/// Reads the string literal at `block[*at]` whose length has a `prefix_bits` prefix (its H flag
/// the bit above), moving `*at` past it. A Huffman string is appended to `scratch`.
///
/// # Errors
/// `Truncated` when the block ends inside it; Huffman and integer errors.
#[inline]
pub(crate) fn decode(
    block: &[u8],
    at: &mut usize,
    prefix_bits: u8,
    scratch: &mut Vec<u8>,
) -> Result<Text, CodingError> {
    let huffman_flag = 1u8 << prefix_bits;
    let huffman_coded = block.get(*at).ok_or(CodingError::Truncated)? & huffman_flag != 0;
    let len = integer::decode(block, at, prefix_bits)?;
    let start = *at;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| start.checked_add(len))
        .filter(|&end| end <= block.len())
        .ok_or(CodingError::Truncated)?;
    *at = end;
    if !huffman_coded {
        return Ok(Text::Block(start..end));
    }
    let from = scratch.len();
    huffman::decode(&block[start..end], scratch)?;
    Ok(Text::Scratch(from..scratch.len()))
}

/// Appends `text` as a string literal with a `prefix_bits` length prefix under `flags` (the
/// octet's bits above the H flag), Huffman-coded when that is shorter (a tie stays raw: cheaper
/// for the peer to read).
#[inline]
pub(crate) fn encode(text: &[u8], prefix_bits: u8, flags: u8, out: &mut Vec<u8>) {
    let huffman_flag = 1u8 << prefix_bits;
    let coded_len = huffman::encoded_len(text);
    if coded_len < text.len() {
        integer::encode(coded_len, prefix_bits, flags | huffman_flag, out);
        huffman::encode(text, out);
    } else {
        integer::encode(text.len(), prefix_bits, flags, out);
        out.extend_from_slice(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(text, 7, 0, &mut out);
        let mut scratch = Vec::new();
        let mut at = 0;
        let decoded = decode(&out, &mut at, 7, &mut scratch).unwrap();
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
        assert_eq!(
            decode(block, &mut at, 7, &mut scratch),
            Ok(Text::Block(1..4))
        );
        assert_eq!(at, 4);
        assert!(scratch.is_empty());
    }

    #[test]
    fn a_length_past_the_block_is_truncated() {
        let mut scratch = Vec::new();
        for block in [&b"\x04abc"[..], b"\x84\xff", b"", b"\x7f\xff\xff\xff\x0f"] {
            let mut at = 0;
            assert_eq!(
                decode(block, &mut at, 7, &mut scratch),
                Err(CodingError::Truncated),
                "{block:?}"
            );
        }
    }
}
