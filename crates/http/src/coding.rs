//! `Accept-Encoding` negotiation for precompressed siblings (RFC 9110 §12.5.3).
//!
//! Owns the codings a precompressed file can be available in and the server's order among
//! them; the field itself is read by [`crate::accept`]. Must not know file names or add `Vary`
//! (the server does both).

use crate::accept::{self, EncodingChoice};

/// A content coding ampd can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    Identity,
    Gzip,
    Brotli,
}

impl Coding {
    /// The token for `Content-Encoding`, or `None` for identity (which is never labelled).
    #[must_use]
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Coding::Identity => None,
            Coding::Gzip => Some("gzip"),
            Coding::Brotli => Some("br"),
        }
    }
}

/// Picks the coding to send among `available` (identity is always available), by
/// [`accept::choose_encoding`] with the server's order Brotli > Gzip, because smaller bodies
/// win: the highest weight, ties to the smaller coding, any coding over identity at equal
/// weight.
///
/// Absent header → Identity. When the client excluded identity and accepts nothing available,
/// Identity is still returned, since a static server answering 406 for a file it has would
/// help nobody (RFC 9110 §12.5.3 allows either).
#[must_use]
pub fn negotiate(accept_encoding: Option<&[u8]>, available: &[Coding]) -> Coding {
    let offered: Vec<(Coding, &str)> = PREFERENCE
        .iter()
        .filter(|(coding, _)| available.contains(coding))
        .copied()
        .collect();
    let names: Vec<&str> = offered.iter().map(|(_, name)| *name).collect();
    match accept::choose_encoding(accept_encoding, &names) {
        EncodingChoice::Coding(index) => offered[index].0,
        EncodingChoice::Identity | EncodingChoice::NothingAcceptable => Coding::Identity,
    }
}

/// The codings ampd serves precompressed, best first, with their `Accept-Encoding` names.
const PREFERENCE: [(Coding, &str); 2] = [(Coding::Brotli, "br"), (Coding::Gzip, "gzip")];

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[Coding] = &[Coding::Gzip, Coding::Brotli];

    #[test]
    fn negotiation_table() {
        type Case<'a> = (Option<&'a [u8]>, &'a [Coding], Coding);
        let cases: &[Case] = &[
            (None, ALL, Coding::Identity),
            (Some(b""), ALL, Coding::Identity),
            (Some(b"gzip, deflate, br"), ALL, Coding::Brotli),
            (Some(b"gzip, deflate, br"), &[Coding::Gzip], Coding::Gzip),
            (Some(b"gzip, br"), &[], Coding::Identity),
            (Some(b"GZIP"), ALL, Coding::Gzip),
            (Some(b"x-gzip"), ALL, Coding::Gzip),
            (Some(b"br;q=0.5, gzip;q=0.8"), ALL, Coding::Gzip),
            (Some(b"br;q=0, gzip;q=0"), ALL, Coding::Identity),
            (Some(b"*"), ALL, Coding::Brotli),
            (Some(b"*;q=0.5, gzip"), ALL, Coding::Gzip),
            (
                Some(b"*;q=0.5, gzip;q=0.4"),
                &[Coding::Gzip],
                Coding::Identity,
            ),
            (Some(b"br;q=0.5, identity"), ALL, Coding::Identity),
            (Some(b"identity;q=0, gzip;q=0.1"), ALL, Coding::Gzip),
            (Some(b"*;q=0"), ALL, Coding::Identity),
            (Some(b"deflate"), ALL, Coding::Identity),
            (Some(b"gzip;q=bogus, br;q=0.1"), ALL, Coding::Brotli),
            (Some(b"gzip;q=0.4, gzip;q=1, br;q=0.3"), ALL, Coding::Gzip),
        ];
        for (header, available, expected) in cases {
            assert_eq!(
                negotiate(*header, available),
                *expected,
                "{:?} {available:?}",
                header.map(<[u8]>::escape_ascii).map(|e| e.to_string())
            );
        }
    }

    #[test]
    fn labels() {
        assert_eq!(Coding::Brotli.content_encoding(), Some("br"));
        assert_eq!(Coding::Gzip.content_encoding(), Some("gzip"));
        assert_eq!(Coding::Identity.content_encoding(), None);
    }
}
