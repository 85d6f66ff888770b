//! Content negotiation among files (Apache `MultiViews`; Abyss's variants): which files beside
//! a path that names none are its variants, in what order the server prefers them, and which
//! one a request gets.
//!
//! Owns: reading a variant's type and language from its name, the server's order of preference
//! (the tie-break), the `Vary` fields a set is chosen by, and the choice itself by `Accept` and
//! `Accept-Language` (RFC 9110 §12.5.1, §12.5.4; parsed by `ampd_http::accept`). The coding
//! (`Accept-Encoding`) is chosen afterwards among the chosen variant's precompressed siblings,
//! as for any file (`serve`).
//! Must not touch: the disk (`resolve` reads the directory on a helper and opens the variants).

use std::sync::Arc;

use ampd_http::accept::{self, Variant, Weight};
use ampd_http::request::RequestHead;

use super::file::{StaticFile, VariantSet, VaryFields};
use crate::mime::TypeOptions;

/// Variants kept of one name at most (each holds a descriptor, and its siblings more); past
/// it the server's least preferred are left out.
pub const MAX_VARIANTS: usize = 32;

/// A file that is a variant of the name asked for, as its name describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The file's name in the directory (`doc.fr.html`).
    pub file_name: String,
    /// Its `Content-Type`: by the last of its extensions that a type table knows, else the
    /// location's default type.
    pub media_type: &'static str,
    /// Its language tag (`fr`, `pt-BR`), from an extension that is one.
    pub language: Option<Arc<str>>,
}

/// The variants of `name` among the directory's `entries`, best first: the server prefers the
/// shortest name (`doc.html`, the generic one, before `doc.en.html`), then the first in byte
/// order (`doc.en.html` before `doc.fr.html`). At most [`MAX_VARIANTS`].
#[must_use]
pub fn candidates<I>(name: &str, entries: I, types: &TypeOptions) -> Vec<Candidate>
where
    I: IntoIterator<Item = String>,
{
    let mut found: Vec<Candidate> = entries
        .into_iter()
        .filter_map(|entry| classify(name, entry, types))
        .collect();
    found.sort_by(|a, b| (a.file_name.len(), &a.file_name).cmp(&(b.file_name.len(), &b.file_name)));
    found.truncate(MAX_VARIANTS);
    found
}

/// `file_name` as a variant of `name`, if it is one: `name.` followed by extensions that each
/// name a media type (a type table knows it) or a language (an ISO 639-1 code, optionally
/// with subtags: `en`, `en-GB`, `zh-Hant`). Any other extension (`doc.bak`, `doc.min.js`)
/// makes it no variant, as Apache's `MultiViewsMatch NegotiatedOnly`; a last `.gz` or `.br`
/// makes it a precompressed sibling of the variant without it, not a variant of its own.
#[must_use]
pub fn classify(name: &str, file_name: String, types: &TypeOptions) -> Option<Candidate> {
    let rest = file_name.strip_prefix(name)?.strip_prefix('.')?;
    let last = rest.rsplit('.').next()?;
    if last.eq_ignore_ascii_case("gz") || last.eq_ignore_ascii_case("br") {
        return None;
    }
    let mut language = None;
    for extension in rest.split('.') {
        if extension_type(extension, types).is_some() {
            continue;
        }
        if is_language_tag(extension) {
            language = Some(Arc::from(extension));
            continue;
        }
        return None;
    }
    // The type may come from the name asked for itself (`index.html` of `index.html.en`).
    let media_type = file_name
        .split('.')
        .skip(1)
        .filter_map(|extension| extension_type(extension, types))
        .last()
        .unwrap_or_else(|| types.content_type(&file_name));
    Some(Candidate {
        file_name,
        media_type,
        language,
    })
}

fn extension_type(extension: &str, types: &TypeOptions) -> Option<&'static str> {
    if extension.is_empty() {
        return None;
    }
    types.known_type(&format!("x.{extension}"))
}

