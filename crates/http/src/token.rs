//! Byte classes and list splitting shared by every parser in this crate (RFC 9110 §5.6).
//!
//! Owns the `tchar` and field-value tables, OWS trimming and the `#rule` list iterator.
//! Must not know about any particular header field.

/// `tchar` (RFC 9110 §5.6.2) as a 256-entry table: one load per byte instead of a chain of
/// range compares in the hot header-name loop.
static TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        table[byte] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        byte += 1;
    }
    table
};

/// Bytes allowed inside a field value: SP, HTAB, VCHAR and obs-text (RFC 9110 §5.5).
/// Every other control byte, NUL included, is refused.
static FIELD_VALUE: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        table[byte] = byte == 0x09 || (byte >= 0x20 && byte != 0x7f);
        byte += 1;
    }
    table
};

/// Whether `b` may appear in a token (method, field name, coding name).
#[inline]
pub fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

/// Whether `bytes` is a non-empty token.
#[inline]
pub fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|&b| is_tchar(b))
}

/// Whether every byte of `bytes` may appear in a field value.
#[inline]
pub(crate) fn is_field_value(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| FIELD_VALUE[usize::from(b)])
}

/// Optional whitespace: SP or HTAB (RFC 9110 §5.6.3).
#[inline]
pub(crate) fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `bytes` without leading and trailing OWS.
#[inline]
pub(crate) fn trim_ows(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|&b| !is_ows(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|&b| !is_ows(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// The elements of a comma-separated list (`#rule`, RFC 9110 §5.6.1), OWS-trimmed, with the
/// empty elements a recipient must tolerate skipped.
#[inline]
pub fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|element| !element.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        assert!(is_token(b"GET"));
        assert!(is_token(b"X-Custom_1.0~"));
        assert!(!is_token(b""));
        assert!(!is_token(b"a b"));
        assert!(!is_token(b"a:b"));
        assert!(!is_token(b"a\x0bb"));
        assert!(!is_token("é".as_bytes()));
    }

    #[test]
    fn field_values() {
        assert!(is_field_value(b"text/html; q=0.9\t x"));
        assert!(is_field_value(b"\x80\xff"));
        assert!(!is_field_value(b"a\0b"));
        assert!(!is_field_value(b"a\x7fb"));
        assert!(!is_field_value(b"a\rb"));
    }

    #[test]
    fn trimming_and_lists() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b" \t "), b"");
        let elements: Vec<&[u8]> = list_elements(b" gzip ,, br;q=1 ,").collect();
        assert_eq!(elements, vec![&b"gzip"[..], &b"br;q=1"[..]]);
    }
}
