use proptest::prelude::*;

use super::*;

fn w(thousandths: u16) -> Weight {
    Weight::from_thousandths(thousandths)
}

#[test]
fn qvalues() {
    for (text, expected) in [
        (&b"1"[..], Some(1000)),
        (b"1.", Some(1000)),
        (b"1.000", Some(1000)),
        (b"0", Some(0)),
        (b"0.", Some(0)),
        (b"0.5", Some(500)),
        (b"0.05", Some(50)),
        (b"0.001", Some(1)),
        (b"0.999", Some(999)),
        (b"1.001", None),
        (b"1.5", None),
        (b"2", None),
        (b"0.0001", None),
        (b"", None),
        (b"-1", None),
        (b".5", None),
        (b"0.a", None),
        (b"0,5", None),
    ] {
        assert_eq!(
            Weight::parse(text).map(Weight::thousandths),
            expected,
            "{}",
            text.escape_ascii()
        );
    }
}

#[test]
fn encoding_members_are_read_and_malformed_ones_skipped() {
    let read: Vec<(String, u16)> = accept_encoding(
        b"gzip, br;q=0.8 ,, deflate;level=1, zstd;q=2, *;Q=0 , x;q=0.5;y=1, identity ;q=0.1, b@d",
    )
    .map(|p| {
        (
            String::from_utf8_lossy(p.coding).into_owned(),
            p.weight.thousandths(),
        )
    })
    .collect();
    assert_eq!(
        read,
        [
            ("gzip".to_owned(), 1000),
            ("br".to_owned(), 800),
            ("*".to_owned(), 0),
            ("identity".to_owned(), 100),
        ]
    );
}

#[test]
fn coding_and_identity_weights() {
    let header = b"GZIP;q=0.4, x-gzip;q=0.9, *;q=0.2";
    assert_eq!(coding_weight(header, "gzip"), w(400));
    assert_eq!(coding_weight(header, "br"), w(200));
    assert_eq!(identity_weight(header), w(200));
    assert_eq!(coding_weight(b"x-gzip", "gzip"), Weight::ONE);
    assert_eq!(coding_weight(b"br", "gzip"), Weight::ZERO);
    assert_eq!(identity_weight(b"br"), Weight::MIN);
    assert_eq!(identity_weight(b""), Weight::MIN);
    assert_eq!(identity_weight(b"identity;q=0, *"), Weight::ZERO);
    assert_eq!(identity_weight(b"*;q=0"), Weight::ZERO);
    assert_eq!(identity_weight(b"*;q=0, identity;q=0.5"), w(500));
}

#[test]
fn encoding_choice_table() {
    const SERVER: &[&str] = &["br", "zstd", "gzip"];
    use EncodingChoice::{Coding, Identity, NothingAcceptable};
    let cases: &[(Option<&[u8]>, EncodingChoice)] = &[
        (None, Identity),
        (Some(b""), Identity),
        (Some(b"gzip, deflate, br, zstd"), Coding(0)),
        (Some(b"gzip, zstd"), Coding(1)),
        (Some(b"gzip"), Coding(2)),
        (Some(b"br;q=0.5, gzip;q=0.8"), Coding(2)),
        (Some(b"br;q=0, gzip;q=0"), Identity),
        (Some(b"*"), Coding(0)),
        (Some(b"*;q=0.5, gzip"), Coding(2)),
        (Some(b"*;q=0.5, br;q=0"), Coding(1)),
        (Some(b"br;q=0.5, identity"), Identity),
        (Some(b"br;q=0.5, identity;q=0.5"), Coding(0)),
        (Some(b"identity;q=0, gzip;q=0.1"), Coding(2)),
        (Some(b"identity;q=0, deflate"), NothingAcceptable),
        (Some(b"*;q=0"), NothingAcceptable),
        (Some(b"*;q=0, identity"), Identity),
        (Some(b"deflate"), Identity),
        (Some(b"gzip;q=bogus, br;q=0.1"), Coding(0)),
        (Some(b"gzip;q=0.4, gzip;q=1, br;q=0.3"), Coding(2)),
        (Some(b"x-gzip"), Coding(2)),
    ];
    for (header, expected) in cases {
        assert_eq!(
            choose_encoding(*header, SERVER),
            *expected,
            "{:?}",
            header.map(|h| h.escape_ascii().to_string())
        );
    }
    assert_eq!(
        choose_encoding::<&str>(Some(b"gzip"), &[]),
        EncodingChoice::Identity
    );
}

