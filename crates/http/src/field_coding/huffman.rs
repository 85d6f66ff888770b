//! Huffman coding of string literals (RFC 7541 §5.2, Appendix B).
//!
//! Owns encoding, decoding and the decoding tables derived from `huffman_table::CODES`. Must
//! not know about literals' length prefixes (`string.rs`) or the tables of fields.
//!
//! Decoding reads the code through a 64-bit window. Codes of up to 8 bits (every letter,
//! digit and common punctuation: what header values are made of) are found with one load
//! from a 256-entry table; longer ones by the canonical-code search of RFC 7541's
//! [CANONICAL] reference: for each length, the codes are consecutive numbers, so a length is
//! right when the window's first bits fall below that length's last code.

use super::huffman_table::CODES;
use super::CodingError;

/// The end-of-string symbol: never valid inside a string (§5.2).
const EOS: u16 = 256;

/// The longest code (EOS's).
const MAX_BITS: usize = 30;

/// Bits the fast table is indexed by.
const FAST_BITS: u32 = 8;

/// How many codes each length has.
const COUNTS: [u32; MAX_BITS + 1] = {
    let mut counts = [0u32; MAX_BITS + 1];
    let mut symbol = 0;
    while symbol < CODES.len() {
        counts[CODES[symbol].1 as usize] += 1;
        symbol += 1;
    }
    counts
};

/// The first (smallest) code of each length in the canonical construction: the codes of one
/// length follow each other, and the first code of the next length is one past the last code
/// of this one, shifted left a bit.
const FIRST_CODES: [u32; MAX_BITS + 1] = {
    let mut first = [0u32; MAX_BITS + 1];
    let mut code = 0u32;
    let mut bits = 1;
    while bits <= MAX_BITS {
        code = (code + COUNTS[bits - 1]) << 1;
        first[bits] = code;
        bits += 1;
    }
    first
};

/// Where each length's symbols start in `SORTED`.
const OFFSETS: [u16; MAX_BITS + 1] = {
    let mut offsets = [0u16; MAX_BITS + 1];
    let mut bits = 1;
    while bits <= MAX_BITS {
        offsets[bits] = offsets[bits - 1] + COUNTS[bits - 1] as u16;
        bits += 1;
    }
    offsets
};

/// The symbols ordered by code length, then by value: the canonical order, in which a code is
/// `FIRST_CODES[bits] + (its position among the codes of its length)`.
const SORTED: [u16; 257] = {
    let mut sorted = [0u16; 257];
    let mut next = OFFSETS;
    let mut symbol = 0;
    while symbol < CODES.len() {
        let bits = CODES[symbol].1 as usize;
        sorted[next[bits] as usize] = symbol as u16;
        next[bits] += 1;
        symbol += 1;
    }
    sorted
};

/// For each value of the window's first 8 bits: `bits << 8 | symbol` of the code they begin
/// with when that code has at most 8 bits, otherwise 0 (no code is 0 bits long).
const FAST: [u16; 1 << FAST_BITS] = {
    let mut fast = [0u16; 1 << FAST_BITS];
    let mut symbol = 0;
    while symbol < 256 {
        let (code, bits) = CODES[symbol];
        if bits as u32 <= FAST_BITS {
            let spare = FAST_BITS - bits as u32;
            let first = (code << spare) as usize;
            let mut index = 0;
            while index < 1 << spare {
                fast[first + index] = (bits as u16) << 8 | symbol as u16;
                index += 1;
            }
        }
        symbol += 1;
    }
    fast
};

/// The encoded length of `bytes` in octets, padding included.
#[must_use]
pub(crate) fn encoded_len(bytes: &[u8]) -> usize {
    let bits: usize = bytes
        .iter()
        .map(|&b| usize::from(CODES[usize::from(b)].1))
        .sum();
    bits.div_ceil(8)
}

/// Appends the Huffman code of `bytes` to `out`, padded to an octet with the most significant
/// bits of EOS (all ones, §5.2).
pub(crate) fn encode(bytes: &[u8], out: &mut Vec<u8>) {
    let mut pending: u64 = 0;
    let mut pending_bits: u32 = 0;
    for &b in bytes {
        let (code, bits) = CODES[usize::from(b)];
        // Fewer than 8 bits wait, and a code has at most 30: the sum stays below 64.
        pending = pending << bits | u64::from(code);
        pending_bits += u32::from(bits);
        while pending_bits >= 8 {
            pending_bits -= 8;
            out.push((pending >> pending_bits) as u8);
        }
        pending &= (1 << pending_bits) - 1;
    }
    if pending_bits > 0 {
        let pad = 8 - pending_bits;
        out.push((pending << pad | ((1 << pad) - 1)) as u8);
    }
}

/// Appends the decoding of `input` to `out`.
///
/// # Errors
/// `BadHuffman` when the string holds EOS, or ends in more than 7 bits that are not a
/// symbol, or in bits that are not the start of EOS (§5.2).
pub(crate) fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), CodingError> {
    // The shortest code has 5 bits.
    out.reserve(input.len() * 8 / 5);
    // `window` holds `bits` unread bits in its low end.
    let mut window: u64 = 0;
    let mut bits: u32 = 0;
    let mut next = 0;
    loop {
        while bits <= 56 && next < input.len() {
            window = window << 8 | u64::from(input[next]);
            bits += 8;
            next += 1;
        }
        if bits == 0 {
            return Ok(());
        }
        // The next 32 bits, zero past the end of the input.
        let ahead = if bits >= 32 {
            (window >> (bits - 32)) as u32
        } else {
            (window << (32 - bits)) as u32
        };
        let (symbol, length) = lookup(ahead);
        if length > bits {
            // The input is all read (a refill leaves at least 57 bits otherwise) and what is
            // left is no whole code: padding, which must be short and all ones.
            let all_ones = (1u64 << bits) - 1;
            return if bits <= 7 && window == all_ones {
                Ok(())
            } else {
                Err(CodingError::BadHuffman)
            };
        }
        if symbol == EOS {
            return Err(CodingError::BadHuffman);
        }
        out.push(symbol as u8);
        bits -= length;
        window &= (1u64 << bits) - 1;
    }
}

