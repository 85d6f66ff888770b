//! `Range: bytes=...` evaluation against a representation length (RFC 9110 §14.1-§14.2).
//!
//! Owns range-spec syntax, satisfiability, and the CVE-2011-3192 defences. Must not decide
//! whether a Range applies at all (method, If-Range and status are the caller's, see
//! `conditional::if_range_allows_partial`) nor frame the body (`multipart.rs`).

use crate::token::{list_elements, trim_ows};

/// An inclusive byte range, `start <= end`, both inside the representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    /// Number of bytes covered; never zero, so there is no `is_empty`.
    #[allow(clippy::len_without_is_empty)]
    #[inline]
    #[must_use]
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }
}

/// What a `Range` header asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeOutcome {
    /// No usable Range: missing, syntactically invalid, another unit, or too many specs.
    /// Serve the whole representation with 200 (RFC 9110 §14.2 permits ignoring Range).
    Full,
    /// 206 with these ranges: sorted by start, overlapping and adjacent ones merged.
    Partial(Vec<ByteRange>),
    /// Valid syntax but no range overlaps the representation: 416.
    Unsatisfiable,
}

/// One range-spec as sent, before it meets the representation length.
enum Spec {
    /// `first-last` or `first-` (`last` is `None`).
    FromTo { first: u64, last: Option<u64> },
    /// `-suffix`: the final `suffix` bytes.
    Suffix(u64),
}

/// Evaluates a `Range` value for a representation of `representation_len` bytes.
///
/// Abuse defences (CVE-2011-3192, Apache "Killer"): more than `max_ranges` range-specs →
/// `Full`. The count is taken *before* merging, over every syntactically valid spec, because
/// it bounds the work spent on a header and a client that lists hundreds of tiny ranges is
/// either broken or hostile whatever they merge into. Overlapping and adjacent ranges are then
/// merged (RFC 9110 §14.3 permits coalescing), so a 206 body is never larger than the
/// representation.
#[must_use]
pub fn parse_range(value: &[u8], representation_len: u64, max_ranges: usize) -> RangeOutcome {
    let value = trim_ows(value);
    let Some(eq) = value.iter().position(|&b| b == b'=') else {
        return RangeOutcome::Full;
    };
    if !value[..eq].eq_ignore_ascii_case(b"bytes") {
        return RangeOutcome::Full;
    }
    let mut ranges = Vec::new();
    let mut specs = 0usize;
    for element in list_elements(&value[eq + 1..]) {
        let Some(spec) = parse_spec(element) else {
            return RangeOutcome::Full;
        };
        specs += 1;
        if specs > max_ranges {
            return RangeOutcome::Full;
        }
        if let Some(range) = satisfiable(&spec, representation_len) {
            ranges.push(range);
        }
    }
    if specs == 0 {
        return RangeOutcome::Full;
    }
    if ranges.is_empty() {
        return RangeOutcome::Unsatisfiable;
    }
    RangeOutcome::Partial(merge(ranges))
}

/// `first-pos "-" [ last-pos ]` or `"-" suffix-length` (RFC 9110 §14.1.1). Numbers too large
/// for a u64 saturate: they are still valid syntax and only mean "past the end".
fn parse_spec(spec: &[u8]) -> Option<Spec> {
    let dash = spec.iter().position(|&b| b == b'-')?;
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        return Some(Spec::Suffix(number(last)?));
    }
    let first = number(first)?;
    let last = if last.is_empty() {
        None
    } else {
        let last = number(last)?;
        // RFC 9110 §14.1.1: last-pos < first-pos makes the spec, and so the header, invalid.
        if last < first {
            return None;
        }
        Some(last)
    };
    Some(Spec::FromTo { first, last })
}

fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |total, &b| {
        total.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

/// The part of `spec` inside `[0, len)`, if any (RFC 9110 §14.1.1 "satisfiable").
fn satisfiable(spec: &Spec, len: u64) -> Option<ByteRange> {
    let last_byte = len.checked_sub(1)?;
    match *spec {
        Spec::FromTo { first, last } => (first <= last_byte).then(|| ByteRange {
            start: first,
            end: last.map_or(last_byte, |last| last.min(last_byte)),
        }),
        // A zero-length suffix selects nothing and so is unsatisfiable.
        Spec::Suffix(0) => None,
        Spec::Suffix(suffix) => Some(ByteRange {
            start: len - suffix.min(len),
            end: last_byte,
        }),
    }
}

/// Sorts and coalesces ranges that overlap or touch.
fn merge(mut ranges: Vec<ByteRange>) -> Vec<ByteRange> {
    ranges.sort_unstable_by_key(|range| range.start);
    let mut merged: Vec<ByteRange> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(previous) if range.start <= previous.end.saturating_add(1) => {
                previous.end = previous.end.max(range.end);
            }
            _ => merged.push(range),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn partial(pairs: &[(u64, u64)]) -> RangeOutcome {
        RangeOutcome::Partial(
            pairs
                .iter()
                .map(|&(start, end)| ByteRange { start, end })
                .collect(),
        )
    }

    /// RFC 9110 §14.1.2's examples against a 10000-byte representation.
    #[test]
    fn rfc_examples() {
        let cases: &[(&[u8], RangeOutcome)] = &[
            (b"bytes=0-499", partial(&[(0, 499)])),
            (b"bytes=500-999", partial(&[(500, 999)])),
            (b"bytes=-500", partial(&[(9500, 9999)])),
            (b"bytes=9500-", partial(&[(9500, 9999)])),
            (b"bytes=0-0,-1", partial(&[(0, 0), (9999, 9999)])),
            (
                b"bytes=0-999, 4500-5499, -1000",
                partial(&[(0, 999), (4500, 5499), (9000, 9999)]),
            ),
            (b"bytes=500-600,601-999", partial(&[(500, 999)])),
            (b"bytes=500-700,601-999", partial(&[(500, 999)])),
        ];
        for (value, expected) in cases {
            assert_eq!(
                &parse_range(value, 10_000, 16),
                expected,
                "{}",
                value.escape_ascii()
            );
        }
    }

    #[test]
    fn ignored_headers_serve_full() {
        for value in [
            &b""[..],
            b"bytes",
            b"bytes=",
            b"bytes=,",
            b"items=0-1",
            b"bytes=1-0",
            b"bytes=a-b",
            b"bytes=-",
            b"bytes=0-1,x",
            b"bytes=+1-2",
            b"bytes=0 -1",
        ] {
            assert_eq!(
                parse_range(value, 100, 16),
                RangeOutcome::Full,
                "{}",
                value.escape_ascii()
            );
        }
    }

    #[test]
    fn unsatisfiable_cases() {
        assert_eq!(
            parse_range(b"bytes=100-", 100, 16),
            RangeOutcome::Unsatisfiable
        );
        assert_eq!(
            parse_range(b"bytes=-0", 100, 16),
            RangeOutcome::Unsatisfiable
        );
        assert_eq!(parse_range(b"bytes=0-", 0, 16), RangeOutcome::Unsatisfiable);
        assert_eq!(parse_range(b"bytes=-5", 0, 16), RangeOutcome::Unsatisfiable);
        assert_eq!(
            parse_range(b"bytes=200-300, 150-", 100, 16),
            RangeOutcome::Unsatisfiable
        );
    }

    #[test]
    fn clamping_and_saturation() {
        assert_eq!(parse_range(b"bytes=90-5000", 100, 16), partial(&[(90, 99)]));
        assert_eq!(parse_range(b"bytes=-5000", 100, 16), partial(&[(0, 99)]));
        assert_eq!(
            parse_range(b"Bytes = 0-99999999999999999999999", 100, 16),
            RangeOutcome::Full,
            "whitespace around '=' is not allowed"
        );
        assert_eq!(
            parse_range(b"BYTES=0-99999999999999999999999", 100, 16),
            partial(&[(0, 99)])
        );
        assert_eq!(
            parse_range(b"bytes=99999999999999999999999-", 100, 16),
            RangeOutcome::Unsatisfiable
        );
    }

    #[test]
    fn too_many_specs_serve_full() {
        let many = format!("bytes={}", vec!["0-0"; 17].join(","));
        assert_eq!(parse_range(many.as_bytes(), 100, 16), RangeOutcome::Full);
        let enough = format!("bytes={}", vec!["0-0"; 16].join(","));
        assert_eq!(parse_range(enough.as_bytes(), 100, 16), partial(&[(0, 0)]));
        assert_eq!(ByteRange { start: 3, end: 3 }.len(), 1);
    }

    proptest! {
        #[test]
        fn partial_ranges_are_in_bounds_sorted_disjoint(
            specs in prop::collection::vec((prop::option::of(0u64..300), prop::option::of(0u64..300)), 1..10),
            len in 0u64..250,
        ) {
            let value = specs
                .iter()
                .map(|(first, last)| match (first, last) {
                    (Some(first), Some(last)) => format!("{first}-{last}"),
                    (Some(first), None) => format!("{first}-"),
                    (None, Some(suffix)) => format!("-{suffix}"),
                    (None, None) => "-".to_string(),
                })
                .collect::<Vec<_>>()
                .join(",");
            let outcome = parse_range(format!("bytes={value}").as_bytes(), len, 8);
            if let RangeOutcome::Partial(ranges) = outcome {
                prop_assert!(!ranges.is_empty());
                let total: u64 = ranges.iter().map(ByteRange::len).sum();
                prop_assert!(total <= len);
                for range in &ranges {
                    prop_assert!(range.start <= range.end && range.end < len);
                }
                for pair in ranges.windows(2) {
                    // Disjoint and not even adjacent: adjacent ones were merged.
                    prop_assert!(pair[0].end + 1 < pair[1].start);
                }
            }
        }
    }
}
