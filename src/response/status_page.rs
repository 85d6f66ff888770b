//! Responses that carry a status and a short explanatory page: errors, redirects, listings.
//!
//! Owns: the bodies of error pages (one per status with a reason phrase, rendered once per
//! process: nothing is formatted per request but the head) and the shape of such responses.
//! Must not touch: anything but the head it fills.

use std::sync::OnceLock;

use ampd_http::response::reason;

use super::{common_fields, Head, HeadContext};

/// A status page that `content` decides on but does not write: the connection writes it, in
/// the one place every status page passes through (`Conn::answer_status`), so that what
/// applies to every status page applies to these too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusAnswer {
    pub status: u16,
    /// A field the status needs (`Content-Range` of a `416`, RFC 9110 §15.5.17).
    pub field: Option<(&'static str, Vec<u8>)>,
}

impl StatusAnswer {
    pub fn new(status: u16) -> StatusAnswer {
        StatusAnswer {
            status,
            field: None,
        }
    }

    pub fn with_field(status: u16, name: &'static str, value: Vec<u8>) -> StatusAnswer {
        StatusAnswer {
            status,
            field: Some((name, value)),
        }
    }
}

/// Fill `head` (status set) for a response with a small HTML body explaining `status`, and
/// return that body (`None` for a `204` or `304`, which have none; a response to `HEAD` leaves
/// it out, with the fields kept).
pub fn fill(
    head: &mut Head,
    status: u16,
    context: &HeadContext<'_>,
    extra: &[(&str, &[u8])],
) -> Option<&'static str> {
    let has_body = status != 304 && status != 204;
    common_fields(head, context);
    for (name, value) in extra {
        head.push(name, value);
    }
    if !has_body {
        return None;
    }
    let page = page(status);
    head.push("Content-Type", b"text/html; charset=utf-8");
    head.push_decimal("Content-Length", page.len() as u64);
    Some(page)
}

/// The page for `status`: titled `CODE Reason` for every status that has a reason phrase
/// (`ampd_http::response::reason`, the one table the status line reads too, so a status and
/// its page never disagree), rendered once per process.
fn page(status: u16) -> &'static str {
    const FIRST: u16 = 100;
    const LAST: u16 = 599;
    /// For a status with no phrase: ampd sends none, but a page must never be untitled.
    const UNNAMED: &str =
        "<!DOCTYPE html>\n<html><head><title>Error</title></head>\n<body><h1>Error</h1><hr>ampd</body></html>\n";
    static PAGES: OnceLock<Vec<Option<Box<str>>>> = OnceLock::new();
    let pages = PAGES.get_or_init(|| {
        (FIRST..=LAST)
            .map(|status| {
                let phrase = reason(status);
                (!phrase.is_empty()).then(|| {
                    format!(
                        "<!DOCTYPE html>\n<html><head><title>{status} {phrase}</title></head>\n\
                         <body><h1>{status} {phrase}</h1><hr>ampd</body></html>\n"
                    )
                    .into_boxed_str()
                })
            })
            .collect()
    });
    status
        .checked_sub(FIRST)
        .and_then(|index| pages.get(usize::from(index)))
        .and_then(Option::as_deref)
        .unwrap_or(UNNAMED)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every status ampd can write a status line for (the reason-phrase table that
    /// `write_status_line` reads) gets a page titled with its code and phrase: the proxy's 502,
    /// 504 and HTTPS's 421 among them.
    #[test]
    fn every_status_with_a_reason_phrase_has_a_titled_page() {
        let mut checked = 0;
        for status in 100..=599 {
            let phrase = reason(status);
            if phrase.is_empty() {
                continue;
            }
            let page = page(status);
            let title = format!("{status} {phrase}");
            assert!(
                page.contains(&format!("<title>{title}</title>")),
                "{status}: {page}"
            );
            assert!(
                page.contains(&format!("<h1>{title}</h1>")),
                "{status}: {page}"
            );
            checked += 1;
        }
        assert!(checked >= 40, "the reason table shrank to {checked}");
    }

    #[test]
    fn a_status_without_a_phrase_still_has_a_title() {
        assert!(page(599).contains("<title>"), "{}", page(599));
    }
}
