//! The decoder and encoder together: every example of RFC 7541 Appendix C (C.2 to C.6, with
//! the dynamic table after each block), the errors of §5 and §6, the list-size limit (the
//! HPACK bomb), the encoder's policy, and encode → decode round trips.

use proptest::prelude::*;

use super::{Decoded, Decoder, Encoder, HpackError};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// The hex dump of the RFC (spaces and line breaks ignored) as bytes.
fn hex(dump: &str) -> Vec<u8> {
    let digits: Vec<u8> = dump.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

fn decode(decoder: &mut Decoder, block: &[u8]) -> Result<(Fields, Decoded), HpackError> {
    decode_limited(decoder, block, usize::MAX)
}

fn decode_limited(
    decoder: &mut Decoder,
    block: &[u8],
    max_list_size: usize,
) -> Result<(Fields, Decoded), HpackError> {
    let mut fields = Vec::new();
    let decoded = decoder.decode(block, max_list_size, &mut |name, value| {
        fields.push((name.to_vec(), value.to_vec()));
    })?;
    Ok((fields, decoded))
}

fn fields(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|(name, value)| (name.as_bytes().to_vec(), value.as_bytes().to_vec()))
        .collect()
}

fn table(decoder: &Decoder) -> Fields {
    decoder
        .table_entries()
        .map(|(name, value)| (name.to_vec(), value.to_vec()))
        .collect()
}

/// Decodes `block` and checks the list, the table (newest first) and its size.
fn check(
    decoder: &mut Decoder,
    block: &str,
    expected: &[(&str, &str)],
    expected_table: &[(&str, &str)],
    table_size: usize,
) {
    let (list, decoded) = decode(decoder, &hex(block)).unwrap();
    assert_eq!(list, fields(expected));
    assert!(!decoded.over_limit);
    let counted: usize = expected.iter().map(|(n, v)| n.len() + v.len() + 32).sum();
    assert_eq!(decoded.list_size, counted);
    assert_eq!(table(decoder), fields(expected_table));
    assert_eq!(decoder.table_size(), table_size);
}

#[test]
fn c_2_1_literal_with_indexing() {
    let mut decoder = Decoder::new(4096);
    check(
        &mut decoder,
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        &[("custom-key", "custom-header")],
        &[("custom-key", "custom-header")],
        55,
    );
}

#[test]
fn c_2_2_literal_without_indexing() {
    let mut decoder = Decoder::new(4096);
    check(
        &mut decoder,
        "040c 2f73 616d 706c 652f 7061 7468",
        &[(":path", "/sample/path")],
        &[],
        0,
    );
}

#[test]
fn c_2_3_literal_never_indexed() {
    let mut decoder = Decoder::new(4096);
    check(
        &mut decoder,
        "1008 7061 7373 776f 7264 0673 6563 7265 74",
        &[("password", "secret")],
        &[],
        0,
    );
}

#[test]
fn c_2_4_indexed() {
    let mut decoder = Decoder::new(4096);
    check(&mut decoder, "82", &[(":method", "GET")], &[], 0);
}

const REQUEST_1: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQUEST_2: [(&str, &str); 5] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQUEST_3: [(&str, &str); 5] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const REQUEST_TABLE_1: [(&str, &str); 1] = [(":authority", "www.example.com")];
const REQUEST_TABLE_2: [(&str, &str); 2] = [
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];
const REQUEST_TABLE_3: [(&str, &str); 3] = [
    ("custom-key", "custom-value"),
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];

#[test]
fn c_3_requests_without_huffman() {
    let mut decoder = Decoder::new(4096);
    check(
        &mut decoder,
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        &REQUEST_1,
        &REQUEST_TABLE_1,
        57,
    );
    check(
        &mut decoder,
        "8286 84be 5808 6e6f 2d63 6163 6865",
        &REQUEST_2,
        &REQUEST_TABLE_2,
        110,
    );
    check(
        &mut decoder,
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        &REQUEST_3,
        &REQUEST_TABLE_3,
        164,
    );
}

