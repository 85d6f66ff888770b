//! The negotiation fields (`accept`) on arbitrary bytes.

use crate::accept::{
    self, choose_encoding, choose_variant, coding_weight, identity_weight, language_weight,
    media_type_weight, EncodingChoice, Variant, Weight, MAX_MEMBERS, MAX_PARAMETERS,
};

/// The codings a server might offer, best first.
const CODINGS: [&str; 3] = ["br", "zstd", "gzip"];

/// Variants covering the kinds of match: exact type, a parameter, a language, none.
const VARIANTS: [Variant<'static>; 4] = [
    Variant {
        media_type: "text/html; charset=utf-8",
        language: Some("en-GB"),
    },
    Variant {
        media_type: "text/html; charset=utf-8",
        language: Some("fr"),
    },
    Variant {
        media_type: "application/json",
        language: None,
    },
    Variant {
        media_type: "image/png",
        language: Some("de-CH-1996"),
    },
];

/// Reads `data` as three field values, `Accept-Encoding`, `Accept` and `Accept-Language`
/// (separated by the first two LF bytes; a value missing is the whole input again), and checks:
///
/// * every member handed out lies within the value, at most [`MAX_MEMBERS`] of them, each
///   weight at most 1, each media range with at most [`MAX_PARAMETERS`] parameters;
/// * a concrete range matches its own type, a language range its own tag;
/// * the coding chosen weighs most, ties going to the server's order; identity is chosen only
///   when acceptable and no coding outweighs it; nothing only when nothing is acceptable;
/// * the variant chosen has the highest product of type and language weights, and none is
///   chosen only when every product is zero.
///
/// # Panics
/// Only when an invariant is violated.
pub fn accept(data: &[u8]) {
    let mut values = data.splitn(3, |&b| b == b'\n');
    let encoding = values.next().unwrap_or(data);
    let media = values.next().unwrap_or(data);
    let language = values.next().unwrap_or(data);

    check_members(encoding, media, language);
    check_encoding(encoding);
    check_variants(media, language);
}

fn within(outer: &[u8], inner: &[u8]) -> bool {
    let (outer, inner) = (outer.as_ptr_range(), inner.as_ptr_range());
    outer.start <= inner.start && inner.end <= outer.end
}

fn check_members(encoding: &[u8], media: &[u8], language: &[u8]) {
    let mut count = 0;
    for preference in accept::accept_encoding(encoding) {
        count += 1;
        assert!(!preference.coding.is_empty() && within(encoding, preference.coding));
        assert!(preference.weight <= Weight::ONE);
    }
    assert!(count <= MAX_MEMBERS, "{count} codings");

    let mut count = 0;
    for range in accept::accept(media) {
        count += 1;
        assert!(within(media, range.kind) && within(media, range.subtype));
        assert!(range.weight <= Weight::ONE);
        assert!(range.parameters.len() <= MAX_PARAMETERS);
        for parameter in &range.parameters {
            assert!(within(media, parameter.name) && within(media, parameter.value));
        }
        if range.kind != b"*" && range.subtype != b"*" && range.parameters.is_empty() {
            let own = format!(
                "{}/{}",
                String::from_utf8_lossy(range.kind),
                String::from_utf8_lossy(range.subtype)
            );
            assert!(range.matches(&own), "{own} does not match itself");
        }
    }
    assert!(count <= MAX_MEMBERS, "{count} media ranges");

    let mut count = 0;
    for range in accept::accept_language(language) {
        count += 1;
        assert!(within(language, range.range));
        assert!(range.weight <= Weight::ONE);
        let own = String::from_utf8_lossy(range.range);
        assert!(range.matches(&own), "{own} does not match itself");
        assert!(range.matches(&format!("{own}-x")));
    }
    assert!(count <= MAX_MEMBERS, "{count} language ranges");
}

fn check_encoding(value: &[u8]) {
    let weights = CODINGS.map(|coding| coding_weight(value, coding));
    let identity = identity_weight(value);
    match choose_encoding(Some(value), &CODINGS) {
        EncodingChoice::Coding(index) => {
            let chosen = weights[index];
            assert!(chosen.is_acceptable());
            assert!(weights.iter().all(|&other| other <= chosen));
            assert!(weights[..index].iter().all(|&other| other < chosen));
            assert!(chosen >= identity || !identity.is_acceptable());
        }
        EncodingChoice::Identity => {
            assert!(identity.is_acceptable());
            assert!(weights.iter().all(|&w| w < identity || !w.is_acceptable()));
        }
        EncodingChoice::NothingAcceptable => {
            assert!(!identity.is_acceptable());
            assert!(weights.iter().all(|w| !w.is_acceptable()));
        }
    }
    assert_eq!(
        choose_encoding::<&str>(None, &CODINGS),
        EncodingChoice::Identity
    );
}

fn check_variants(media: &[u8], language: &[u8]) {
    let scores = VARIANTS.map(|variant| {
        u32::from(media_type_weight(Some(media), variant.media_type).thousandths())
            * u32::from(language_weight(Some(language), variant.language).thousandths())
    });
    match choose_variant(Some(media), Some(language), &VARIANTS) {
        Some(index) => {
            assert!(scores[index] > 0);
            assert!(scores.iter().all(|&other| other <= scores[index]));
            assert!(scores[..index].iter().all(|&other| other < scores[index]));
        }
        None => assert!(scores.iter().all(|&score| score == 0), "{scores:?}"),
    }
}
