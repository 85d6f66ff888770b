//! Whether a response is compressed on the fly, and with what: the one decision every handler's
//! response goes through (static files compressed once, streamed upstream bodies alike), and
//! the head it leaves behind.
//!
//! Owns: which responses may be compressed (status, type, length, `no-transform`, an existing
//! `Content-Encoding`, ranges, RFC 9110 §8.4.1 and §15.3.7), `Vary: Accept-Encoding`, and the
//! fields a compressed head gains and loses. Must not touch: the codecs (`super`), the body,
//! framing (`Content-Length` is removed here; what replaces it is the connection's).

use ampd_http::accept::{choose_encoding, EncodingChoice};

use crate::config::compression::{Compression, Encoding};
use crate::response::Head;

/// What the request says about compression: its `Accept-Encoding`, and whether it wants the
/// whole body of the representation (not a `HEAD`'s nothing, not a range of it).
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// `None`: the request has no `Accept-Encoding` (RFC 9110 §12.5.3: any coding is
    /// acceptable, but a client that says nothing is sent identity, as every server does).
    pub accept_encoding: Option<&'a [u8]>,
    /// The request carries `Range`: a `206` is of the identity representation, and a
    /// compressed one would not match the ranges the client computed from its length.
    pub range: bool,
}

/// The outcome for one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Left as it is: the response is not of a kind this location compresses. No `Vary`.
    Untouched,
    /// Compressible, but this request gets identity (its `Accept-Encoding`, a range): sent
    /// plain with `Vary: Accept-Encoding`, so that a cache keeps the two apart.
    Identity,
    /// Compressed with this coding at this level.
    Compress(Encoding, u32),
}

impl Decision {
    #[must_use]
    pub fn encoding(self) -> Option<Encoding> {
        match self {
            Decision::Compress(encoding, _) => Some(encoding),
            Decision::Untouched | Decision::Identity => None,
        }
    }
}

/// Decides for `head` (filled by its handler; `length` the body's when known) and marks it:
/// `Vary` for anything compressible, and for a compressed response `Content-Encoding`, a weak
/// `ETag`, no `Content-Length` and no `Accept-Ranges`.
pub fn decide_and_mark(
    settings: &Compression,
    wanted: Wanted<'_>,
    head: &mut Head,
    length: Option<u64>,
) -> Decision {
    let decision = decide(settings, wanted, head, length);
    if decision != Decision::Untouched {
        add_vary(head);
    }
    if let Decision::Compress(encoding, _) = decision {
        mark_compressed(head, encoding);
    }
    decision
}

/// Marks `head` for `decision` as `decide_and_mark` does, for a decision taken before the head
/// was built (a static file's, by `decide_for_file`: its heads are built once and cached).
pub fn mark(head: &mut Head, decision: Decision) {
    if decision != Decision::Untouched {
        add_vary(head);
    }
    if let Decision::Compress(encoding, _) = decision {
        mark_compressed(head, encoding);
    }
}

/// The decision for a static file's full `200` of `content_type` and `length`, without a head:
/// a file has no `Content-Encoding`, `Content-Range` or `Cache-Control` of its own, so what
/// `decide` reads from the head is its type and length alone. Taken per request, where the
/// head comes pre-built (`content::head_cache`).
#[must_use]
pub fn decide_for_file(
    settings: &Compression,
    wanted: Wanted<'_>,
    content_type: &str,
    length: u64,
) -> Decision {
    let compressible = length >= settings.min_length && settings.types.matches(content_type);
    choose(settings, wanted, compressible)
}

/// The decision without touching the head.
#[must_use]
pub fn decide(
    settings: &Compression,
    wanted: Wanted<'_>,
    head: &Head,
    length: Option<u64>,
) -> Decision {
    choose(settings, wanted, compressible(settings, head, length))
}

/// Whether a `Cache-Control` value has `no-transform` (RFC 9110 §7.7: no intermediary, and so
/// no server on a handler's behalf, may change the content's coding).
#[must_use]
pub fn no_transform(cache_control: &[u8]) -> bool {
    has_token(cache_control, b"no-transform")
}

/// Whether the raw `Name: value\r\n` lines `fields` hold a `Cache-Control` with `no-transform`.
#[must_use]
pub fn fields_forbid_transform(fields: &[u8]) -> bool {
    fields.split(|&byte| byte == b'\n').any(|line| {
        let Some(colon) = line.iter().position(|&byte| byte == b':') else {
            return false;
        };
        line[..colon]
            .trim_ascii()
            .eq_ignore_ascii_case(b"cache-control")
            && no_transform(&line[colon + 1..])
    })
}

