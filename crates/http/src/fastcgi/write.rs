//! The writers: whole records appended to the caller's buffer, long content split.
//!
//! Owns the request side (`FCGI_BEGIN_REQUEST`, `FCGI_PARAMS`, `FCGI_STDIN`,
//! `FCGI_ABORT_REQUEST`, `FCGI_GET_VALUES`) and, for tests, fuzzing and the peers of health
//! probes, the application side (`FCGI_STDOUT`/`FCGI_STDERR` via [`write_stream`],
//! `FCGI_END_REQUEST`, `FCGI_GET_VALUES_RESULT`). Must not read anything.

use super::name_value::encode_name_value;
use super::record::{write_record, RecordType};
use super::{EndRequest, Role, MAX_CONTENT};

/// The largest multiple of 8 a record holds: stream content split at it needs no padding.
const STREAM_PIECE: usize = MAX_CONTENT - MAX_CONTENT % 8;

/// `FCGI_KEEP_CONN` in `FCGI_BEGIN_REQUEST`'s flags (§5.1).
const KEEP_CONN: u8 = 1;

/// Appends `FCGI_BEGIN_REQUEST` (§5.1). Without `keep_conn` the application closes the
/// connection after the request; with it the connection is ampd's to reuse.
pub fn write_begin_request(out: &mut Vec<u8>, request_id: u16, role: Role, keep_conn: bool) {
    let [role_hi, role_lo] = role.code().to_be_bytes();
    let flags = if keep_conn { KEEP_CONN } else { 0 };
    write_record(
        out,
        RecordType::BeginRequest,
        request_id,
        &[role_hi, role_lo, flags, 0, 0, 0, 0, 0],
    );
}

/// Appends the `FCGI_PARAMS` stream (§5.2): the pairs packed into as few records as fit, then
/// the empty record that ends the stream.
///
/// A pair is never split over two records unless it alone exceeds one: the specification
/// allows it (PARAMS is a stream), but php-fpm decodes each record's pairs on their own and
/// refuses a pair cut in two.
pub fn write_params<'a>(
    out: &mut Vec<u8>,
    request_id: u16,
    params: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    let mut pending = Vec::new();
    let mut pair = Vec::new();
    for (name, value) in params {
        pair.clear();
        encode_name_value(&mut pair, name, value);
        if pending.len() + pair.len() > MAX_CONTENT {
            flush_stream(out, RecordType::Params, request_id, &pending);
            pending.clear();
        }
        pending.extend_from_slice(&pair);
    }
    flush_stream(out, RecordType::Params, request_id, &pending);
    write_record(out, RecordType::Params, request_id, b"");
}

/// Appends `data` on `FCGI_STDIN` (§5.3), split over records; an empty `data` appends the
/// empty record that ends the stream.
pub fn write_stdin(out: &mut Vec<u8>, request_id: u16, data: &[u8]) {
    write_stream(out, RecordType::Stdin, request_id, data);
}

/// Appends `data` on the stream `record_type` (`Stdin`, `Stdout`, `Stderr`, `Data`), split
/// over records; an empty `data` appends the empty record that ends the stream.
pub fn write_stream(out: &mut Vec<u8>, record_type: RecordType, request_id: u16, data: &[u8]) {
    if data.is_empty() {
        write_record(out, record_type, request_id, b"");
    } else {
        flush_stream(out, record_type, request_id, data);
    }
}

/// `data` as records of at most [`STREAM_PIECE`] bytes; nothing for empty `data`.
fn flush_stream(out: &mut Vec<u8>, record_type: RecordType, request_id: u16, data: &[u8]) {
    for piece in data.chunks(STREAM_PIECE) {
        write_record(out, record_type, request_id, piece);
    }
}

/// Appends `FCGI_ABORT_REQUEST` (§5.4): the client went away; the application answers with
/// `FCGI_END_REQUEST`.
pub fn write_abort_request(out: &mut Vec<u8>, request_id: u16) {
    write_record(out, RecordType::AbortRequest, request_id, b"");
}

/// Appends `FCGI_GET_VALUES` (§4.1) asking for `names` (e.g. [`MAX_CONNS`](super::MAX_CONNS)),
/// each with an empty value.
///
/// # Panics
/// When the names do not fit one record (65535 bytes): the management variables are a few
/// short names.
pub fn write_get_values(out: &mut Vec<u8>, names: &[&[u8]]) {
    let mut content = Vec::new();
    for name in names {
        encode_name_value(&mut content, name, b"");
    }
    write_record(out, RecordType::GetValues, 0, &content);
}

/// Appends `FCGI_GET_VALUES_RESULT` (§4.1): what an application answers to
/// [`write_get_values`].
///
/// # Panics
/// When the pairs do not fit one record.
pub fn write_get_values_result<'a>(
    out: &mut Vec<u8>,
    values: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) {
    let mut content = Vec::new();
    for (name, value) in values {
        encode_name_value(&mut content, name, value);
    }
    write_record(out, RecordType::GetValuesResult, 0, &content);
}

