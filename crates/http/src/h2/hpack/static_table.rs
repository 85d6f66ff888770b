//! The static table (RFC 7541 §2.3.1, Appendix A): 61 fixed fields, indices 1 to 61.
//!
//! Owns the entries and the encoder's lookup by name. Must not know about the dynamic table
//! (indices from 62 on are its business).

/// The entries, index 1 first.
const ENTRIES: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The number of entries: the dynamic table's indices start after it.
pub(super) const LEN: usize = ENTRIES.len();

/// The entry at `index` (1-based), if it is one of the static table's.
#[inline]
pub(super) fn get(index: usize) -> Option<(&'static [u8], &'static [u8])> {
    index.checked_sub(1).and_then(|i| ENTRIES.get(i)).copied()
}

/// How a field matches the static table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Match {
    None,
    /// An entry with this name (its first one).
    Name(usize),
    /// An entry with this name and value.
    Field(usize),
}

/// Looks `name` up by a match on its bytes (a jump on length and first bytes rather than a
/// scan of 61 strings), then the value among the few names that have values.
#[inline]
pub(super) fn find(name: &[u8], value: &[u8]) -> Match {
    let by_value = |first: usize, values: &[&[u8]]| {
        values
            .iter()
            .position(|&candidate| candidate == value)
            .map_or(Match::Name(first), |offset| Match::Field(first + offset))
    };
    let index = match name {
        b":authority" => 1,
        b":method" => return by_value(2, &[b"GET", b"POST"]),
        b":path" => return by_value(4, &[b"/", b"/index.html"]),
        b":scheme" => return by_value(6, &[b"http", b"https"]),
        b":status" => {
            return by_value(8, &[b"200", b"204", b"206", b"304", b"400", b"404", b"500"])
        }
        b"accept-charset" => 15,
        b"accept-encoding" => return by_value(16, &[b"gzip, deflate"]),
        b"accept-language" => 17,
        b"accept-ranges" => 18,
        b"accept" => 19,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"authorization" => 23,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"cookie" => 32,
        b"date" => 33,
        b"etag" => 34,
        b"expect" => 35,
        b"expires" => 36,
        b"from" => 37,
        b"host" => 38,
        b"if-match" => 39,
        b"if-modified-since" => 40,
        b"if-none-match" => 41,
        b"if-range" => 42,
        b"if-unmodified-since" => 43,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"max-forwards" => 47,
        b"proxy-authenticate" => 48,
        b"proxy-authorization" => 49,
        b"range" => 50,
        b"referer" => 51,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"transfer-encoding" => 57,
        b"user-agent" => 58,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => return Match::None,
    };
    // The entries with an empty value: an empty value matches them whole.
    if value.is_empty() {
        Match::Field(index)
    } else {
        Match::Name(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_agrees_with_the_table_for_every_entry() {
        for index in 1..=LEN {
            let (name, value) = get(index).unwrap();
            assert_eq!(find(name, value), Match::Field(index), "{index}");
            let first = (1..=LEN).find(|&i| get(i).unwrap().0 == name).unwrap();
            assert_eq!(find(name, b"other"), Match::Name(first), "{index}");
        }
        assert_eq!(find(b"x-custom", b""), Match::None);
        assert_eq!(find(b"Date", b""), Match::None);
    }

    #[test]
    fn indices_outside_the_table_are_none() {
        assert_eq!(get(0), None);
        assert_eq!(get(62), None);
        assert_eq!(get(2), Some((&b":method"[..], &b"GET"[..])));
        assert_eq!(get(61), Some((&b"www-authenticate"[..], &b""[..])));
    }
}
