//! Conditional requests: entity tags, the precondition order of RFC 9110 §13.2.2, and If-Range
//! (§13.1.5).
//!
//! Owns the comparison rules and the evaluation order. Must not compute validators (the server
//! derives ETag and Last-Modified from file metadata) or read a clock.

use crate::date::parse_http_date;
use crate::request::RequestHead;
use crate::token::{is_ows, trim_ows};

/// An entity tag (RFC 9110 §8.8.3): `"opaque"` or `W/"opaque"`; `opaque` excludes the quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntityTag<'a> {
    pub weak: bool,
    pub opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Parses an entity tag at the start of `input`, returning it and the bytes after it.
    #[must_use]
    pub fn parse_prefix(input: &'a [u8]) -> Option<(EntityTag<'a>, &'a [u8])> {
        let (weak, quoted) = match input.strip_prefix(b"W/") {
            Some(rest) => (true, rest),
            None => (false, input),
        };
        let body = quoted.strip_prefix(b"\"")?;
        let close = body.iter().position(|&b| b == b'"')?;
        let opaque = &body[..close];
        // etagc = %x21 / %x23-7E / obs-text: no controls, no space.
        if !opaque
            .iter()
            .all(|&b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)
        {
            return None;
        }
        Some((EntityTag { weak, opaque }, &body[close + 1..]))
    }

    /// Parses a value that is exactly one entity tag.
    #[must_use]
    pub fn parse(value: &'a [u8]) -> Option<EntityTag<'a>> {
        match EntityTag::parse_prefix(value)? {
            (tag, []) => Some(tag),
            _ => None,
        }
    }

    /// Strong comparison: neither is weak and the opaque parts are equal (RFC 9110 §8.8.3.2).
    #[inline]
    #[must_use]
    pub fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }

    /// Weak comparison: the opaque parts are equal, whatever the weakness.
    #[inline]
    #[must_use]
    pub fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque == other.opaque
    }
}

/// The current representation's validators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Validators<'a> {
    /// The full ETag field value, e.g. `b"\"abc\""` or `b"W/\"abc\""`.
    pub etag: Option<&'a [u8]>,
    /// Last-Modified as unix seconds.
    pub last_modified: Option<u64>,
}

/// What the preconditions say to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Precondition {
    /// Perform the method (Range, if any, is evaluated next).
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Comparison {
    Strong,
    Weak,
}

/// Whether any field value in `values` (`*` or a list of entity tags) matches `current`.
/// `*` matches because a representation exists whenever validators are evaluated. An
/// unparsable list matches nothing.
fn list_matches<'v>(
    values: impl Iterator<Item = &'v [u8]>,
    current: Option<&EntityTag<'_>>,
    comparison: Comparison,
) -> bool {
    for value in values {
        let mut rest = trim_ows(value);
        if rest == b"*" {
            return true;
        }
        loop {
            rest = skip_separators(rest);
            if rest.is_empty() {
                break;
            }
            let Some((tag, after)) = EntityTag::parse_prefix(rest) else {
                break;
            };
            let matched = current.is_some_and(|current| match comparison {
                Comparison::Strong => tag.strong_eq(current),
                Comparison::Weak => tag.weak_eq(current),
            });
            if matched {
                return true;
            }
            rest = after;
        }
    }
    false
}

fn skip_separators(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|&b| !is_ows(b) && b != b',')
        .unwrap_or(bytes.len());
    &bytes[start..]
}

/// A header's date, or `None` when it is absent or not a valid HTTP-date (invalid dates are
/// ignored, RFC 9110 §13.1.3-§13.1.4).
fn header_date(head: &RequestHead, name: &str) -> Option<u64> {
    parse_http_date(trim_ows(head.header(name)?))
}