#[test]
fn media_ranges_are_read_with_parameters_and_weights() {
    let ranges: Vec<MediaRange<'_>> =
        accept(b"text/html;level=1;q=0.5;ext=x, TEXT/*, */*;q=0.1, */html, text/plain;charset=\"utf,8\", bad, a/b;q=x, a/b;=c").collect();
    assert_eq!(ranges.len(), 4, "{ranges:?}");
    assert_eq!(ranges[0].kind, b"text");
    assert_eq!(ranges[0].parameters.len(), 1);
    assert_eq!(ranges[0].weight, w(500));
    assert_eq!(ranges[0].specificity(), 3);
    assert_eq!(ranges[1].specificity(), 1);
    assert_eq!(ranges[2].specificity(), 0);
    assert_eq!(ranges[2].weight, w(100));
    // The comma inside the quoted string does not split the member.
    assert_eq!(ranges[3].parameters[0].value, b"\"utf,8\"");
    assert!(ranges[3].matches("text/plain; charset=UTF,8"));
    assert!(!ranges[3].matches("text/plain"));
}

#[test]
fn the_most_specific_range_decides() {
    // RFC 9110 §12.5.1's example.
    let header = b"text/*;q=0.3, text/plain;q=0.7, text/plain;format=flowed, text/plain;format=fixed;q=0.4, */*;q=0.5";
    for (media_type, expected) in [
        ("text/plain;format=flowed", 1000),
        ("text/plain", 700),
        ("text/html", 300),
        ("image/jpeg", 500),
        ("text/plain;format=fixed", 400),
        ("text/html;level=3", 300),
    ] {
        assert_eq!(
            media_type_weight(Some(header), media_type),
            w(expected),
            "{media_type}"
        );
    }
    assert_eq!(media_type_weight(None, "image/png"), Weight::ONE);
    assert_eq!(
        media_type_weight(Some(b"garbage"), "image/png"),
        Weight::ONE
    );
    assert_eq!(
        media_type_weight(Some(b"text/html"), "image/png"),
        Weight::ZERO
    );
    assert_eq!(
        media_type_weight(Some(b"text/html"), "nonsense"),
        Weight::ZERO
    );
}

#[test]
fn language_ranges_filter_as_rfc_4647_basic_filtering() {
    let read: Vec<&[u8]> = accept_language(
        b"fr-CH, fr;q=0.9, en;q=0.8, de-1996, *;q=0.5, toolongtag, en--us, 1a, en_US",
    )
    .map(|range| range.range)
    .collect();
    assert_eq!(
        read,
        [&b"fr-CH"[..], b"fr", b"en", b"de-1996", b"*"],
        "{read:?}"
    );
    let range = |text: &'static [u8]| LanguageRange {
        range: text,
        weight: Weight::ONE,
    };
    assert!(range(b"de-de").matches("de-DE-1996"));
    assert!(range(b"de").matches("de"));
    assert!(!range(b"de-de").matches("de-Deva"));
    assert!(!range(b"de").matches("dex"));
    assert!(!range(b"en-us").matches("en"));
    assert!(range(b"*").matches("x-anything"));

    let header = b"fr-CH, fr;q=0.9, en;q=0.8, *;q=0.1";
    for (tag, expected) in [
        (Some("fr-CH"), 1000),
        (Some("fr"), 900),
        (Some("fr-BE"), 900),
        (Some("en-GB"), 800),
        (Some("de"), 100),
        (None, 1),
    ] {
        assert_eq!(language_weight(Some(header), tag), w(expected), "{tag:?}");
    }
    assert_eq!(language_weight(Some(b"fr"), Some("en")), Weight::ZERO);
    assert_eq!(language_weight(None, Some("en")), Weight::ONE);
    assert_eq!(language_weight(Some(b";;;"), Some("en")), Weight::ONE);
}

#[test]
fn variants_are_chosen_by_type_and_language() {
    let variants = [
        Variant {
            media_type: "text/html; charset=utf-8",
            language: Some("en"),
        },
        Variant {
            media_type: "text/html; charset=utf-8",
            language: Some("fr"),
        },
        Variant {
            media_type: "application/json",
            language: None,
        },
    ];
    let choose = |accept: Option<&[u8]>, language: Option<&[u8]>| {
        choose_variant(accept, language, &variants)
    };
    assert_eq!(choose(None, None), Some(0));
    assert_eq!(choose(None, Some(b"fr;q=0.9, en;q=0.8")), Some(1));
    assert_eq!(choose(Some(b"application/json"), Some(b"fr")), Some(2));
    assert_eq!(choose(Some(b"text/html"), Some(b"de")), None);
    assert_eq!(
        choose(Some(b"text/html;q=0.5, application/json"), Some(b"fr")),
        Some(1)
    );
    assert_eq!(choose(Some(b"image/*"), None), None);
    assert_eq!(choose_variant(None, None, &[]), None);
}

#[test]
fn a_hostile_field_is_read_in_bounded_work() {
    // 100 KiB of members, of commas, of one long parameter list and of an unclosed quote: each
    // selection below still ends (at most MAX_MEMBERS members, MAX_PARAMETERS parameters).
    let many_members = "a;q=0.5, ".repeat(100 << 10 >> 3);
    let commas = ",".repeat(100 << 10);
    let parameters = format!("text/html{}", ";a=b".repeat(100 << 10 >> 2));
    let quote = format!("text/html;a=\"{}", "x,".repeat(100 << 10 >> 1));
    for header in [&many_members, &commas, &parameters, &quote] {
        let header = header.as_bytes();
        assert!(accept_encoding(header).count() <= MAX_MEMBERS);
        assert!(accept(header).count() <= MAX_MEMBERS);
        assert!(accept_language(header).count() <= MAX_MEMBERS);
        let _ = choose_encoding(Some(header), &["br", "zstd", "gzip"]);
        let _ = choose_variant(
            Some(header),
            Some(header),
            &[Variant {
                media_type: "text/html",
                language: Some("a"),
            }],
        );
    }
    assert_eq!(accept(parameters.as_bytes()).count(), 0);
    assert_eq!(accept(quote.as_bytes()).count(), 0);
}

