//! The status an error page's response goes out with (`error_pages.rs`), applied where heads
//! are committed (`Output::end_head`), and the request line the access log keeps for it.
//!
//! Owns: `AnswerAs`. Must not touch: deciding on error pages (`error_pages.rs`), routing.

use ampd_http::request::Method;
use ampd_http::response_head::Head;

/// Fields of the page's response that describe the page's file, not the error: a client must
/// not revalidate, resume or keep an error by them (ampd's own status pages have none).
const PAGE_ONLY_FIELDS: [&str; 5] = [
    "etag",
    "last-modified",
    "accept-ranges",
    "cache-control",
    "expires",
];

/// The status an error page's response goes out with, and what else of the original answer it
/// keeps (held by the output queue while the page's request is served).
#[derive(Clone, Debug)]
pub struct AnswerAs {
    /// The status sent.
    pub(super) status: u16,
    /// The status the request was to be answered with.
    pub(super) original: u16,
    /// The fields that status needed (`Allow` of a `405` …).
    pub(super) fields: Vec<(String, Vec<u8>)>,
    /// The client's method and target, for the access log.
    pub(super) method: Method,
    pub(super) target: Box<str>,
}

impl AnswerAs {
    /// Give a final head of the page's response the status to send (`1xx` heads are left
    /// alone).
    pub fn apply(&self, head: &mut Head) {
        if head.status < 200 {
            return;
        }
        head.status = self.status;
        if !(200..300).contains(&self.status) {
            for name in PAGE_ONLY_FIELDS {
                head.remove(name);
            }
        }
        if self.status == self.original {
            for (name, value) in &self.fields {
                head.remove(name);
                head.push(name, value);
            }
        }
    }

    /// The status the access log and counters record for a response logged as `status`: the
    /// one sent (a `499`, nothing sent, stays).
    #[must_use]
    pub fn logged(&self, status: u16) -> u16 {
        if status == 499 {
            status
        } else {
            self.status
        }
    }

    /// The client's request line (method, target) for the access log.
    #[must_use]
    pub fn request(&self) -> (&Method, &str) {
        (&self.method, &self.target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer_as(status: u16, original: u16) -> AnswerAs {
        AnswerAs {
            status,
            original,
            fields: vec![("Allow".to_owned(), b"GET, HEAD".to_vec())],
            method: Method::Post,
            target: "/form".into(),
        }
    }

    #[test]
    fn the_page_goes_out_with_the_status_and_without_its_validators() {
        let mut head = Head::new(200);
        head.push("ETag", b"\"abc\"");
        head.push("Last-Modified", b"Sun, 29 Nov 2026 17:00:00 GMT");
        head.push("Content-Type", b"text/html");
        head.push("Allow", b"GET");
        answer_as(405, 405).apply(&mut head);
        assert_eq!(head.status, 405);
        let fields: Vec<_> = head.fields().collect();
        assert_eq!(
            fields,
            [
                (&b"Content-Type"[..], &b"text/html"[..]),
                (&b"Allow"[..], &b"GET, HEAD"[..])
            ]
        );

        let mut stated = Head::new(200);
        stated.push("ETag", b"\"abc\"");
        answer_as(200, 405).apply(&mut stated);
        assert_eq!(stated.status, 200);
        assert_eq!(
            stated.get("etag"),
            Some(&b"\"abc\""[..]),
            "a 2xx keeps them"
        );
        assert!(
            stated.get("allow").is_none(),
            "the fields go with the original"
        );

        let mut interim = Head::new(100);
        answer_as(405, 405).apply(&mut interim);
        assert_eq!(interim.status, 100);
        assert_eq!(answer_as(404, 404).logged(499), 499);
        assert_eq!(answer_as(200, 404).logged(404), 200);
    }
}