/// Evaluates If-Match, If-Unmodified-Since, If-None-Match and If-Modified-Since in the order
/// of RFC 9110 §13.2.2 (steps 1-4; If-Range, step 5, is [`if_range_allows_partial`]).
///
/// If-Unmodified-Since against a representation without Last-Modified fails: the server
/// cannot show the representation is unmodified. If-Modified-Since dates in the future are not
/// detected here (no clock); such a request gets 304 only if the file is older, which is what
/// the client asked.
#[must_use]
pub fn evaluate(head: &RequestHead, v: &Validators) -> Precondition {
    // Most requests carry no precondition: one pass over the names says so, before four
    // lookups by name and the parse of our own tag (5 % of a cached response's instructions).
    let conditional = head.headers.iter().any(|header| {
        header
            .name
            .as_bytes()
            .get(..3)
            .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"if-"))
    });
    if !conditional {
        return Precondition::Proceed;
    }
    let current = v.etag.and_then(EntityTag::parse);
    let get_or_head = head.method.is_get_or_head();

    if head.header("if-match").is_some() {
        if !list_matches(
            head.headers_named("if-match"),
            current.as_ref(),
            Comparison::Strong,
        ) {
            return Precondition::Failed;
        }
    } else if let Some(date) = header_date(head, "if-unmodified-since") {
        let unmodified = matches!(v.last_modified, Some(modified) if modified <= date);
        if !unmodified {
            return Precondition::Failed;
        }
    }

    if head.header("if-none-match").is_some() {
        if list_matches(
            head.headers_named("if-none-match"),
            current.as_ref(),
            Comparison::Weak,
        ) {
            return if get_or_head {
                Precondition::NotModified
            } else {
                Precondition::Failed
            };
        }
    } else if get_or_head {
        if let (Some(date), Some(modified)) =
            (header_date(head, "if-modified-since"), v.last_modified)
        {
            if modified <= date {
                return Precondition::NotModified;
            }
        }
    }
    Precondition::Proceed
}