/// Field values a client could send: members from a small vocabulary, with and without
/// weights, spaces and junk, so that equal names and ranges meet often.
fn field() -> impl Strategy<Value = String> {
    let member = prop_oneof![
        Just("gzip".to_owned()),
        Just("br".to_owned()),
        Just("zstd".to_owned()),
        Just("identity".to_owned()),
        Just("*".to_owned()),
        Just("x-gzip".to_owned()),
        Just("text/html".to_owned()),
        Just("text/*".to_owned()),
        Just("*/*".to_owned()),
        Just("en".to_owned()),
        Just("en-GB".to_owned()),
        "[ -~]{0,6}",
    ];
    let weight = prop_oneof![
        Just(String::new()),
        (0u16..=1000).prop_map(|t| format!(";q={}.{:03}", t / 1000, t % 1000)),
        "[ -~]{0,5}",
    ];
    proptest::collection::vec((member, weight), 0..8).prop_map(|members| {
        members
            .into_iter()
            .map(|(member, weight)| member + &weight)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

proptest! {
    #[test]
    fn every_qvalue_round_trips(thousandths in 0u16..=1000) {
        let text = format!("{}.{:03}", thousandths / 1000, thousandths % 1000);
        prop_assert_eq!(Weight::parse(text.as_bytes()), Some(w(thousandths)));
        let short = text.trim_end_matches('0');
        prop_assert_eq!(Weight::parse(short.as_bytes()), Some(w(thousandths)));
    }

    #[test]
    fn the_chosen_coding_weighs_most(header in field()) {
        const SERVER: &[&str] = &["br", "zstd", "gzip"];
        let header = header.as_bytes();
        let weights: Vec<Weight> = SERVER.iter().map(|c| coding_weight(header, c)).collect();
        let identity = identity_weight(header);
        match choose_encoding(Some(header), SERVER) {
            EncodingChoice::Coding(index) => {
                prop_assert!(weights[index].is_acceptable());
                // No coding weighs more; an earlier one never weighs as much.
                prop_assert!(weights.iter().all(|&other| other <= weights[index]));
                prop_assert!(weights[..index].iter().all(|&other| other < weights[index]));
                prop_assert!(weights[index] >= identity || !identity.is_acceptable());
            }
            EncodingChoice::Identity => {
                prop_assert!(identity.is_acceptable());
                prop_assert!(weights.iter().all(|&other| other < identity || !other.is_acceptable()));
            }
            EncodingChoice::NothingAcceptable => {
                prop_assert!(!identity.is_acceptable());
                prop_assert!(weights.iter().all(|other| !other.is_acceptable()));
            }
        }
    }

    #[test]
    fn members_are_subslices_and_weights_in_range(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let range = bytes.as_ptr_range();
        let inside = |slice: &[u8]| {
            let r = slice.as_ptr_range();
            slice.is_empty() || (range.start <= r.start && r.end <= range.end)
        };
        for preference in accept_encoding(&bytes) {
            prop_assert!(inside(preference.coding) && !preference.coding.is_empty());
            prop_assert!(preference.weight <= Weight::ONE);
        }
        for media in accept(&bytes) {
            prop_assert!(inside(media.kind) && inside(media.subtype));
            prop_assert!(media.weight <= Weight::ONE);
            prop_assert!(media.parameters.len() <= MAX_PARAMETERS);
        }
        for language in accept_language(&bytes) {
            prop_assert!(inside(language.range));
            prop_assert!(language.weight <= Weight::ONE);
        }
    }

    #[test]
    fn a_lone_language_range_accepts_its_own_tag_and_longer_ones(
        primary in "[a-zA-Z]{1,8}",
        subtag in "[a-zA-Z0-9]{1,8}",
        weight in 1u16..=1000,
    ) {
        let header = format!("{primary};q=0.{weight:03}");
        let expected = if weight == 1000 { Weight::ONE } else { w(weight) };
        let header = if weight == 1000 { primary.clone() } else { header };
        let tag = format!("{primary}-{subtag}");
        prop_assert_eq!(language_weight(Some(header.as_bytes()), Some(&primary)), expected);
        prop_assert_eq!(language_weight(Some(header.as_bytes()), Some(&tag.to_uppercase())), expected);
        prop_assert_eq!(language_weight(Some(header.as_bytes()), Some(&format!("{primary}x"))), Weight::ZERO);
    }
}