/// Appends `FCGI_END_REQUEST` (§5.5), as an application ends a request.
pub fn write_end_request(out: &mut Vec<u8>, request_id: u16, end: EndRequest) {
    let [a, b, c, d] = end.app_status.to_be_bytes();
    write_record(
        out,
        RecordType::EndRequest,
        request_id,
        &[a, b, c, d, end.protocol_status.code(), 0, 0, 0],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fastcgi::{decode_name_values, ProtocolStatus, RecordHeader, HEADER_LEN};

    /// Splits `bytes` into (header, content) per record, checking padding is a multiple of 8.
    fn records(mut bytes: &[u8]) -> Vec<(RecordHeader, Vec<u8>)> {
        let mut records = Vec::new();
        while !bytes.is_empty() {
            let header = RecordHeader::parse(bytes).expect("a whole header");
            let length = usize::from(header.content_length);
            let total = HEADER_LEN + length + usize::from(header.padding_length);
            assert_eq!(total % 8, 0, "record not padded to 8: {header:?}");
            records.push((header, bytes[HEADER_LEN..HEADER_LEN + length].to_vec()));
            bytes = &bytes[total..];
        }
        records
    }

    #[test]
    fn the_specifications_responder_request() {
        // §6.2's example: {FCGI_BEGIN_REQUEST, 1, {FCGI_RESPONDER, 0}}.
        let mut out = Vec::new();
        write_begin_request(&mut out, 1, Role::Responder, false);
        assert_eq!(
            out,
            b"\x01\x01\x00\x01\x00\x08\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00"
        );
        out.clear();
        write_begin_request(&mut out, 0x1234, Role::Filter, true);
        assert_eq!(&out[2..4], b"\x12\x34");
        assert_eq!(&out[8..11], b"\x00\x03\x01");

        out.clear();
        let params: [(&[u8], &[u8]); 2] =
            [(b"SERVER_PORT", b"80"), (b"SERVER_ADDR", b"199.170.183.42")];
        write_params(&mut out, 1, params);
        let written = records(&out);
        assert_eq!(written.len(), 2);
        assert_eq!(written[0].0.record_type, RecordType::Params);
        assert_eq!(
            written[0].1,
            b"\x0b\x02SERVER_PORT80\x0b\x0eSERVER_ADDR199.170.183.42"
        );
        assert_eq!(written[1].1, b"", "the empty record ends the stream");

        out.clear();
        write_stdin(&mut out, 1, b"quantity=100&item=3047936");
        write_stdin(&mut out, 1, b"");
        let written = records(&out);
        assert_eq!(written[0].1, b"quantity=100&item=3047936");
        assert_eq!(written[0].0.padding_length, 7);
        assert_eq!(written[1].1, b"");
    }

    #[test]
    fn params_never_cut_a_pair_that_fits_a_record() {
        let value = vec![b'v'; 40_000];
        let params: Vec<(&[u8], &[u8])> = vec![(b"A", &value), (b"B", &value), (b"C", b"c")];
        let mut out = Vec::new();
        write_params(&mut out, 7, params);
        let written = records(&out);
        assert_eq!(written.len(), 3, "A | B, C | end");
        assert_eq!(decode_name_values(&written[0].1).unwrap()[0].0, b"A");
        let second = decode_name_values(&written[1].1).unwrap();
        assert_eq!(second.len(), 2);
        assert_eq!(second[1], (b"C".to_vec(), b"c".to_vec()));
        assert!(written.iter().all(|(header, _)| header.request_id == 7));
    }

    #[test]
    fn a_pair_larger_than_a_record_is_streamed() {
        let value = vec![b'v'; 100_000];
        let mut out = Vec::new();
        write_params(&mut out, 1, [(&b"BIG"[..], &value[..])]);
        let written = records(&out);
        assert_eq!(written.len(), 3);
        let joined: Vec<u8> = written.iter().flat_map(|(_, c)| c.clone()).collect();
        assert_eq!(decode_name_values(&joined).unwrap()[0].1.len(), 100_000);
        assert!(written.iter().all(|(_, c)| c.len() <= MAX_CONTENT));
    }

    #[test]
    fn empty_params_are_one_empty_record() {
        let mut out = Vec::new();
        write_params(&mut out, 1, std::iter::empty());
        assert_eq!(out, b"\x01\x04\x00\x01\x00\x00\x00\x00");
    }

    #[test]
    fn long_stdin_is_split_without_padding() {
        let data = vec![1u8; 2 * STREAM_PIECE + 3];
        let mut out = Vec::new();
        write_stdin(&mut out, 1, &data);
        let written = records(&out);
        let sizes: Vec<usize> = written.iter().map(|(_, c)| c.len()).collect();
        assert_eq!(sizes, vec![STREAM_PIECE, STREAM_PIECE, 3]);
        assert_eq!(written[0].0.padding_length, 0);
    }

    #[test]
    fn management_and_end_records() {
        let mut out = Vec::new();
        write_get_values(
            &mut out,
            &[b"FCGI_MAX_CONNS", b"FCGI_MAX_REQS", b"FCGI_MPXS_CONNS"],
        );
        let written = records(&out);
        assert_eq!(written[0].0.request_id, 0);
        assert_eq!(written[0].0.record_type, RecordType::GetValues);
        assert_eq!(
            written[0].1,
            b"\x0e\x00FCGI_MAX_CONNS\x0d\x00FCGI_MAX_REQS\x0f\x00FCGI_MPXS_CONNS"
        );

        out.clear();
        write_abort_request(&mut out, 3);
        assert_eq!(out, b"\x01\x02\x00\x03\x00\x00\x00\x00");

        out.clear();
        write_end_request(
            &mut out,
            1,
            EndRequest {
                app_status: 0x0102_0304,
                protocol_status: ProtocolStatus::Overloaded,
            },
        );
        assert_eq!(
            out,
            b"\x01\x03\x00\x01\x00\x08\x00\x00\x01\x02\x03\x04\x02\x00\x00\x00"
        );
    }
}
