//! The `priority` request header of Extensible Priorities (RFC 9218 §4): an urgency from 0
//! (most urgent) to 7, default 3, and whether the response may be sent interleaved with others
//! of its urgency (`i`, default false). Browsers send it on every request (a page's style
//! sheets before its images); the server frames the most urgent responses first.
//!
//! Owns: reading the field (a Structured Fields dictionary, RFC 8941 §3.2, of which only the
//! `u` and `i` members mean anything here). Must not touch: scheduling (the server's session
//! decides what it does with the answer), PRIORITY_UPDATE frames (ignored as unknown frames).

/// A request's priority parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    /// 0 (most urgent) to 7.
    pub urgency: u8,
    /// The response may share the connection with others of its urgency as it goes.
    pub incremental: bool,
}

impl Default for Priority {
    /// RFC 9218 §4.1, §4.2: urgency 3, not incremental.
    fn default() -> Priority {
        Priority {
            urgency: 3,
            incremental: false,
        }
    }
}

impl Priority {
    /// The priority the `priority` field values of a request give (in order: a later member
    /// replaces an earlier one, as in one dictionary). A member whose value is not valid is
    /// ignored, leaving its default (§4: "ignore ... out-of-range or invalid value"), and so are
    /// unknown members and every member's parameters.
    #[must_use]
    pub fn of<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Priority {
        let mut priority = Priority::default();
        for value in values {
            for member in value.split(|&byte| byte == b',') {
                let member = trim(member);
                let member = member
                    .iter()
                    .position(|&byte| byte == b';')
                    .map_or(member, |at| &member[..at]);
                let (key, value) = match member.iter().position(|&byte| byte == b'=') {
                    Some(at) => (&member[..at], Some(&member[at + 1..])),
                    None => (member, None),
                };
                match (key, value) {
                    (b"u", Some(value)) => {
                        if let Some(urgency) = urgency(value) {
                            priority.urgency = urgency;
                        }
                    }
                    // A bare key is the boolean true (RFC 8941 §3.2).
                    (b"i", None | Some(b"?1")) => priority.incremental = true,
                    (b"i", Some(b"?0")) => priority.incremental = false,
                    _ => {}
                }
            }
        }
        priority
    }
}

/// An sf-integer from 0 to 7.
fn urgency(value: &[u8]) -> Option<u8> {
    match value {
        [digit @ b'0'..=b'7'] => Some(digit - b'0'),
        _ => None,
    }
}

/// Without the optional white space around a member (RFC 8941 §3.2: OWS, spaces and tabs).
fn trim(mut bytes: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = bytes {
        bytes = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = bytes {
        bytes = rest;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(value: &str) -> Priority {
        Priority::of([value.as_bytes()])
    }

    #[test]
    fn the_defaults_without_a_field() {
        assert_eq!(Priority::of([]), Priority::default());
        assert_eq!(Priority::default().urgency, 3);
        assert!(!Priority::default().incremental);
    }

    #[test]
    fn urgency_and_incremental_as_browsers_send_them() {
        assert_eq!(
            of("u=0, i"),
            Priority {
                urgency: 0,
                incremental: true
            }
        );
        assert_eq!(of("u=1").urgency, 1);
        assert!(!of("u=1").incremental);
        assert_eq!(
            of("i=?1,u=5"),
            Priority {
                urgency: 5,
                incremental: true
            }
        );
        assert!(!of("i=?0").incremental);
        assert_eq!(of("\tu=7 ").urgency, 7);
    }

    #[test]
    fn invalid_or_unknown_members_are_ignored_not_the_field() {
        assert_eq!(of("u=8, i").urgency, 3, "out of range");
        assert!(of("u=8, i").incremental);
        assert_eq!(of("u=-1").urgency, 3);
        assert_eq!(of("u=1.5").urgency, 3, "a decimal is not an integer");
        assert_eq!(of("u=\"2\"").urgency, 3);
        assert_eq!(of("x=1, u=2;p=1").urgency, 2, "parameters are ignored");
        assert!(!of("i=1").incremental, "a boolean is ?0 or ?1");
        assert_eq!(of("garbage").urgency, 3);
    }

    #[test]
    fn a_later_member_or_field_line_replaces_an_earlier_one() {
        assert_eq!(of("u=1, u=6").urgency, 6);
        let lines: [&[u8]; 2] = [b"u=2, i", b"u=4"];
        assert_eq!(
            Priority::of(lines),
            Priority {
                urgency: 4,
                incremental: true
            }
        );
    }
}
