//! Base64url without padding (RFC 4648 §5), the encoding JWS (RFC 7515 §2) and ACME use for
//! every binary value.
//!
//! Owns: the encoding and its inverse. Must not touch: what is encoded.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `bytes` in base64url, unpadded.
#[must_use]
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = chunk.iter().enumerate().fold(0u32, |word, (at, &byte)| {
            word | u32::from(byte) << (16 - 8 * at)
        });
        for index in 0..=chunk.len() {
            let sextet = (word >> (18 - 6 * index)) & 0x3f;
            out.push(char::from(ALPHABET[sextet as usize]));
        }
    }
    out
}

/// The bytes of unpadded base64url `text`; `None` if it is not that (tests read JWS back).
#[cfg(test)]
#[must_use]
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut word = 0u32;
    let mut bits = 0;
    for byte in text.bytes() {
        let value = ALPHABET.iter().position(|&letter| letter == byte)?;
        word = word << 6 | value as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((word >> bits) as u8);
            word &= (1 << bits) - 1;
        }
    }
    // A lone sextet (length 4n+1) cannot be the end of any bytes.
    (bits < 6).then_some(out)
}

/// Whether `token` is made only of base64url letters (an ACME token, RFC 8555 §8.1: safe as a
/// file name and in a URL path).
#[must_use]
pub fn is_token(token: &str) -> bool {
    !token.is_empty() && token.len() <= 256 && token.bytes().all(|byte| ALPHABET.contains(&byte))
}

#[cfg(test)]
mod tests {
    use super::{decode, encode, is_token};

    #[test]
    fn rfc_4648_vectors_without_padding() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), encoded);
            assert_eq!(decode(encoded).unwrap(), plain.as_bytes());
        }
        // The url-safe letters for 62 and 63.
        assert_eq!(encode(&[0xfb, 0xff]), "-_8");
        assert_eq!(decode("-_8").unwrap(), [0xfb, 0xff]);
        assert_eq!(decode("a"), None);
        assert_eq!(decode("ab+c"), None);
    }

    #[test]
    fn tokens_are_base64url_letters_only() {
        assert!(is_token("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA"));
        assert!(!is_token(""));
        assert!(!is_token("../account.key"));
        assert!(!is_token("a.b"));
    }
}
