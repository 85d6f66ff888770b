//! QPACK against the examples of RFC 9204 Appendix B, its error rules, and our encoder
//! through our decoder.

use proptest::prelude::*;

use super::{Decoder, Encoder, Section};
use crate::h3::error::ErrorCode;

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

type Fields = Vec<(String, String)>;

fn decode(
    decoder: &mut Decoder,
    stream: u64,
    block: &[u8],
) -> Result<(Section, Fields), ErrorCode> {
    let mut fields = Vec::new();
    let section = decoder
        .decode_section(stream, block, 1 << 20, &mut |name, value| {
            fields.push((
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(value).into_owned(),
            ));
        })
        .map_err(|error| error.code)?;
    Ok((section, fields))
}

fn pairs(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|&(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

#[test]
fn appendix_b_1_literal_field_line_with_a_static_name_reference() {
    let mut decoder = Decoder::new(0, 0);
    let (section, fields) = decode(
        &mut decoder,
        0,
        &hex("0000 510b 2f69 6e64 6578 2e68 746d 6c"),
    )
    .unwrap();
    assert!(matches!(
        section,
        Section::Decoded {
            over_limit: false,
            ..
        }
    ));
    assert_eq!(fields, pairs(&[(":path", "/index.html")]));
    // Nothing referred to the dynamic table: nothing to acknowledge.
    assert!(decoder.take_decoder_stream().is_empty());
}

#[test]
fn appendix_b_2_and_b_3_the_dynamic_table_and_its_acknowledgements() {
    let mut decoder = Decoder::new(220, 1);
    decoder
        .read_encoder_stream(&hex(
            "3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468",
        ))
        .unwrap();
    let (_, fields) = decode(&mut decoder, 4, &hex("0381 10 11")).unwrap();
    assert_eq!(
        fields,
        pairs(&[(":authority", "www.example.com"), (":path", "/sample/path")])
    );
    // B.2: the section is acknowledged, which also tells the encoder of both insertions.
    assert_eq!(decoder.take_decoder_stream(), hex("84"));

    // B.3: an insertion with a literal name, acknowledged by an Insert Count Increment.
    decoder
        .read_encoder_stream(&hex(
            "4a63 7573 746f 6d2d 6b65 790c 6375 7374 6f6d 2d76 616c 7565",
        ))
        .unwrap();
    assert_eq!(decoder.take_decoder_stream(), hex("01"));
}

#[test]
fn a_section_waits_for_its_insertions_and_instructions_may_arrive_in_pieces() {
    let mut decoder = Decoder::new(220, 1);
    let section = hex("0381 10 11");
    assert_eq!(
        decode(&mut decoder, 4, &section),
        Ok((Section::Blocked, Vec::new()))
    );
    // Asking again does not count the stream twice.
    assert_eq!(
        decode(&mut decoder, 4, &section),
        Ok((Section::Blocked, Vec::new()))
    );
    // A second blocked stream is one more than we allow.
    assert_eq!(
        decode(&mut decoder, 8, &section),
        Err(ErrorCode::QpackDecompressionFailed)
    );

    let instructions =
        hex("3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468");
    for byte in &instructions[..instructions.len() - 1] {
        decoder
            .read_encoder_stream(std::slice::from_ref(byte))
            .unwrap();
        assert!(decoder.take_unblocked().is_empty());
    }
    decoder
        .read_encoder_stream(&instructions[instructions.len() - 1..])
        .unwrap();
    assert_eq!(decoder.take_unblocked(), [4]);
    let (_, fields) = decode(&mut decoder, 4, &section).unwrap();
    assert_eq!(fields.len(), 2);
}

#[test]
fn a_cancelled_stream_is_no_longer_blocked_and_the_encoder_is_told() {
    let mut decoder = Decoder::new(220, 1);
    assert_eq!(
        decode(&mut decoder, 4, &hex("0381 10 11")),
        Ok((Section::Blocked, Vec::new()))
    );
    decoder.cancel_stream(4);
    assert_eq!(decoder.take_decoder_stream(), hex("44"));
    // The slot is free again.
    assert_eq!(
        decode(&mut decoder, 8, &hex("0381 10 11")),
        Ok((Section::Blocked, Vec::new()))
    );
}

#[test]
fn encoder_stream_errors() {
    for (bad, why) in [
        ("3fbe01", "a capacity above the maximum we advertised"),
        (
            "3fbd01 80 01 61",
            "an insertion naming a dynamic entry that does not exist",
        ),
        (
            "3fbd01 ff 63 01 61",
            "an insertion naming a static index past the table",
        ),
        ("20 c0 01 61", "an insertion into a table of capacity zero"),
        ("3fbd01 00", "a duplicate of nothing"),
    ] {
        let mut decoder = Decoder::new(220, 1);
        assert_eq!(
            decoder
                .read_encoder_stream(&hex(bad))
                .map_err(|error| error.code),
            Err(ErrorCode::QpackEncoderStreamError),
            "{why}"
        );
    }
    // An instruction that claims a value longer than the table could hold is refused before
    // it is all buffered.
    let mut decoder = Decoder::new(220, 1);
    let mut long = hex("3fbd01 c0 7f ff 07");
    long.extend_from_slice(&[b'a'; 300]);
    assert_eq!(
        decoder
            .read_encoder_stream(&long)
            .map_err(|error| error.code),
        Err(ErrorCode::QpackEncoderStreamError)
    );
}

#[test]
fn malformed_sections_fail_decompression() {
    let mut with_table = Decoder::new(220, 1);
    with_table
        .read_encoder_stream(&hex(
            "3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468",
        ))
        .unwrap();
    for (bad, why) in [
        ("00", "a prefix cut short"),
        ("0000 ff 64", "an index past the static table"),
        (
            "0000 80",
            "a dynamic reference with Required Insert Count 0",
        ),
        (
            "0381 12",
            "a post-base reference past the Required Insert Count",
        ),
        (
            "0381 10",
            "a Required Insert Count above what the section uses",
        ),
        (
            "0d00",
            "an encoded Required Insert Count past the full range",
        ),
        ("0000 51 0b 2f", "a value cut short"),
        ("0000 5f 83 ff ff ff", "a Huffman value that is all padding"),
        (
            "0381 10 11 c1 ff ff ff ff ff ff ff ff ff ff",
            "an integer past 2^32",
        ),
    ] {
        assert_eq!(
            decode(&mut with_table, 4, &hex(bad)).map(|_| ()),
            Err(ErrorCode::QpackDecompressionFailed),
            "{why}"
        );
    }
}

#[test]
fn a_list_past_the_limit_is_decoded_to_the_end_but_not_handed_over() {
    let encoder = Encoder::new();
    let mut block = Vec::new();
    let long = "x".repeat(100);
    encoder.encode_section(
        [(&b"a"[..], long.as_bytes()), (&b"b"[..], long.as_bytes())],
        &mut block,
    );
    let mut decoder = Decoder::new(0, 0);
    let mut handed = 0;
    let section = decoder
        .decode_section(0, &block, 150, &mut |_, _| handed += 1)
        .unwrap();
    assert_eq!(
        section,
        Section::Decoded {
            list_size: 2 * (1 + 100 + 32),
            over_limit: true
        }
    );
    assert_eq!(handed, 1);
}

#[test]
fn the_encoder_reads_stream_cancellations_and_refuses_what_it_never_asked_for() {
    let mut encoder = Encoder::new();
    // Two Stream Cancellations, the second in pieces (stream 300: 0x7f 0xed 0x01).
    encoder.read_decoder_stream(&hex("44 7f")).unwrap();
    encoder.read_decoder_stream(&hex("ed")).unwrap();
    encoder.read_decoder_stream(&hex("01")).unwrap();
    for bad in ["84", "01", "00"] {
        let mut encoder = Encoder::new();
        assert_eq!(
            encoder
                .read_decoder_stream(&hex(bad))
                .map_err(|error| error.code),
            Err(ErrorCode::QpackDecoderStreamError),
            "{bad}"
        );
    }
}

#[test]
fn the_encoder_uses_the_static_table_where_it_can() {
    let mut block = Vec::new();
    Encoder::new().encode_section(
        [
            (&b":status"[..], &b"200"[..]),
            (&b"content-type"[..], &b"text/css"[..]),
            (&b"content-length"[..], &b"1234"[..]),
        ],
        &mut block,
    );
    // Prefix 00 00; :status 200 is index 25 (0xc0 | 25), text/css 51 (0xc0 | 51);
    // content-length is named at 4 (0x50 | 4), its value a string literal.
    assert_eq!(&block[..5], &hex("0000 d9 f3 54")[..]);
    assert_eq!(block.len(), 5 + 1 + usize::from(block[5] & 0x7f));
}

fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(":status".to_owned()),
        Just("content-type".to_owned()),
        Just("set-cookie".to_owned()),
        "[a-z][a-z0-9-]{0,20}",
    ]
}