/// A language tag as a file-name extension: an ISO 639-1 primary language (two letters, from
/// the list: arbitrary two- or three-letter extensions would make `doc.py` or `doc.bak`
/// variants), then subtags of one to eight letters or digits (RFC 5646 §2.1).
#[must_use]
pub fn is_language_tag(extension: &str) -> bool {
    let mut subtags = extension.split('-');
    let primary = subtags.next().unwrap_or_default().to_ascii_lowercase();
    ISO_639_1.binary_search(&primary.as_str()).is_ok()
        && subtags.all(|subtag| {
            (1..=8).contains(&subtag.len()) && subtag.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// The request fields the choice among `candidates` depends on: those they differ in, and
/// both where no acceptable variant means `406` (`strict`: the answer then depends on them
/// whatever the variants are).
#[must_use]
pub fn vary_fields(candidates: &[Candidate], strict: bool) -> VaryFields {
    let differ = |same: &dyn Fn(&Candidate, &Candidate) -> bool| {
        candidates
            .iter()
            .any(|candidate| !same(candidate, &candidates[0]))
    };
    VaryFields {
        accept: strict || differ(&|a, b| a.media_type == b.media_type),
        accept_language: strict || differ(&|a, b| a.language == b.language),
    }
}

/// The index of the variant to send among `variants` (best first), or `None` for `406`: the
/// highest product of `Accept` and `Accept-Language` weights (`language_weight`), ties to the
/// server's order; when none is acceptable, the server's first (its default variant) unless
/// `strict`.
#[must_use]
pub fn choose_index(
    variants: &[Variant<'_>],
    accept: Option<&[u8]>,
    accept_language: Option<&[u8]>,
    strict: bool,
) -> Option<usize> {
    if variants.is_empty() {
        return None;
    }
    // In millionths: the product of two weights in thousandths, never rounded to zero.
    let mut best: Option<(usize, u32)> = None;
    for (index, variant) in variants.iter().enumerate() {
        let score = u32::from(accept::media_type_weight(accept, variant.media_type).thousandths())
            * u32::from(language_weight(accept_language, variant.language).thousandths());
        if score > 0 && best.is_none_or(|(_, top)| score > top) {
            best = Some((index, score));
        }
    }
    match best {
        Some((index, _)) => Some(index),
        None if strict => None,
        None => Some(0),
    }
}

/// The weight `accept_language` gives a variant in language `tag`: RFC 4647 basic filtering
/// (`accept::language_weight`: the range `en` covers `en-US`), and where no range covers the
/// tag, the best range the tag is a prefix of, one thousandth lower: a reader asking for
/// `fr-CA` reads `fr` too, below a variant in `fr-CA` itself (as Apache's `mod_negotiation`).
/// A language the client excluded (`fr;q=0`) stays excluded.
#[must_use]
pub fn language_weight(accept_language: Option<&[u8]>, tag: Option<&str>) -> Weight {
    let weight = accept::language_weight(accept_language, tag);
    let (Some(value), Some(tag)) = (accept_language, tag) else {
        return weight;
    };
    if accept::accept_language(value).any(|range| range.matches(tag)) {
        return weight;
    }
    accept::accept_language(value)
        .filter(|range| range.weight.is_acceptable() && names_prefix(range.range, tag))
        .map(|range| range.weight)
        .max()
        .map_or(weight, |best| {
            Weight::from_thousandths(best.thousandths().saturating_sub(1)).max(Weight::MIN)
        })
}

/// Whether `tag` is `range` cut at a subtag boundary (`fr` of `fr-CA`), without case.
fn names_prefix(range: &[u8], tag: &str) -> bool {
    let tag = tag.as_bytes();
    range.len() > tag.len()
        && range[..tag.len()].eq_ignore_ascii_case(tag)
        && range[tag.len()] == b'-'
}

/// The variant of `set` that `request` gets, or `None` for `406` (`strict`).
#[must_use]
pub fn choose<'a>(
    set: &'a VariantSet,
    request: &RequestHead,
    strict: bool,
) -> Option<&'a Arc<StaticFile>> {
    let variants: Vec<Variant<'_>> = set
        .variants
        .iter()
        .map(|file| Variant {
            media_type: file.content_type,
            language: file.language(),
        })
        .collect();
    let index = choose_index(
        &variants,
        request.header("accept"),
        request.header("accept-language"),
        strict,
    )?;
    set.variants.get(index)
}

/// ISO 639-1 two-letter language codes, sorted.
const ISO_639_1: [&str; 184] = [
    "aa", "ab", "ae", "af", "ak", "am", "an", "ar", "as", "av", "ay", "az", "ba", "be", "bg", "bh",
    "bi", "bm", "bn", "bo", "br", "bs", "ca", "ce", "ch", "co", "cr", "cs", "cu", "cv", "cy", "da",
    "de", "dv", "dz", "ee", "el", "en", "eo", "es", "et", "eu", "fa", "ff", "fi", "fj", "fo", "fr",
    "fy", "ga", "gd", "gl", "gn", "gu", "gv", "ha", "he", "hi", "ho", "hr", "ht", "hu", "hy", "hz",
    "ia", "id", "ie", "ig", "ii", "ik", "io", "is", "it", "iu", "ja", "jv", "ka", "kg", "ki", "kj",
    "kk", "kl", "km", "kn", "ko", "kr", "ks", "ku", "kv", "kw", "ky", "la", "lb", "lg", "li", "ln",
    "lo", "lt", "lu", "lv", "mg", "mh", "mi", "mk", "ml", "mn", "mr", "ms", "mt", "my", "na", "nb",
    "nd", "ne", "ng", "nl", "nn", "no", "nr", "nv", "ny", "oc", "oj", "om", "or", "os", "pa", "pi",
    "pl", "ps", "pt", "qu", "rm", "rn", "ro", "ru", "rw", "sa", "sc", "sd", "se", "sg", "si", "sk",
    "sl", "sm", "sn", "so", "sq", "sr", "ss", "st", "su", "sv", "sw", "ta", "te", "tg", "th", "ti",
    "tk", "tl", "tn", "to", "tr", "ts", "tt", "tw", "ty", "ug", "uk", "ur", "uz", "ve", "vi", "vo",
    "wa", "wo", "xh", "yi", "yo", "za", "zh", "zu",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> TypeOptions {
        TypeOptions::default()
    }

    fn names(found: &[Candidate]) -> Vec<&str> {
        found.iter().map(|c| c.file_name.as_str()).collect()
    }

    #[test]
    fn the_language_list_is_sorted_for_its_binary_search() {
        assert!(ISO_639_1.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn variants_are_named_by_types_and_languages_only() {
        let entries = [
            "doc.fr.html",
            "doc.html",
            "doc.en.html",
            "doc.html.gz",
            "doc.fr.html.br",
            "doc.json",
            "doc.bak",
            "doc.min.js",
            "doc",
            "doc.",
            "doctor.html",
            "doc.en-GB.html",
            "doc.xx.html",
            "other.html",
        ]
        .map(str::to_owned);
        let found = candidates("doc", entries, &types());
        assert_eq!(
            names(&found),
            [
                "doc.html",
                "doc.json",
                "doc.en.html",
                "doc.fr.html",
                "doc.en-GB.html"
            ],
            "shortest first, then in byte order; siblings, unknown extensions and other names left out"
        );
        assert_eq!(found[0].media_type, "text/html; charset=utf-8");
        assert_eq!(found[0].language, None);
        assert_eq!(found[1].media_type, "application/json; charset=utf-8");
        assert_eq!(found[3].language.as_deref(), Some("fr"));
        assert_eq!(found[4].language.as_deref(), Some("en-GB"));
    }

    #[test]
    fn the_type_may_come_from_the_name_asked_for() {
        let found = candidates(
            "index.html",
            ["index.html.en", "index.html.de"].map(str::to_owned),
            &types(),
        );
        assert_eq!(names(&found), ["index.html.de", "index.html.en"]);
        assert!(found.iter().all(|c| c.media_type.starts_with("text/html")));
        // A language alone: the location's default type.
        let found = candidates("notes", ["notes.en".to_owned()], &types());
        assert_eq!(found[0].media_type, types().default_type());
    }

    #[test]
    fn vary_lists_what_the_variants_differ_in_or_both_when_strict() {
        let by_language = candidates(
            "doc",
            ["doc.en.html", "doc.fr.html"].map(str::to_owned),
            &types(),
        );
        let fields = vary_fields(&by_language, false);
        assert!(fields.accept_language && !fields.accept);
        let by_type = candidates("doc", ["doc.html", "doc.json"].map(str::to_owned), &types());
        let fields = vary_fields(&by_type, false);
        assert!(fields.accept && !fields.accept_language);
        let one = candidates("doc", ["doc.html".to_owned()], &types());
        assert_eq!(vary_fields(&one, false), VaryFields::default());
        assert_eq!(
            vary_fields(&one, true),
            VaryFields {
                accept: true,
                accept_language: true
            }
        );
    }

    const HTML: &str = "text/html; charset=utf-8";
    const JSON: &str = "application/json";

    fn variant(media_type: &'static str, language: Option<&'static str>) -> Variant<'static> {
        Variant {
            media_type,
            language,
        }
    }

    #[test]
    fn choice_table() {
        // The server's order, as `candidates` makes it: generic first.
        let languages = [
            variant(HTML, None),
            variant(HTML, Some("en")),
            variant(HTML, Some("fr")),
        ];
        let types_only = [variant(HTML, None), variant(JSON, None)];
        type Case<'a> = (
            &'a [Variant<'a>],
            Option<&'a [u8]>,
            Option<&'a [u8]>,
            bool,
            Option<usize>,
        );
        let cases: &[Case] = &[
            (&languages, None, None, false, Some(0)),
            (
                &languages,
                None,
                Some(b"fr;q=0.9, en;q=0.8"),
                false,
                Some(2),
            ),
            (&languages, None, Some(b"en-US, fr;q=0.5"), false, Some(1)),
            (&languages, None, Some(b"fr-CA, en;q=0.5"), false, Some(2)),
            (
                &languages,
                None,
                Some(b"fr-CA;q=0.5, en;q=0.5"),
                false,
                Some(1),
            ),
            (
                &languages,
                None,
                Some(b"fr;q=0, fr-CA, en;q=0.5"),
                false,
                Some(1),
            ),
            (
                &languages[1..],
                None,
                Some(b"en-GB-oxendict"),
                true,
                Some(0),
            ),
            (&languages, None, Some(b"EN"), false, Some(1)),
            (&languages, None, Some(b"fr;q=0, en;q=0.1"), false, Some(1)),
            // No language the client names: the generic variant is still acceptable.
            (&languages, None, Some(b"de"), true, Some(0)),
            (&languages[1..], None, Some(b"de"), true, None),
            (&languages[1..], None, Some(b"de"), false, Some(0)),
            // Any language: a named one above the generic page.
            (&languages, None, Some(b"*"), false, Some(1)),
            (&types_only, Some(b"application/json"), None, false, Some(1)),
            (
                &types_only,
                Some(b"text/html;q=0.5, application/*"),
                None,
                false,
                Some(1),
            ),
            (
                &types_only,
                Some(b"text/html, */*;q=0.1"),
                None,
                false,
                Some(0),
            ),
            (
                &types_only,
                Some(b"application/json;q=0, */*"),
                None,
                false,
                Some(0),
            ),
            (&types_only, Some(b"image/png"), None, true, None),
            (&types_only, Some(b"image/png"), None, false, Some(0)),
            // An unreadable field says nothing.
            (&types_only, Some(b";;;"), None, true, Some(0)),
            (&[], None, None, false, None),
        ];
        for (variants, accept, language, strict, expected) in cases {
            assert_eq!(
                choose_index(variants, *accept, *language, *strict),
                *expected,
                "{:?} {:?} {:?} strict {strict}",
                variants,
                accept.map(<[u8]>::escape_ascii).map(|e| e.to_string()),
                language.map(<[u8]>::escape_ascii).map(|e| e.to_string()),
            );
        }
    }
}
