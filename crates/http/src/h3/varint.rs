//! QUIC's variable-length integers (RFC 9000 §16), which HTTP/3 uses for frame types, lengths,
//! stream types, settings and error codes (RFC 9114 §1.2).
//!
//! Owns the 1/2/4/8-octet coding. Must not know what an integer stands for.

/// The largest value a variable-length integer holds: 2^62 - 1.
pub const MAX: u64 = (1 << 62) - 1;

/// Reads the integer at `input[*at]`, moving `*at` past it; `None` (and `*at` unmoved) when
/// `input` ends inside it.
#[inline]
#[must_use]
pub fn decode(input: &[u8], at: &mut usize) -> Option<u64> {
    let first = *input.get(*at)?;
    let len = 1usize << (first >> 6);
    let bytes = input.get(*at..*at + len)?;
    let mut value = u64::from(first & 0x3f);
    for &byte in &bytes[1..] {
        value = value << 8 | u64::from(byte);
    }
    *at += len;
    Some(value)
}

/// The octets `value` takes (RFC 9000 §16: the shortest form; a sender may use a longer one,
/// which `decode` accepts).
///
/// # Panics
/// If `value` is above `MAX`: no caller has such a value, so it is a bug, not input.
#[inline]
#[must_use]
pub fn len(value: u64) -> usize {
    match value {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        0x4000_0000..=MAX => 8,
        _ => panic!("{value} does not fit a QUIC variable-length integer"),
    }
}

/// Appends `value` in its shortest form.
///
/// # Panics
/// If `value` is above `MAX` (see `len`).
#[inline]
pub fn encode(value: u64, out: &mut Vec<u8>) {
    let len = len(value);
    let tag = match len {
        1 => 0x00,
        2 => 0x40,
        4 => 0x80,
        _ => 0xc0,
    };
    let bytes = value.to_be_bytes();
    let mut encoded = bytes[8 - len..].to_vec();
    encoded[0] |= tag;
    out.extend_from_slice(&encoded);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decoded(input: &[u8]) -> Option<(u64, usize)> {
        let mut at = 0;
        decode(input, &mut at).map(|value| (value, at))
    }

    #[test]
    fn rfc_9000_appendix_a_1_examples() {
        assert_eq!(
            decoded(&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c]),
            Some((151_288_809_941_952_652, 8))
        );
        assert_eq!(decoded(&[0x9d, 0x7f, 0x3e, 0x7d]), Some((494_878_333, 4)));
        assert_eq!(decoded(&[0x7b, 0xbd]), Some((15_293, 2)));
        assert_eq!(decoded(&[0x25]), Some((37, 1)));
        // A longer form than needed is still the same value.
        assert_eq!(decoded(&[0x40, 0x25]), Some((37, 2)));
    }

    #[test]
    fn a_truncated_integer_is_not_read() {
        let mut at = 1;
        assert_eq!(decode(&[0x00, 0x9d, 0x7f], &mut at), None);
        assert_eq!(at, 1);
        assert_eq!(decoded(&[]), None);
    }

    proptest! {
        #[test]
        fn round_trips_in_the_shortest_form(value in 0..=MAX) {
            let mut out = vec![0xaa];
            encode(value, &mut out);
            prop_assert_eq!(out.len(), 1 + len(value));
            let mut at = 1;
            prop_assert_eq!(decode(&out, &mut at), Some(value));
            prop_assert_eq!(at, out.len());
        }
    }
}
