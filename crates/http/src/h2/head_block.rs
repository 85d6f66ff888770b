//! A response's header block: `:status` and the fields, HPACK-encoded (RFC 9113 §8.3.2), from
//! `ResponseFields` or from a `response_head::Head` as ampd's handlers fill it.
//!
//! Owns: the order fields are encoded in, which of them are never indexed, and a memo of the
//! last head's block. A block that left the encoder's table as it found it (every field sent
//! as an index, or as a literal not added) is exactly what the encoder would write again for
//! the same head while the table stays as it is; a connection that is asked for the same
//! resource over and over (a page's repeated requests, a load test, a polling client) then
//! pays one compare and one copy per response instead of searching the tables field by field.
//! `Date` changes once a second, which costs one full encoding (the new value enters the
//! table) and one more to remember the block.
//! Must not touch: frames and streams (`connection.rs` wraps the block in HEADERS and
//! CONTINUATION frames).

use super::fields::{is_connection_specific, ResponseFields};
use super::hpack::Encoder;
use crate::response_head::Head;

/// Append the block of `response` (a pending table size update first, then `:status`, then
/// the fields in order). Credentials are never indexed: the encoder sees to that for every
/// caller (RFC 7541 §7.1.3).
pub(super) fn encode(encoder: &mut Encoder, response: &ResponseFields, out: &mut Vec<u8>) {
    encoder.begin(out);
    let status = response.status.min(999);
    let digits = [
        b'0' + (status / 100) as u8,
        b'0' + (status / 10 % 10) as u8,
        b'0' + (status % 10) as u8,
    ];
    encoder.field(b":status", &digits, false, out);
    for (name, value) in response.iter() {
        encoder.field(name, value, false, out);
    }
}

/// Append the block of `head`: `:status`, then its fields with names lower-cased (RFC 9113
/// §8.2: upper case makes a response malformed), lower-cased into `name` (kept for its
/// capacity). A connection-specific field is left out (§8.2.2), though a `Head` should never
/// hold one.
fn encode_head(encoder: &mut Encoder, head: &Head, name: &mut Vec<u8>, out: &mut Vec<u8>) {
    encoder.begin(out);
    let status = head.status.min(999);
    let digits = [
        b'0' + (status / 100) as u8,
        b'0' + (status / 10 % 10) as u8,
        b'0' + (status % 10) as u8,
    ];
    encoder.field(b":status", &digits, false, out);
    for (field, value) in head.fields() {
        name.clear();
        name.extend(field.iter().map(u8::to_ascii_lowercase));
        if is_connection_specific(name) {
            continue;
        }
        encoder.field(name, value, false, out);
    }
}

/// The last head encoded, and its block if that block can be sent again.
#[derive(Debug, Default)]
pub(super) struct Blocks {
    head: Head,
    block: Vec<u8>,
    /// A field name being lower-cased.
    name: Vec<u8>,
    /// The encoder's generation the block is valid at; `None`: no block to reuse.
    generation: Option<u64>,
}

impl Blocks {
    /// Append the block of `head`, from the memo when the last head was the same and the
    /// table has not changed since.
    pub(super) fn encode(&mut self, encoder: &mut Encoder, head: &Head, out: &mut Vec<u8>) {
        if self.generation == Some(encoder.generation())
            && !encoder.has_pending_size_update()
            && self.head == *head
        {
            out.extend_from_slice(&self.block);
            return;
        }
        let before = encoder.generation();
        let start = out.len();
        encode_head(encoder, head, &mut self.name, out);
        let unchanged = encoder.generation() == before && !encoder.has_pending_size_update();
        self.generation = unchanged.then_some(before);
        if unchanged {
            self.head.clone_from(head);
            self.block.clear();
            self.block.extend_from_slice(&out[start..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::hpack::Decoder;

    fn decode(decoder: &mut Decoder, block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut fields = Vec::new();
        decoder
            .decode(block, usize::MAX, &mut |name, value| {
                fields.push((name.to_vec(), value.to_vec()));
            })
            .expect("a valid block");
        fields
    }

    /// What the block of `structured()` must say, whether it was encoded or remembered.
    fn expected() -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut list = vec![(b":status".to_vec(), b"200".to_vec())];
        list.extend(
            structured()
                .fields()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.to_vec())),
        );
        list
    }

    fn structured() -> Head {
        let mut head = Head::new(200);
        head.push("Date", b"Mon, 21 Oct 2013 20:13:21 GMT");
        head.push("Server", b"ampd");
        head.push("Content-Type", b"text/plain");
        head.push_decimal("Content-Length", 1024);
        head.push("ETag", b"\"5f-400\"");
        head
    }

    #[test]
    fn a_structured_head_is_encoded_lower_cased_and_repeated_from_the_memo() {
        let (mut encoder, mut decoder, mut blocks) =
            (Encoder::new(), Decoder::new(4096), Blocks::default());
        let head = structured();
        let mut sent = Vec::new();
        for _ in 0..3 {
            let mut out = Vec::new();
            blocks.encode(&mut encoder, &head, &mut out);
            assert_eq!(decode(&mut decoder, &out), expected());
            sent.push(out);
        }
        assert!(sent[1].len() < sent[0].len());
        assert_eq!(sent[1], sent[2]);

        // Another Date enters the table: the memo is not used, and the block still decodes.
        let mut other = structured();
        other.reset(404);
        other.push("Date", b"Mon, 21 Oct 2013 20:13:22 GMT");
        let mut out = Vec::new();
        blocks.encode(&mut encoder, &other, &mut out);
        let fields = decode(&mut decoder, &out);
        assert_eq!(fields[0], (b":status".to_vec(), b"404".to_vec()));
        assert_eq!(fields[1].0, b"date");
        let mut out = Vec::new();
        blocks.encode(&mut encoder, &head, &mut out);
        assert_eq!(decode(&mut decoder, &out), expected());

        // A table size change is signalled first, not replayed from the memo.
        encoder.set_max_table_size(256);
        let mut out = Vec::new();
        blocks.encode(&mut encoder, &head, &mut out);
        assert_eq!(out[0] & 0xe0, 0x20, "a size update opens the block");
        assert_eq!(decode(&mut decoder, &out), expected());
    }

    #[test]
    fn a_connection_specific_field_never_reaches_a_block() {
        let (mut encoder, mut decoder, mut blocks) =
            (Encoder::new(), Decoder::new(4096), Blocks::default());
        let mut head = Head::new(204);
        head.push("Connection", b"close");
        head.push("Transfer-Encoding", b"chunked");
        head.push("X-Kept", b"1");
        let mut out = Vec::new();
        blocks.encode(&mut encoder, &head, &mut out);
        assert_eq!(
            decode(&mut decoder, &out),
            [
                (b":status".to_vec(), b"204".to_vec()),
                (b"x-kept".to_vec(), b"1".to_vec())
            ]
        );
    }
}
