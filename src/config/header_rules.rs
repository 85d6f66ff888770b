//! A location's `headers_remove` and `headers_set`, applied to a response head once, at the
//! point it is committed (`conn::output::Output::end_head`), after the handler and the common
//! fields filled it: so they reach every response the location answers — files, status pages,
//! upstream, FastCGI and CGI heads — over HTTP/1 and HTTP/2 alike. Part of the configuration
//! (which checks names against `PROTECTED` at load), working on the protocol crate's `Head`.
//!
//! Owns: the rules as the request path uses them, and which fields they may not touch
//! (`protected`). Must not touch: the configuration's text (`header_keys.rs`).

use ampd_http::response_head::Head;

/// Fields no rule may remove or set: the connection-specific ones (RFC 9110 §7.6.1, which
/// ampd writes from persistence and never keeps in a `Head`; HTTP/2 forbids them, RFC 9113
/// §8.2.2), the body's framing (`Content-Length`, RFC 9112 §6; `Content-Range`, which says
/// which bytes a 206 holds), and `Date`, which an origin with a clock must send (RFC 9110
/// §6.6.1). nginx's `add_header` cannot replace these either; Caddy's `header` can, and
/// breaks the message when it does.
pub const PROTECTED: [&str; 10] = [
    "connection",
    "content-length",
    "content-range",
    "date",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Whether `name` is one a rule may not touch (`PROTECTED`).
#[must_use]
pub fn protected(name: &str) -> bool {
    PROTECTED
        .iter()
        .any(|field| field.eq_ignore_ascii_case(name))
}

/// What a location removes from and replaces in every final response head it answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderRules {
    /// Names removed, whoever wrote the field (ampd's `Server`, an upstream's `X-Powered-By`).
    pub remove: Vec<String>,
    /// Each name's fields removed, then this one added.
    pub set: Vec<(String, String)>,
}

impl HeaderRules {
    /// No rule at all (the location's responses pass untouched, the fast path stays).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.set.is_empty()
    }

    /// Apply the rules to a final head (`1xx` heads are left alone: a `100 Continue` or
    /// `103 Early Hints` is not the location's answer).
    pub fn apply(&self, head: &mut Head) {
        if head.status < 200 {
            return;
        }
        for name in &self.remove {
            head.remove(name);
        }
        for (name, value) in &self.set {
            head.remove(name);
            head.push(name, value.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{protected, HeaderRules};
    use ampd_http::response_head::Head;

    #[test]
    fn rules_remove_then_replace_and_leave_interim_heads_alone() {
        let rules = HeaderRules {
            remove: vec!["server".into(), "X-Powered-By".into()],
            set: vec![("Cache-Control".into(), "no-store".into())],
        };
        let mut head = Head::new(200);
        head.push("Server", b"ampd");
        head.push("Cache-Control", b"max-age=60");
        head.push("X-Powered-By", b"PHP/8");
        head.push("cache-control", b"public");
        rules.apply(&mut head);
        let fields: Vec<_> = head.fields().collect();
        assert_eq!(fields, [(&b"Cache-Control"[..], &b"no-store"[..])]);

        let mut interim = Head::new(100);
        interim.push("Server", b"ampd");
        rules.apply(&mut interim);
        assert_eq!(interim.get("server"), Some(&b"ampd"[..]));
    }

    #[test]
    fn framing_and_date_are_protected_and_others_not() {
        assert!(protected("Content-Length"));
        assert!(protected("TRANSFER-ENCODING"));
        assert!(protected("date"));
        assert!(!protected("Server"));
        assert!(!protected("X-Powered-By"));
    }
}