/// Whether a Range may be honoured given If-Range (RFC 9110 §13.1.5): true when If-Range is
/// absent; for an entity tag, only on a strong match (a weak tag never matches); for a date,
/// only when it equals Last-Modified exactly. Anything else (several If-Range fields, an
/// unparsable value) means "send the whole representation".
#[must_use]
pub fn if_range_allows_partial(head: &RequestHead, v: &Validators) -> bool {
    let mut values = head.headers_named("if-range");
    let Some(value) = values.next() else {
        return true;
    };
    if values.next().is_some() {
        return false;
    }
    let value = trim_ows(value);
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        let (Some(sent), Some(current)) =
            (EntityTag::parse(value), v.etag.and_then(EntityTag::parse))
        else {
            return false;
        };
        return sent.strong_eq(&current);
    }
    match (parse_http_date(value), v.last_modified) {
        (Some(date), Some(modified)) => date == modified,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{HeadParser, Limits, Parse};

    fn head(method: &str, fields: &[(&str, &str)]) -> RequestHead {
        let mut bytes = format!("{method} /f HTTP/1.1\r\nHost: h\r\n");
        for (name, value) in fields {
            bytes.push_str(&format!("{name}: {value}\r\n"));
        }
        bytes.push_str("\r\n");
        match HeadParser::new(Limits::default()).parse(bytes.as_bytes()) {
            Ok(Parse::Complete { head, .. }) => head,
            other => panic!("test head did not parse: {other:?}"),
        }
    }

    const LAST_MODIFIED: u64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT
    const AT: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
    const BEFORE: &str = "Sat, 05 Nov 1994 08:49:37 GMT";
    const AFTER: &str = "Mon, 07 Nov 1994 08:49:37 GMT";

    fn strong() -> Validators<'static> {
        Validators {
            etag: Some(b"\"xyzzy\""),
            last_modified: Some(LAST_MODIFIED),
        }
    }

    /// RFC 9110 §8.8.3.2's comparison table.
    #[test]
    fn comparison_table() {
        let cases = [
            ("W/\"1\"", "W/\"1\"", false, true),
            ("W/\"1\"", "W/\"2\"", false, false),
            ("W/\"1\"", "\"1\"", false, true),
            ("\"1\"", "\"1\"", true, true),
        ];
        for (a, b, strong, weak) in cases {
            let a = EntityTag::parse(a.as_bytes()).unwrap();
            let b = EntityTag::parse(b.as_bytes()).unwrap();
            assert_eq!(a.strong_eq(&b), strong);
            assert_eq!(a.weak_eq(&b), weak);
        }
    }

    #[test]
    fn entity_tag_syntax() {
        assert_eq!(
            EntityTag::parse(b"W/\"a,b\""),
            Some(EntityTag {
                weak: true,
                opaque: b"a,b"
            })
        );
        assert_eq!(EntityTag::parse(b"\"\"").map(|t| t.opaque), Some(&b""[..]));
        for bad in [&b"abc"[..], b"\"abc", b"w/\"a\"", b"\"a b\"", b"\"a\"x"] {
            assert_eq!(EntityTag::parse(bad), None, "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn if_match() {
        let v = strong();
        let cases = [
            ("\"xyzzy\"", Precondition::Proceed),
            (
                "\"r2d2xxxx\", \"xyzzy\", \"c3piozzzz\"",
                Precondition::Proceed,
            ),
            ("*", Precondition::Proceed),
            ("W/\"xyzzy\"", Precondition::Failed),
            ("\"other\"", Precondition::Failed),
            ("garbage", Precondition::Failed),
        ];
        for (value, expected) in cases {
            assert_eq!(
                evaluate(&head("PUT", &[("If-Match", value)]), &v),
                expected,
                "{value}"
            );
        }
        let weak_current = Validators {
            etag: Some(b"W/\"xyzzy\""),
            last_modified: None,
        };
        assert_eq!(
            evaluate(&head("GET", &[("If-Match", "\"xyzzy\"")]), &weak_current),
            Precondition::Failed
        );
    }

    #[test]
    fn if_match_wins_over_if_unmodified_since() {
        let h = head(
            "PUT",
            &[("If-Match", "\"xyzzy\""), ("If-Unmodified-Since", BEFORE)],
        );
        assert_eq!(evaluate(&h, &strong()), Precondition::Proceed);
    }

    #[test]
    fn if_unmodified_since() {
        let v = strong();
        let check = |date: &str| evaluate(&head("PUT", &[("If-Unmodified-Since", date)]), &v);
        assert_eq!(check(AT), Precondition::Proceed);
        assert_eq!(check(AFTER), Precondition::Proceed);
        assert_eq!(check(BEFORE), Precondition::Failed);
        assert_eq!(check("not a date"), Precondition::Proceed);
        let no_date = Validators::default();
        assert_eq!(
            evaluate(&head("PUT", &[("If-Unmodified-Since", AT)]), &no_date),
            Precondition::Failed
        );
    }

    #[test]
    fn if_none_match() {
        let v = strong();
        let cases = [
            ("GET", "\"xyzzy\"", Precondition::NotModified),
            ("HEAD", "W/\"xyzzy\"", Precondition::NotModified),
            ("GET", "\"a\", W/\"xyzzy\"", Precondition::NotModified),
            ("GET", "*", Precondition::NotModified),
            ("GET", "\"other\"", Precondition::Proceed),
            ("PUT", "*", Precondition::Failed),
            ("DELETE", "W/\"xyzzy\"", Precondition::Failed),
        ];
        for (method, value, expected) in cases {
            assert_eq!(
                evaluate(&head(method, &[("If-None-Match", value)]), &v),
                expected,
                "{method} {value}"
            );
        }
    }

    #[test]
    fn if_none_match_shadows_if_modified_since() {
        let h = head(
            "GET",
            &[("If-None-Match", "\"other\""), ("If-Modified-Since", AFTER)],
        );
        assert_eq!(evaluate(&h, &strong()), Precondition::Proceed);
    }

    #[test]
    fn if_modified_since() {
        let v = strong();
        let check =
            |method: &str, date: &str| evaluate(&head(method, &[("If-Modified-Since", date)]), &v);
        assert_eq!(check("GET", AT), Precondition::NotModified);
        assert_eq!(check("GET", AFTER), Precondition::NotModified);
        assert_eq!(check("GET", BEFORE), Precondition::Proceed);
        assert_eq!(
            check("GET", "Sunday, 06-Nov-94 08:49:37 GMT"),
            Precondition::NotModified
        );
        assert_eq!(check("GET", "yesterday"), Precondition::Proceed);
        assert_eq!(check("POST", AFTER), Precondition::Proceed);
    }

    #[test]
    fn if_range() {
        let v = strong();
        let allows =
            |value: &str| if_range_allows_partial(&head("GET", &[("If-Range", value)]), &v);
        assert!(if_range_allows_partial(&head("GET", &[]), &v));
        assert!(allows("\"xyzzy\""));
        assert!(!allows("W/\"xyzzy\""));
        assert!(!allows("\"other\""));
        assert!(allows(AT));
        assert!(!allows(AFTER));
        assert!(!allows("garbage"));
        let weak_current = Validators {
            etag: Some(b"W/\"xyzzy\""),
            last_modified: None,
        };
        assert!(!if_range_allows_partial(
            &head("GET", &[("If-Range", "\"xyzzy\"")]),
            &weak_current
        ));
        let twice = head(
            "GET",
            &[("If-Range", "\"xyzzy\""), ("If-Range", "\"xyzzy\"")],
        );
        assert!(!if_range_allows_partial(&twice, &v));
    }
}