#[test]
fn c_4_requests_with_huffman() {
    let mut decoder = Decoder::new(4096);
    check(
        &mut decoder,
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        &REQUEST_1,
        &REQUEST_TABLE_1,
        57,
    );
    check(
        &mut decoder,
        "8286 84be 5886 a8eb 1064 9cbf",
        &REQUEST_2,
        &REQUEST_TABLE_2,
        110,
    );
    check(
        &mut decoder,
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        &REQUEST_3,
        &REQUEST_TABLE_3,
        164,
    );
}

const DATE_1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE_2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

/// C.5 and C.6: three responses on a table of 256 octets, with evictions.
fn responses(blocks: [&str; 3]) {
    let mut decoder = Decoder::agreed(256);
    check(
        &mut decoder,
        blocks[0],
        &[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", DATE_1),
            ("location", LOCATION),
        ],
        &[
            ("location", LOCATION),
            ("date", DATE_1),
            ("cache-control", "private"),
            (":status", "302"),
        ],
        222,
    );
    check(
        &mut decoder,
        blocks[1],
        &[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", DATE_1),
            ("location", LOCATION),
        ],
        &[
            (":status", "307"),
            ("location", LOCATION),
            ("date", DATE_1),
            ("cache-control", "private"),
        ],
        222,
    );
    check(
        &mut decoder,
        blocks[2],
        &[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", DATE_2),
            ("location", LOCATION),
            ("content-encoding", "gzip"),
            ("set-cookie", COOKIE),
        ],
        &[
            ("set-cookie", COOKIE),
            ("content-encoding", "gzip"),
            ("date", DATE_2),
        ],
        215,
    );
}

#[test]
fn c_5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ]);
}

#[test]
fn c_6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn a_truncated_block_is_refused() {
    let whole = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
    // Every strict prefix that ends inside the representation (not the empty block).
    for end in 1..whole.len() {
        let mut decoder = Decoder::new(4096);
        assert_eq!(
            decode(&mut decoder, &whole[..end]).map(|(list, _)| list),
            Err(HpackError::Truncated),
            "{end}"
        );
    }
    // An index whose integer is cut short.
    let mut decoder = Decoder::new(4096);
    assert_eq!(
        decode(&mut decoder, &[0xff, 0x80]).map(|(list, _)| list),
        Err(HpackError::Truncated)
    );
    // The empty block is an empty list.
    assert_eq!(decode(&mut decoder, &[]).unwrap().0, Fields::new());
}

#[test]
fn an_index_outside_both_tables_is_refused() {
    let mut decoder = Decoder::new(4096);
    // Index 0 (§6.1), 62 with an empty dynamic table, a name index of 70.
    assert_eq!(decode(&mut decoder, &[0x80]), Err(HpackError::BadIndex(0)));
    assert_eq!(decode(&mut decoder, &[0xbe]), Err(HpackError::BadIndex(62)));
    assert_eq!(
        decode(&mut decoder, &[0x7f, 0x07, 0x00]),
        Err(HpackError::BadIndex(70))
    );
    assert_eq!(
        decode(&mut decoder, &[0x0f, 0x37, 0x00]),
        Err(HpackError::BadIndex(70))
    );
    // Once an entry is added, 62 names it and 63 is still out.
    decode(&mut decoder, &hex("400161 0162")).unwrap();
    assert_eq!(
        decode(&mut decoder, &[0xbe]).unwrap().0,
        fields(&[("a", "b")])
    );
    assert_eq!(decode(&mut decoder, &[0xbf]), Err(HpackError::BadIndex(63)));
}

#[test]
fn eos_or_long_padding_in_a_huffman_literal_is_refused() {
    let mut decoder = Decoder::new(4096);
    // `:path` (index 4) with a Huffman value of four octets of ones: EOS then padding.
    assert_eq!(
        decode(&mut decoder, &hex("0484 ffff ffff")),
        Err(HpackError::BadHuffman)
    );
    // '0' (00000) + 111, then a whole octet of padding.
    assert_eq!(
        decode(&mut decoder, &hex("0482 07ff")),
        Err(HpackError::BadHuffman)
    );
    // Padding of zeros.
    assert_eq!(
        decode(&mut decoder, &hex("0481 00")),
        Err(HpackError::BadHuffman)
    );
    // The same with one octet: '0' and three ones of padding is fine.
    assert_eq!(
        decode(&mut decoder, &hex("0481 07")).unwrap().0,
        fields(&[(":path", "0")])
    );
}