/// The coding for a response of a kind the location compresses (`compressible`), or none.
fn choose(settings: &Compression, wanted: Wanted<'_>, compressible: bool) -> Decision {
    if !settings.enabled || !compressible {
        return Decision::Untouched;
    }
    if wanted.range {
        return Decision::Identity;
    }
    match choose_encoding(wanted.accept_encoding, &tokens(&settings.encodings)) {
        EncodingChoice::Coding(index) => {
            let encoding = settings.encodings[index];
            Decision::Compress(encoding, settings.level(encoding))
        }
        // Nothing acceptable (`identity;q=0` and no coding we offer): identity anyway, as
        // §12.5.3 allows, rather than a 415 for a page the client can read.
        EncodingChoice::Identity | EncodingChoice::NothingAcceptable => Decision::Identity,
    }
}

/// Whether the response is of a kind the location compresses, whatever the request said.
fn compressible(settings: &Compression, head: &Head, length: Option<u64>) -> bool {
    // 200 and error pages carry a representation worth compressing; 206 is a range of the
    // identity one, 204/304 and 1xx have no body, 3xx bodies are a line of text (as nginx,
    // which compresses 200, 403 and 404 only).
    let status = head.status;
    let status_carries_page = status == 200 || (400..600).contains(&status);
    status_carries_page
        && length.is_none_or(|length| length >= settings.min_length)
        && head.get("content-encoding").is_none()
        && head.get("content-range").is_none()
        && !head
            .get("cache-control")
            .is_some_and(|value| has_token(value, b"no-transform"))
        && head
            .get("content-type")
            .and_then(|value| std::str::from_utf8(value).ok())
            .is_some_and(|content_type| settings.types.matches(content_type))
}

fn tokens(encodings: &[Encoding]) -> Vec<&'static str> {
    encodings.iter().map(|encoding| encoding.token()).collect()
}

/// Adds `Accept-Encoding` to `Vary` unless it is there already or `Vary` is `*`.
fn add_vary(head: &mut Head) {
    match head.get("vary") {
        None => head.push("Vary", b"Accept-Encoding"),
        Some(value) if has_token(value, b"accept-encoding") || has_token(value, b"*") => {}
        Some(value) => {
            let mut joined = value.to_vec();
            joined.extend_from_slice(b", Accept-Encoding");
            head.remove("vary");
            head.push("Vary", &joined);
        }
    }
}

/// The fields of a compressed response: its coding; a weak validator, since the compressed
/// bytes are not the bytes the strong one names (RFC 9110 §8.8.1; nginx does the same); no
/// length (the connection frames the new body) and no ranges (the compressed bytes are made
/// per response).
fn mark_compressed(head: &mut Head, encoding: Encoding) {
    head.push("Content-Encoding", encoding.token().as_bytes());
    head.remove("content-length");
    head.remove("accept-ranges");
    if let Some(etag) = head.get("etag").filter(|etag| etag.starts_with(b"\"")) {
        let mut weak = b"W/".to_vec();
        weak.extend_from_slice(etag);
        head.remove("etag");
        head.push("ETag", &weak);
    }
}

