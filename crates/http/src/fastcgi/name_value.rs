//! Name-value pairs (§3.4): the content of `FCGI_PARAMS`, `FCGI_GET_VALUES` and
//! `FCGI_GET_VALUES_RESULT`.
//!
//! Owns the length encoding: a length below 128 is one byte; a longer one is four bytes,
//! big-endian, with the top bit set (so at most 2^31 - 1). Must not know what names mean.

use super::FastCgiError;

/// The longest name or value the four-byte length form can express.
pub const MAX_NAME_VALUE_LEN: usize = 0x7fff_ffff;

/// Decoded name-value pairs, in the order sent.
pub type NameValues = Vec<(Vec<u8>, Vec<u8>)>;

/// Appends `name` and `value` as one pair, each length in its shortest form.
///
/// # Panics
/// When a length exceeds [`MAX_NAME_VALUE_LEN`] (2 GiB): the protocol cannot carry it, and
/// ampd's meta-variables are bounded by the request head limits far below it.
pub fn encode_name_value(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    encode_length(out, name.len());
    encode_length(out, value.len());
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}

fn encode_length(out: &mut Vec<u8>, length: usize) {
    if length < 0x80 {
        // Below 128: one byte, the cast cannot truncate.
        out.push(length as u8);
    } else {
        let length = u32::try_from(length)
            .ok()
            .filter(|&length| length as usize <= MAX_NAME_VALUE_LEN)
            .expect("FastCGI name or value over 2^31 - 1 bytes");
        out.extend_from_slice(&(length | 0x8000_0000).to_be_bytes());
    }
}

/// The pairs of one record's `content`, in order. Lengths in the four-byte form are accepted
/// even when the one-byte form would do (the specification allows either).
///
/// # Errors
/// [`FastCgiError::NameValue`] when a length or the bytes it counts run past the content.
pub fn decode_name_values(content: &[u8]) -> Result<NameValues, FastCgiError> {
    let mut pairs = Vec::new();
    let mut rest = content;
    while !rest.is_empty() {
        let (name_len, after) = decode_length(rest)?;
        let (value_len, after) = decode_length(after)?;
        if after.len() < name_len || after.len() - name_len < value_len {
            return Err(FastCgiError::NameValue);
        }
        let (name, after) = after.split_at(name_len);
        let (value, after) = after.split_at(value_len);
        pairs.push((name.to_vec(), value.to_vec()));
        rest = after;
    }
    Ok(pairs)
}

fn decode_length(bytes: &[u8]) -> Result<(usize, &[u8]), FastCgiError> {
    match bytes {
        [short, rest @ ..] if short & 0x80 == 0 => Ok((usize::from(*short), rest)),
        [b3, b2, b1, b0, rest @ ..] => {
            let length = u32::from_be_bytes([b3 & 0x7f, *b2, *b1, *b0]);
            Ok((length as usize, rest))
        }
        _ => Err(FastCgiError::NameValue),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specifications_example() {
        // §3.4 / §6.2: "\013\002SERVER_PORT80\013\016SERVER_ADDR199.170.183.42".
        let content = b"\x0b\x02SERVER_PORT80\x0b\x0eSERVER_ADDR199.170.183.42";
        let pairs = decode_name_values(content).expect("valid pairs");
        assert_eq!(
            pairs,
            vec![
                (b"SERVER_PORT".to_vec(), b"80".to_vec()),
                (b"SERVER_ADDR".to_vec(), b"199.170.183.42".to_vec()),
            ]
        );
        let mut encoded = Vec::new();
        encode_name_value(&mut encoded, b"SERVER_PORT", b"80");
        encode_name_value(&mut encoded, b"SERVER_ADDR", b"199.170.183.42");
        assert_eq!(encoded, content);
    }

    #[test]
    fn lengths_of_128_and_more_take_four_bytes() {
        let mut encoded = Vec::new();
        encode_name_value(&mut encoded, b"N", &[b'v'; 127]);
        assert_eq!(&encoded[..2], b"\x01\x7f");
        encoded.clear();
        encode_name_value(&mut encoded, &[b'n'; 128], &[b'v'; 0x1_0203]);
        assert_eq!(&encoded[..8], b"\x80\x00\x00\x80\x80\x01\x02\x03");
        assert_eq!(encoded.len(), 8 + 128 + 0x1_0203);
        let pairs = decode_name_values(&encoded).expect("valid");
        assert_eq!(pairs[0].0.len(), 128);
        assert_eq!(pairs[0].1.len(), 0x1_0203);
    }

    #[test]
    fn the_long_form_of_a_short_length_and_empty_values_are_accepted() {
        let pairs = decode_name_values(b"\x80\x00\x00\x02\x00AB").expect("valid");
        assert_eq!(pairs, vec![(b"AB".to_vec(), Vec::new())]);
        assert_eq!(decode_name_values(b""), Ok(Vec::new()));
    }

    #[test]
    fn truncated_pairs_are_refused() {
        for bad in [
            &b"\x05"[..],
            b"\x80\x00\x00",
            b"\x01\x80\x00",
            b"\x03\x01AB",
            b"\x02\x02ABC",
            b"\x01\x00A\x01",
            b"\x8f\xff\xff\xff\x00",
            b"\x00\xff\xff\xff\xff",
        ] {
            assert_eq!(
                decode_name_values(bad),
                Err(FastCgiError::NameValue),
                "{}",
                bad.escape_ascii()
            );
        }
    }
}