#[test]
fn table_size_updates_only_at_the_start_and_within_our_limit() {
    let mut decoder = Decoder::new(4096);
    decode(&mut decoder, &hex("400161 0162")).unwrap();
    // Two updates at the start (§4.2: the smallest then the final): the table empties.
    assert_eq!(
        decode(&mut decoder, &hex("20 3fe1 1f 82")).unwrap().0,
        fields(&[(":method", "GET")])
    );
    assert_eq!(decoder.table_size(), 0);
    assert_eq!(decode(&mut decoder, &[0xbe]), Err(HpackError::BadIndex(62)));
    // Up to what we advertised, not one more.
    assert!(decode(&mut decoder, &hex("3fe1 1f")).is_ok());
    assert_eq!(
        decode(&mut decoder, &hex("3fe2 1f")),
        Err(HpackError::BadTableSizeUpdate)
    );
    // After a field.
    assert_eq!(
        decode(&mut decoder, &hex("82 20")),
        Err(HpackError::BadTableSizeUpdate)
    );
    // A smaller size shrinks the table and bounds what follows.
    let mut decoder = Decoder::new(4096);
    decode(&mut decoder, &hex("3f11 400161 0162")).unwrap(); // size 48: one entry of 34
    assert_eq!(decoder.table_size(), 34);
    decode(&mut decoder, &hex("400163 0164")).unwrap();
    assert_eq!(table(&decoder), fields(&[("c", "d")]));
}

#[test]
fn an_integer_past_2_pow_32_is_refused() {
    let mut decoder = Decoder::new(4096);
    assert_eq!(
        decode(&mut decoder, &hex("ff ffff ffff 7f")),
        Err(HpackError::IntegerOverflow)
    );
    // A string length.
    assert_eq!(
        decode(&mut decoder, &hex("04 7f ffff ffff 7f")),
        Err(HpackError::IntegerOverflow)
    );
    // A table size.
    assert_eq!(
        decode(&mut decoder, &hex("3f ffff ffff 7f")),
        Err(HpackError::IntegerOverflow)
    );
}

/// A block that adds one large entry, then names it `repeats` times.
fn bomb(repeats: usize) -> Vec<u8> {
    let mut block = hex("40 05"); // literal with indexing, new name of 5
    block.extend_from_slice(b"x-big");
    let value = vec![b'v'; 4000];
    crate::field_coding::integer::encode(value.len(), 7, 0, &mut block);
    block.extend_from_slice(&value);
    block.extend(std::iter::repeat_n(0xbe, repeats)); // index 62
    block
}

#[test]
fn the_hpack_bomb_stops_at_the_list_limit_and_keeps_the_table() {
    let mut decoder = Decoder::new(4096);
    let entry = 5 + 4000 + 32;
    let (list, decoded) = decode_limited(&mut decoder, &bomb(10_000), 64 << 10).unwrap();
    // Fields were handed while the list fit, none after.
    assert_eq!(list.len(), (64 << 10) / entry);
    assert!(list
        .iter()
        .all(|(name, value)| name == b"x-big" && value.len() == 4000));
    assert!(decoded.over_limit);
    assert_eq!(decoded.list_size, 10_001 * entry);
    // The table holds what the client's does: the next block may name the entry.
    assert_eq!(decoder.table_size(), entry);
    let (list, decoded) = decode_limited(&mut decoder, &hex("be 82"), 64 << 10).unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].0, b"x-big");
    assert_eq!(list[1], (b":method".to_vec(), b"GET".to_vec()));
    assert!(!decoded.over_limit);
}

#[test]
fn a_field_that_passes_the_limit_is_not_handed() {
    let mut decoder = Decoder::new(4096);
    // ":method: GET" counts 7 + 3 + 32 = 42.
    let (list, decoded) = decode_limited(&mut decoder, &hex("82 82"), 84).unwrap();
    assert_eq!(list.len(), 2);
    assert!(!decoded.over_limit);
    let (list, decoded) = decode_limited(&mut decoder, &hex("82 82 82"), 84).unwrap();
    assert_eq!(list.len(), 2);
    assert!(decoded.over_limit);
    assert_eq!(decoded.list_size, 126);
    // Past the limit, a literal with indexing is still added to the table.
    let (list, decoded) = decode_limited(&mut decoder, &hex("82 400161 0162"), 42).unwrap();
    assert_eq!(list.len(), 1);
    assert!(decoded.over_limit);
    assert_eq!(table(&decoder), fields(&[("a", "b")]));
}