proptest! {
    #[test]
    fn our_sections_decode_to_what_was_encoded(
        fields in proptest::collection::vec((field_name(), "[ -~]{0,40}"), 0..20),
    ) {
        let mut block = Vec::new();
        Encoder::new().encode_section(
            fields.iter().map(|(name, value)| (name.as_bytes(), value.as_bytes())),
            &mut block,
        );
        let mut decoder = Decoder::new(4096, 16);
        let (section, decoded) = decode(&mut decoder, 0, &block).unwrap();
        let complete = matches!(section, Section::Decoded { over_limit: false, .. });
        prop_assert!(complete);
        prop_assert_eq!(decoded, fields);
    }

    #[test]
    fn arbitrary_sections_and_instructions_never_panic(
        instructions in proptest::collection::vec(any::<u8>(), 0..200),
        block in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut decoder = Decoder::new(4096, 4);
        let _ = decoder.read_encoder_stream(&instructions);
        let _ = decode(&mut decoder, 0, &block);
        let _ = decoder.take_unblocked();
        let _ = decoder.take_decoder_stream();
    }
}

#[test]
fn the_encoder_stream_stops_where_a_blocked_section_can_be_decoded() {
    let mut decoder = Decoder::new(220, 1);
    let section = hex("0381 10 11");
    assert_eq!(
        decode(&mut decoder, 4, &section),
        Ok((Section::Blocked, Vec::new()))
    );
    // B.2's insertions, then one that evicts `:authority` (106 + 123 > 220), in one read.
    let mut instructions =
        hex("3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468");
    instructions.extend([0x41, b'x', 90]);
    instructions.extend([b'v'; 90]);
    decoder.read_encoder_stream(&instructions).unwrap();
    assert_eq!(decoder.take_unblocked(), [4]);
    let (_, fields) = decode(&mut decoder, 4, &section).unwrap();
    assert_eq!(
        fields,
        pairs(&[(":authority", "www.example.com"), (":path", "/sample/path")])
    );
    // Then the rest: the third insertion, which no section used.
    decoder.read_encoder_stream(&[]).unwrap();
    assert!(decoder.take_unblocked().is_empty());
    assert_eq!(decoder.take_decoder_stream(), hex("84 01"));
}