/// Whether the comma-separated `value` lists `token` (without case).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value.split(|&byte| byte == b',').any(|item| {
        let item = item.trim_ascii();
        // `no-transform` may come as a directive with no argument only; a `=` belongs to
        // another directive's value.
        item.eq_ignore_ascii_case(token)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(length: Option<u64>) -> Head {
        let mut head = Head::new(200);
        head.push("Content-Type", b"text/html; charset=utf-8");
        head.push("ETag", b"\"abc\"");
        head.push("Accept-Ranges", b"bytes");
        if let Some(length) = length {
            head.push_decimal("Content-Length", length);
        }
        head
    }

    fn wanted(accept_encoding: &str) -> Wanted<'_> {
        Wanted {
            accept_encoding: Some(accept_encoding.as_bytes()),
            range: false,
        }
    }

    #[test]
    fn a_compressed_head_has_its_coding_a_weak_etag_and_no_length() {
        let mut head = html(Some(4096));
        let decision = decide_and_mark(
            &Compression::new(true),
            wanted("gzip, br"),
            &mut head,
            Some(4096),
        );
        // zstd is first in the server's order but not accepted; br and gzip tie, br is first.
        assert_eq!(decision, Decision::Compress(Encoding::Brotli, 4));
        assert_eq!(head.get("content-encoding"), Some(&b"br"[..]));
        assert_eq!(head.get("etag"), Some(&b"W/\"abc\""[..]));
        assert_eq!(head.get("vary"), Some(&b"Accept-Encoding"[..]));
        assert_eq!(head.get("content-length"), None);
        assert_eq!(head.get("accept-ranges"), None);
    }

    #[test]
    fn the_clients_weights_win_over_the_servers_order() {
        let head = html(None);
        let settings = Compression::new(true);
        let decision = decide(&settings, wanted("zstd;q=0.5, gzip"), &head, None);
        assert_eq!(decision, Decision::Compress(Encoding::Gzip, 5));
        let decision = decide(&settings, wanted("*"), &head, None);
        assert_eq!(decision, Decision::Compress(Encoding::Zstd, 3));
    }

    #[test]
    fn identity_keeps_vary_and_the_strong_etag() {
        let mut head = html(Some(4096));
        let decision = decide_and_mark(
            &Compression::new(true),
            wanted("identity"),
            &mut head,
            Some(4096),
        );
        assert_eq!(decision, Decision::Identity);
        assert_eq!(head.get("vary"), Some(&b"Accept-Encoding"[..]));
        assert_eq!(head.get("etag"), Some(&b"\"abc\""[..]));
        assert!(head.get("content-length").is_some());
        let no_field = Wanted {
            accept_encoding: None,
            range: false,
        };
        assert_eq!(
            decide(&Compression::new(true), no_field, &head, Some(4096)),
            Decision::Identity
        );
        let nothing = wanted("identity;q=0, compress");
        assert_eq!(
            decide(&Compression::new(true), nothing, &head, Some(4096)),
            Decision::Identity
        );
    }

    #[test]
    fn what_is_never_compressed() {
        let settings = Compression::new(true);
        let accepts = wanted("gzip");
        let untouched = |head: &Head, length| decide(&settings, accepts, head, length);
        assert_eq!(untouched(&html(None), Some(100)), Decision::Untouched);
        let mut image = Head::new(200);
        image.push("Content-Type", b"image/png");
        assert_eq!(untouched(&image, None), Decision::Untouched);
        let mut encoded = html(None);
        encoded.push("Content-Encoding", b"gzip");
        assert_eq!(untouched(&encoded, None), Decision::Untouched);
        let mut no_transform = html(None);
        no_transform.push("Cache-Control", b"public, No-Transform");
        assert_eq!(untouched(&no_transform, None), Decision::Untouched);
        for status in [204, 206, 304, 301] {
            let mut head = html(None);
            head.reset(status);
            head.push("Content-Type", b"text/html");
            assert_eq!(untouched(&head, None), Decision::Untouched, "{status}");
        }
        assert_eq!(
            decide(&Compression::new(false), accepts, &html(None), None),
            Decision::Untouched
        );
        let range = Wanted {
            accept_encoding: Some(b"gzip"),
            range: true,
        };
        assert_eq!(
            decide(&settings, range, &html(None), None),
            Decision::Identity
        );
    }

    #[test]
    fn a_files_decision_is_the_same_as_its_heads() {
        let settings = Compression::new(true);
        for (content_type, length, accept) in [
            ("text/html; charset=utf-8", 4096, "gzip"),
            ("text/html; charset=utf-8", 100, "gzip"),
            ("image/png", 4096, "br"),
            ("application/json", 4096, "identity"),
        ] {
            let mut head = Head::new(200);
            head.push("Content-Type", content_type.as_bytes());
            let wanted = wanted(accept);
            assert_eq!(
                decide_for_file(&settings, wanted, content_type, length),
                decide(&settings, wanted, &head, Some(length)),
                "{content_type} {length} {accept}"
            );
        }
        let mut head = html(Some(4096));
        let decision = decide_for_file(&settings, wanted("zstd"), "text/html", 4096);
        mark(&mut head, decision);
        assert_eq!(head.get("content-encoding"), Some(&b"zstd"[..]));
        assert_eq!(head.get("etag"), Some(&b"W/\"abc\""[..]));
    }

    #[test]
    fn no_transform_is_found_in_raw_fields() {
        assert!(fields_forbid_transform(
            b"X-A: 1\r\ncache-control: public, no-transform\r\n"
        ));
        assert!(!fields_forbid_transform(
            b"X-No-Transform: no-transform\r\n"
        ));
        assert!(!fields_forbid_transform(b"Cache-Control: max-age=60\r\n"));
        assert!(!fields_forbid_transform(b""));
    }

    #[test]
    fn vary_is_joined_not_repeated() {
        let mut head = html(None);
        head.push("Vary", b"Accept-Language");
        decide_and_mark(&Compression::new(true), wanted("gzip"), &mut head, None);
        assert_eq!(
            head.get("vary"),
            Some(&b"Accept-Language, Accept-Encoding"[..])
        );
        let mut head = html(None);
        head.push("Vary", b"accept-encoding");
        decide_and_mark(&Compression::new(true), wanted("gzip"), &mut head, None);
        assert_eq!(head.get("vary"), Some(&b"accept-encoding"[..]));
    }
}