#[test]
fn a_literal_naming_a_dynamic_entry_that_its_insertion_evicts() {
    // §4.4: the name is read before the entry it came from is evicted. Table of 40: one
    // entry "abcd: efgh" (40) fills it; a literal with indexing named by index 62 evicts it.
    let mut decoder = Decoder::new(4096);
    let mut block = hex("3f09"); // size update to 40
    block.extend(hex("4004 6162 6364 0465 6667 68"));
    decode(&mut decoder, &block).unwrap();
    let (list, _) = decode(&mut decoder, &hex("7e 03 787878")).unwrap();
    assert_eq!(list, fields(&[("abcd", "xxx")]));
    assert_eq!(table(&decoder), fields(&[("abcd", "xxx")]));
}

fn encode_block(encoder: &mut Encoder, list: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    encoder.begin(&mut out);
    for (name, value) in list {
        encoder.field(name.as_bytes(), value.as_bytes(), false, &mut out);
    }
    out
}

const RESPONSE: [(&str, &str); 9] = [
    (":status", "200"),
    ("server", "ampd"),
    ("date", DATE_1),
    ("content-type", "text/html; charset=utf-8"),
    ("content-length", "1234"),
    ("last-modified", DATE_2),
    ("etag", "\"5f3e-1d2\""),
    ("accept-ranges", "bytes"),
    ("vary", "accept-encoding"),
];

#[test]
fn the_second_response_sends_repeated_fields_as_one_octet() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(4096);
    let first = encode_block(&mut encoder, &RESPONSE);
    assert_eq!(decode(&mut decoder, &first).unwrap().0, fields(&RESPONSE));
    let second = encode_block(&mut encoder, &RESPONSE);
    assert_eq!(decode(&mut decoder, &second).unwrap().0, fields(&RESPONSE));
    // Every field one octet: the per-resource ones (content-length, last-modified, etag) went
    // into the table's free room the first time.
    assert_eq!(second.len(), RESPONSE.len());
    assert!(
        second.len() < first.len() / 2,
        "{} vs {}",
        second.len(),
        first.len()
    );
}

#[test]
fn per_resource_fields_never_evict_what_repeats() {
    let mut encoder = Encoder::new();
    let mut out = Vec::new();
    encoder.field(b"server", b"ampd", false, &mut out);
    // Fill the table with per-resource values until one no longer fits in the room left.
    let mut resource = 0;
    loop {
        out.clear();
        let etag = format!("\"{resource:08}\"");
        encoder.field(b"etag", etag.as_bytes(), false, &mut out);
        resource += 1;
        if out[0] & 0xc0 != 0x40 {
            // Literal without indexing (4-bit prefix, name 34): the table was full.
            assert_eq!(out[..2], [0x0f, 34 - 15]);
            break;
        }
        assert!(resource < 200, "the table never filled");
    }
    // `server` is still in the table: an indexed field (two octets, its index now past 126).
    out.clear();
    encoder.field(b"server", b"ampd", false, &mut out);
    assert_eq!(out[0], 0xff, "{out:?}");
    assert_eq!(out.len(), 2);
}

