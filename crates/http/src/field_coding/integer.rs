//! Integers with an N-bit prefix (RFC 7541 §5.1).
//!
//! Owns the prefix-and-continuation coding. Must not know what an integer stands for (an
//! index, a length, a table size).

use super::CodingError;

/// The largest integer accepted. RFC 7541 puts no bound on integers; every integer HPACK
/// carries is an index, a string length or a table size, all far below 2^32, so anything
/// larger is an attack on the decoder or garbage.
pub(crate) const MAX_INTEGER: u64 = u32::MAX as u64;

/// Reads an integer whose first `prefix_bits` bits are the low bits of `block[*at]` (the high
/// bits are the representation's flags), moving `*at` past it.
///
/// # Errors
/// `Truncated` when the block ends inside it, `IntegerOverflow` past `MAX_INTEGER` (or a run of
/// continuation octets that could only be padding zeros: more than five).
#[inline]
pub(crate) fn decode(block: &[u8], at: &mut usize, prefix_bits: u8) -> Result<u64, CodingError> {
    let max_prefix = u8::MAX >> (8 - prefix_bits);
    let first = *block.get(*at).ok_or(CodingError::Truncated)? & max_prefix;
    *at += 1;
    if first < max_prefix {
        return Ok(u64::from(first));
    }
    let mut value = u64::from(max_prefix);
    let mut shift = 0u32;
    loop {
        let byte = *block.get(*at).ok_or(CodingError::Truncated)?;
        *at += 1;
        if shift > 28 {
            return Err(CodingError::IntegerOverflow);
        }
        // shift ≤ 28: the addend is below 2^35 and `value` below 2^32, no u64 overflow.
        value += u64::from(byte & 0x7f) << shift;
        if value > MAX_INTEGER {
            return Err(CodingError::IntegerOverflow);
        }
        if byte & 0x80 == 0 {
            return Ok(value);
        }
        shift += 7;
    }
}

/// Appends `value` with an N-bit prefix; `flags` are the first octet's bits above the prefix.
#[inline]
pub(crate) fn encode(value: usize, prefix_bits: u8, flags: u8, out: &mut Vec<u8>) {
    let max_prefix = (1usize << prefix_bits) - 1;
    if value < max_prefix {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decoded(block: &[u8], prefix_bits: u8) -> Result<(u64, usize), CodingError> {
        let mut at = 0;
        decode(block, &mut at, prefix_bits).map(|value| (value, at))
    }

    #[test]
    fn rfc_7541_appendix_c_1() {
        // C.1.1: 10 on a 5-bit prefix (the flag bits are kept out of the value).
        let mut out = Vec::new();
        encode(10, 5, 0b1110_0000, &mut out);
        assert_eq!(out, [0b1110_1010]);
        assert_eq!(decoded(&out, 5), Ok((10, 1)));
        // C.1.2: 1337 on a 5-bit prefix.
        out.clear();
        encode(1337, 5, 0, &mut out);
        assert_eq!(out, [0b0001_1111, 0b1001_1010, 0b0000_1010]);
        assert_eq!(decoded(&out, 5), Ok((1337, 3)));
        // C.1.3: 42 on an 8-bit prefix.
        out.clear();
        encode(42, 8, 0, &mut out);
        assert_eq!(out, [42]);
        assert_eq!(decoded(&out, 8), Ok((42, 1)));
    }

    #[test]
    fn the_prefix_maximum_takes_a_zero_continuation() {
        let mut out = Vec::new();
        encode(31, 5, 0, &mut out);
        assert_eq!(out, [31, 0]);
        assert_eq!(decoded(&out, 5), Ok((31, 2)));
    }

    #[test]
    fn a_block_ending_inside_an_integer_is_truncated() {
        assert_eq!(decoded(&[], 7), Err(CodingError::Truncated));
        assert_eq!(decoded(&[0x7f], 7), Err(CodingError::Truncated));
        assert_eq!(decoded(&[0x7f, 0x80, 0x80], 7), Err(CodingError::Truncated));
    }

    #[test]
    fn integers_past_2_pow_32_overflow() {
        // 127 + (2^32 - 128) = 2^32 - 1 fits; one more does not.
        let mut out = Vec::new();
        encode(u32::MAX as usize, 7, 0, &mut out);
        assert_eq!(decoded(&out, 7), Ok((MAX_INTEGER, out.len())));
        out.clear();
        encode(u32::MAX as usize + 1, 7, 0, &mut out);
        assert_eq!(decoded(&out, 7), Err(CodingError::IntegerOverflow));
        // Ten continuation octets, all saying "more": refused without reading to the end.
        let mut long = vec![0x7f];
        long.extend([0xff; 10]);
        assert_eq!(decoded(&long, 7), Err(CodingError::IntegerOverflow));
        // Zero padding past five continuation octets.
        assert_eq!(
            decoded(&[0x7f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], 7),
            Err(CodingError::IntegerOverflow)
        );
    }

    proptest! {
        #[test]
        fn every_integer_round_trips(value in 0..=u32::MAX, prefix_bits in 1u8..=8) {
            let mut out = Vec::new();
            let flags = if prefix_bits == 8 { 0 } else { 0xffu8 << prefix_bits };
            encode(value as usize, prefix_bits, flags, &mut out);
            prop_assert_eq!(out[0] & flags, flags);
            prop_assert_eq!(decoded(&out, prefix_bits), Ok((u64::from(value), out.len())));
        }
    }
}
