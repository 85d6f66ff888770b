//! Fuzz checks of HPACK (`crate::h2::hpack`) and the request fields built from what it decodes
//! (`crate::h2::fields`).
//!
//! Owns those invariants. Must not be used by the server; every check panics on violation.

use crate::h2::fields::RequestBuilder;
use crate::h2::hpack::{Decoder, Encoder, HpackError};
use crate::request::{BodyFraming, Version};

/// The table size the fuzzed decoders advertise: small, so eviction happens often.
const TABLE_SIZE: usize = 256;

/// The list-size limit: small, so the bomb path (stop handing fields, keep decoding) is hit.
const MAX_LIST_SIZE: usize = 512;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Reads `data` as a connection's header blocks, each one a length octet then that many bytes
/// (the last may be short), and decodes them in order, as a server would, checking:
///
/// * nothing panics, and the dynamic table never passes the size advertised;
/// * the list-size limit only hides fields: a decoder without it gives the same outcome, the
///   same list size, a list the limited one is a prefix of, and the same table (the HPACK bomb
///   defence keeps the table in step);
/// * the list decoded, encoded again by our `Encoder` (its table carried across blocks),
///   decodes to the same list;
/// * the request fields built from the list never panic, and a request they accept is an
///   HTTP/2 one with a target.
///
/// Decoding stops at the first error, as the connection would.
///
/// # Panics
/// Only when an invariant is violated, which is the bug the fuzzer is looking for.
pub fn hpack_decode(data: &[u8]) {
    let mut limited = Decoder::agreed(TABLE_SIZE);
    let mut unlimited = Decoder::agreed(TABLE_SIZE);
    let mut encoder = Encoder::new();
    let mut again = Decoder::new(4_096);
    let mut rest = data;
    while let Some((&len, after)) = rest.split_first() {
        let (block, next) = after.split_at(usize::from(len).min(after.len()));
        rest = next;

        let (some, outcome) = decode(&mut limited, block, MAX_LIST_SIZE);
        assert!(limited.table_size() <= TABLE_SIZE, "table past its size");
        let (all, whole) = decode(&mut unlimited, block, usize::MAX);
        match (&outcome, &whole) {
            (Ok(part), Ok(full)) => {
                assert_eq!(part.0, full.0, "the limit changed the list size");
                assert!(!full.1, "over an unlimited limit");
                assert_eq!(part.1, part.0 > MAX_LIST_SIZE, "over_limit is wrong");
                assert!(all.starts_with(&some), "the limited list is not a prefix");
                if !part.1 {
                    assert_eq!(some.len(), all.len(), "fields lost within the limit");
                }
            }
            (Err(a), Err(b)) => assert_eq!(a, b, "the limit changed the error"),
            _ => panic!("the limit changed the outcome: {outcome:?} vs {whole:?}"),
        }
        assert!(
            limited.table_entries().eq(unlimited.table_entries()),
            "the limit changed the table"
        );
        if whole.is_err() {
            return;
        }

        let mut encoded = Vec::new();
        encoder.begin(&mut encoded);
        for (name, value) in &all {
            encoder.field(name, value, false, &mut encoded);
        }
        let (decoded, outcome) = decode(&mut again, &encoded, usize::MAX);
        assert!(
            outcome.is_ok(),
            "our encoding failed to decode: {outcome:?}"
        );
        assert_eq!(decoded, all, "our encoding decodes differently");

        check_request(&all);
    }
}

/// Decodes `block`, returning the fields handed over and `(list size, over limit)`.
fn decode(
    decoder: &mut Decoder,
    block: &[u8],
    max_list_size: usize,
) -> (Fields, Result<(usize, bool), HpackError>) {
    let mut fields = Vec::new();
    let outcome = decoder
        .decode(block, max_list_size, &mut |name, value| {
            fields.push((name.to_vec(), value.to_vec()));
        })
        .map(|decoded| (decoded.list_size, decoded.over_limit));
    (fields, outcome)
}

fn check_request(fields: &Fields) {
    for end_stream in [false, true] {
        let mut builder = RequestBuilder::new();
        for (name, value) in fields {
            builder.field(name, value);
        }
        if let Ok(head) = builder.finish(end_stream) {
            assert_eq!(head.version, Version::Http2);
            assert!(head.target.starts_with('/') || &*head.target == "*");
            assert!(head.keep_alive);
            if end_stream {
                assert!(matches!(
                    head.body,
                    BodyFraming::None | BodyFraming::Length(0)
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::hpack_decode;

    #[test]
    fn accepts_valid_and_invalid_input() {
        hpack_decode(b"");
        hpack_decode(&[0xff; 300]);
        // C.3.1 then an indexed reference to its entry.
        hpack_decode(b"\x14\x82\x86\x84\x41\x0fwww.example.com\x01\xbe");
        // A block cut short, then garbage.
        hpack_decode(b"\x10\x40\x05");
    }
}