#[test]
fn the_encoder_follows_the_policy_per_field() {
    let mut encoder = Encoder::new();
    let mut out = Vec::new();
    // A static match whole: indexed.
    encoder.field(b":status", b"304", false, &mut out);
    assert_eq!(out, [0x80 | 11]);
    // :status not in the static table: literal with indexing, static name 8, Huffman value
    // (C.6.1's first field exactly).
    out.clear();
    encoder.field(b":status", b"302", false, &mut out);
    assert_eq!(out, hex("4882 6402"));
    out.clear();
    encoder.field(b":status", b"302", false, &mut out);
    assert_eq!(out, [0x80 | 62]);
    // date: with indexing (C.6.1's third field).
    out.clear();
    encoder.field(b"date", DATE_1.as_bytes(), false, &mut out);
    assert_eq!(out[0], 0x40 | 33);
    // content-length: per resource, indexed while the table has room (name 28).
    out.clear();
    encoder.field(b"content-length", b"12", false, &mut out);
    assert_eq!(out[0], 0x40 | 28);
    // set-cookie: never indexed whatever the caller says; and never_index honoured.
    out.clear();
    encoder.field(b"set-cookie", b"a=b", false, &mut out);
    assert_eq!(out[..2], [0x1f, 55 - 15]);
    out.clear();
    encoder.field(b"x-secret", b"s", true, &mut out);
    assert_eq!(out[0], 0x10);
    // A new name: literal name, with indexing; then indexed.
    out.clear();
    encoder.field(b"x-frame-options", b"DENY", false, &mut out);
    assert_eq!(out[0], 0x40);
    out.clear();
    encoder.field(b"x-frame-options", b"DENY", false, &mut out);
    assert_eq!(out, [0x80 | 62]);
    // The same new name with another value takes the dynamic entry's name index.
    out.clear();
    encoder.field(b"x-frame-options", b"SAMEORIGIN", false, &mut out);
    assert_eq!(out[0], 0x40 | 62);
    // Entries: x-frame-options SAMEORIGIN, DENY, content-length, date, :status 302. Nothing
    // else was added.
    let expected = 15 + 10 + 32 + 15 + 4 + 32 + 14 + 2 + 32 + 4 + DATE_1.len() + 32 + 7 + 3 + 32;
    assert_eq!(encoder.table_size(), expected);
}

#[test]
fn a_field_larger_than_the_table_is_not_indexed() {
    let mut encoder = Encoder::new();
    let big = "v".repeat(5000);
    let mut out = Vec::new();
    encoder.field(b"x-big", big.as_bytes(), false, &mut out);
    assert_eq!(out[0], 0x00);
    assert_eq!(encoder.table_size(), 0);
}

#[test]
fn table_size_changes_are_signalled_at_the_next_block() {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(4096);
    let first = encode_block(&mut encoder, &RESPONSE);
    decode(&mut decoder, &first).unwrap();
    // Down to 0 and back up to 1,000 between blocks: both are signalled (§4.2), smallest
    // first, and the table is empty on both sides.
    encoder.set_max_table_size(0);
    encoder.set_max_table_size(1000);
    let mut block = Vec::new();
    encoder.begin(&mut block);
    assert_eq!(block, hex("20 3fc9 07"));
    encoder.field(b"server", b"ampd", false, &mut block);
    let (list, _) = decode(&mut decoder, &block).unwrap();
    assert_eq!(list, fields(&[("server", "ampd")]));
    assert_eq!(decoder.table_size(), encoder.table_size());
    assert_eq!(table(&decoder), fields(&[("server", "ampd")]));
    // No change, no update; a size above our own bound is held to it (4,096, the initial
    // size, so nothing to signal from the start).
    let mut block = Vec::new();
    encoder.begin(&mut block);
    assert!(block.is_empty());
    let mut fresh = Encoder::new();
    fresh.set_max_table_size(1 << 20);
    fresh.begin(&mut block);
    assert!(block.is_empty());
}

/// A field as the encoder gets it: a name (a static table one or a made-up token), a value of
/// any bytes, and whether the caller asked for never-indexed.
fn field_strategy() -> impl Strategy<Value = (Vec<u8>, Vec<u8>, bool)> {
    let name = prop_oneof![
        prop::sample::select(vec![
            ":status",
            "date",
            "server",
            "content-type",
            "content-length",
            "etag",
            "set-cookie",
            "cache-control",
            "vary",
            "location",
            "x-custom",
        ])
        .prop_map(|name| name.as_bytes().to_vec()),
        "[a-z0-9-]{1,20}".prop_map(String::into_bytes),
    ];
    let value = prop_oneof![
        prop::sample::select(vec!["200", "302", "", "text/html", "gzip", "ampd"])
            .prop_map(|value| value.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..300),
    ];
    (name, value, any::<bool>())
}