/// The symbol whose code begins `ahead` (its most significant bit first) and the code's
/// length. The code is complete (every 30-bit string begins with a code), so there always is
/// one.
#[inline]
fn lookup(ahead: u32) -> (u16, u32) {
    let fast = FAST[(ahead >> (32 - FAST_BITS)) as usize];
    if fast != 0 {
        return (fast & 0xff, u32::from(fast >> 8));
    }
    let mut bits = FAST_BITS as usize + 1;
    while bits <= MAX_BITS {
        let code = ahead >> (32 - bits);
        // A window no shorter code matched is at or past this length's first code.
        let position = code.wrapping_sub(FIRST_CODES[bits]);
        if position < COUNTS[bits] {
            return (
                SORTED[usize::from(OFFSETS[bits]) + position as usize],
                bits as u32,
            );
        }
        bits += 1;
    }
    // Not reached for a complete code; EOS makes the caller stop either way.
    (EOS, MAX_BITS as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(input: &[u8]) -> Result<Vec<u8>, CodingError> {
        let mut out = Vec::new();
        decode(input, &mut out).map(|()| out)
    }

    fn encoded(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(input, &mut out);
        assert_eq!(out.len(), encoded_len(input));
        out
    }

    #[test]
    fn the_rfc_table_is_the_canonical_code_it_claims_to_be() {
        // Kraft's equality: a complete prefix code (no bit string is left without a symbol).
        let kraft: u64 = CODES.iter().map(|&(_, bits)| 1u64 << (30 - bits)).sum();
        assert_eq!(kraft, 1 << 30);
        // Every row's code is the one the canonical construction gives its length and rank:
        // a mistyped code or length in the transcription cannot pass both checks.
        for (rank, &symbol) in SORTED.iter().enumerate() {
            let (code, bits) = CODES[usize::from(symbol)];
            let bits = usize::from(bits);
            let position = rank - usize::from(OFFSETS[bits]);
            assert_eq!(code, FIRST_CODES[bits] + position as u32, "symbol {symbol}");
        }
        assert_eq!(CODES[usize::from(b'/')], (0x18, 6));
        assert_eq!(CODES[256], (0x3fff_ffff, 30));
    }

    #[test]
    fn every_symbol_round_trips_alone_and_in_a_run() {
        let all: Vec<u8> = (0..=255).collect();
        for &b in &all {
            assert_eq!(decoded(&encoded(&[b])).unwrap(), [b]);
        }
        assert_eq!(decoded(&encoded(&all)).unwrap(), all);
        let mut reversed = all.clone();
        reversed.reverse();
        assert_eq!(decoded(&encoded(&reversed)).unwrap(), reversed);
    }

    #[test]
    fn rfc_7541_appendix_c_strings() {
        let cases: [(&[u8], &[u8]); 6] = [
            (
                b"www.example.com",
                &[
                    0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
                ],
            ),
            (b"no-cache", &[0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf]),
            (
                b"custom-key",
                &[0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f],
            ),
            (b"302", &[0x64, 0x02]),
            (b"private", &[0xae, 0xc3, 0x77, 0x1a, 0x4b]),
            (
                b"Mon, 21 Oct 2013 20:13:21 GMT",
                &[
                    0xd0, 0x7a, 0xbe, 0x94, 0x10, 0x54, 0xd4, 0x44, 0xa8, 0x20, 0x05, 0x95, 0x04,
                    0x0b, 0x81, 0x66, 0xe0, 0x82, 0xa6, 0x2d, 0x1b, 0xff,
                ],
            ),
        ];
        for (text, code) in cases {
            assert_eq!(encoded(text), code, "{text:?}");
            assert_eq!(decoded(code).unwrap(), text);
        }
    }

    #[test]
    fn empty_input_is_the_empty_string() {
        assert_eq!(decoded(&[]).unwrap(), b"");
        assert!(encoded(b"").is_empty());
    }

    #[test]
    fn eos_inside_a_string_is_refused() {
        // EOS (30 ones) then two padding ones: 32 bits of ones.
        assert_eq!(decoded(&[0xff; 4]), Err(CodingError::BadHuffman));
        // 'a' (00011) then EOS then padding.
        let mut bits: u64 = 0b00011;
        bits = bits << 30 | 0x3fff_ffff;
        bits = bits << 5 | 0b11111; // 40 bits
        let bytes = &bits.to_be_bytes()[3..];
        assert_eq!(decoded(bytes), Err(CodingError::BadHuffman));
    }

    #[test]
    fn padding_over_seven_bits_is_refused() {
        // '0' is 00000: a byte 0x07 is '0' + 3 ones; then a whole byte of ones is 8 bits of
        // padding.
        assert_eq!(decoded(&[0x07]).unwrap(), b"0");
        assert_eq!(decoded(&[0x07, 0xff]), Err(CodingError::BadHuffman));
        assert_eq!(decoded(&[0xff]), Err(CodingError::BadHuffman));
    }

    #[test]
    fn padding_that_is_not_ones_is_refused() {
        // '0' (00000) then 000: the padding is not EOS's prefix; it decodes no symbol either.
        assert_eq!(decoded(&[0x00]), Err(CodingError::BadHuffman));
        // '0' then 110.
        assert_eq!(decoded(&[0x06]), Err(CodingError::BadHuffman));
    }
}