proptest! {
    #[test]
    fn what_the_encoder_writes_the_decoder_reads(
        blocks in prop::collection::vec(
            (prop::collection::vec(field_strategy(), 0..12), prop::option::of(0usize..5000)),
            1..8,
        )
    ) {
        let mut encoder = Encoder::new();
        let mut decoder = Decoder::new(4096);
        for (list, new_size) in blocks {
            if let Some(size) = new_size {
                encoder.set_max_table_size(size);
            }
            let mut block = Vec::new();
            encoder.begin(&mut block);
            for (name, value, never_index) in &list {
                encoder.field(name, value, *never_index, &mut block);
            }
            let (decoded, _) = decode(&mut decoder, &block).unwrap();
            let expected: Fields = list.into_iter().map(|(n, v, _)| (n, v)).collect();
            prop_assert_eq!(decoded, expected);
            prop_assert_eq!(decoder.table_size(), encoder.table_size());
        }
    }

    #[test]
    fn arbitrary_blocks_never_panic_and_keep_the_table_bounded(
        blocks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..6)
    ) {
        let mut decoder = Decoder::agreed(256);
        for block in blocks {
            let _ = decode_limited(&mut decoder, &block, 512);
            prop_assert!(decoder.table_size() <= 256);
        }
    }
}

/// A literal with incremental indexing and a new name (§6.2.1).
fn indexed_literal(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut block = vec![0x40];
    crate::field_coding::string::encode(name, 7, 0, &mut block);
    crate::field_coding::string::encode(value, 7, 0, &mut block);
    block
}

/// The newest entry of the dynamic table, as an indexed field (§6.1).
const FIRST_DYNAMIC: u8 = 0x80 | 62;

#[test]
fn until_our_settings_are_acknowledged_the_client_may_use_the_initial_table() {
    // We advertise 256; a client that sends its first requests before reading our SETTINGS
    // indexes into the 4,096 of RFC 9113 §6.5.2 (RFC 7541 §4.2: the new size applies once the
    // client has it).
    let mut decoder = Decoder::new(256);
    let value = vec![b'v'; 1_000];
    let (list, _) = decode(&mut decoder, &indexed_literal(b"x-large", &value)).unwrap();
    assert_eq!(list, vec![(b"x-large".to_vec(), value.clone())]);
    let (list, _) = decode(&mut decoder, &[FIRST_DYNAMIC]).unwrap();
    assert_eq!(list, vec![(b"x-large".to_vec(), value.clone())]);

    // Acknowledged: the table is larger than we allow, so the client's next block must start
    // by shrinking it (RFC 7541 §4.2), ...
    decoder.settings_acknowledged();
    assert_eq!(
        decode(&mut decoder, &[FIRST_DYNAMIC]),
        Err(HpackError::BadTableSizeUpdate)
    );
    // ... and may not grow it past what we advertised.
    let mut too_large = Decoder::new(256);
    too_large.settings_acknowledged();
    let mut grow = Vec::new();
    crate::field_coding::integer::encode(4_096, 5, 0x20, &mut grow);
    assert_eq!(
        decode(&mut too_large, &grow),
        Err(HpackError::BadTableSizeUpdate)
    );
}

#[test]
fn a_client_that_shrinks_the_table_after_the_acknowledgement_goes_on() {
    let mut decoder = Decoder::new(256);
    let value = vec![b'v'; 1_000];
    decode(&mut decoder, &indexed_literal(b"x-large", &value)).unwrap();
    decoder.settings_acknowledged();
    let mut block = Vec::new();
    crate::field_coding::integer::encode(256, 5, 0x20, &mut block);
    block.extend(indexed_literal(b"x-small", b"v"));
    let (list, _) = decode(&mut decoder, &block).unwrap();
    assert_eq!(list, fields(&[("x-small", "v")]));
    assert_eq!(table(&decoder), fields(&[("x-small", "v")]));
    // Later blocks need no update.
    let (list, _) = decode(&mut decoder, &[FIRST_DYNAMIC]).unwrap();
    assert_eq!(list, fields(&[("x-small", "v")]));
}

#[test]
fn a_larger_table_than_the_initial_one_is_allowed_once_advertised() {
    let mut decoder = Decoder::new(8_192);
    let mut block = Vec::new();
    crate::field_coding::integer::encode(8_192, 5, 0x20, &mut block);
    block.extend(indexed_literal(b"x-a", b"1"));
    assert!(decode(&mut decoder, &block).is_ok());
    decoder.settings_acknowledged();
    assert!(decode(&mut decoder, &[FIRST_DYNAMIC]).is_ok());
}
