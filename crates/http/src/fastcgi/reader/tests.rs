//! Tests of the record reader: the specification's examples as hand-written bytes, every
//! record type, padding, splits, and every error.

use super::*;
use crate::fastcgi::{write_end_request, write_get_values_result, write_record, write_stream};

/// An event with its bytes owned, so events from different feeds can be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owned {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    End(EndRequest),
    Values(Vec<(Vec<u8>, Vec<u8>)>),
}

/// Feeds `bytes` in pieces of `step` bytes, as reads would deliver them, keeping what the
/// reader did not use; adjacent stream pieces are merged. Returns the events, the outcome and
/// the bytes never used.
fn feed(
    request_id: u16,
    bytes: &[u8],
    step: usize,
) -> (Vec<Owned>, Result<(), FastCgiError>, usize) {
    let mut reader = RecordReader::new(request_id);
    let mut events: Vec<Owned> = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut fed = 0;
    loop {
        let (event, used) = match reader.next(&pending) {
            Ok(step) => step,
            Err(error) => return (events, Err(error), 0),
        };
        assert!(used <= pending.len());
        let owned = event.map(|event| match event {
            Event::Stdout(piece) => Owned::Stdout(piece.to_vec()),
            Event::Stderr(piece) => Owned::Stderr(piece.to_vec()),
            Event::End(end) => Owned::End(end),
            Event::Values(values) => Owned::Values(values),
        });
        pending.drain(..used);
        match owned {
            Some(event) => {
                assert!(used > 0, "an event without progress");
                match (events.last_mut(), event) {
                    (Some(Owned::Stdout(before)), Owned::Stdout(piece))
                    | (Some(Owned::Stderr(before)), Owned::Stderr(piece)) => {
                        before.extend_from_slice(&piece);
                    }
                    (_, event) => events.push(event),
                }
            }
            None if fed == bytes.len() => return (events, Ok(()), pending.len()),
            None => {
                let end = (fed + step).min(bytes.len());
                pending.extend_from_slice(&bytes[fed..end]);
                fed = end;
            }
        }
    }
}

/// `feed` whole and byte by byte, which must agree.
fn read_all(request_id: u16, bytes: &[u8]) -> (Vec<Owned>, Result<(), FastCgiError>, usize) {
    let whole = feed(request_id, bytes, bytes.len().max(1));
    assert_eq!(feed(request_id, bytes, 1), whole, "byte by byte differs");
    assert_eq!(
        feed(request_id, bytes, 7),
        whole,
        "7 bytes at a time differs"
    );
    whole
}

const COMPLETE: EndRequest = EndRequest {
    app_status: 0,
    protocol_status: ProtocolStatus::RequestComplete,
};

#[test]
fn the_specifications_responder_answer() {
    // §6.2: {FCGI_STDOUT, 1, "Content-type: text/html\r\n\r\n<html>\n<head> ... "},
    // {FCGI_STDOUT, 1, ""}, {FCGI_END_REQUEST, 1, {0, FCGI_REQUEST_COMPLETE}}; padded to 8.
    let bytes = b"\x01\x06\x00\x01\x00\x2d\x03\x00\
Content-type: text/html\r\n\r\n<html>\n<head> ... \0\0\0\
\x01\x06\x00\x01\x00\x00\x00\x00\
\x01\x03\x00\x01\x00\x08\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00";
    let (events, outcome, left) = read_all(1, bytes);
    assert_eq!(outcome, Ok(()));
    assert_eq!(left, 0);
    assert_eq!(
        events,
        vec![
            Owned::Stdout(b"Content-type: text/html\r\n\r\n<html>\n<head> ... ".to_vec()),
            Owned::End(COMPLETE),
        ]
    );
}

#[test]
fn the_specifications_answer_with_stderr() {
    // §6.2's second example: stdout and stderr interleaved, then app status 938.
    let mut bytes = Vec::new();
    write_stream(
        &mut bytes,
        RecordType::Stdout,
        1,
        b"Content-type: text/html\r\n\r\n<html>\n<head> ... ",
    );
    write_stream(
        &mut bytes,
        RecordType::Stderr,
        1,
        b"config error: missing SI_UID\n",
    );
    write_stream(&mut bytes, RecordType::Stdout, 1, b"<html>\n<head> ... ");
    write_stream(&mut bytes, RecordType::Stdout, 1, b"");
    write_stream(&mut bytes, RecordType::Stderr, 1, b"");
    let end = EndRequest {
        app_status: 938,
        protocol_status: ProtocolStatus::RequestComplete,
    };
    write_end_request(&mut bytes, 1, end);
    let (events, outcome, _) = read_all(1, &bytes);
    assert_eq!(outcome, Ok(()));
    assert_eq!(
        events,
        vec![
            Owned::Stdout(b"Content-type: text/html\r\n\r\n<html>\n<head> ... ".to_vec()),
            Owned::Stderr(b"config error: missing SI_UID\n".to_vec()),
            Owned::Stdout(b"<html>\n<head> ... ".to_vec()),
            Owned::End(end),
        ]
    );
}

#[test]
fn a_large_record_is_handed_out_as_it_arrives() {
    let mut bytes = Vec::new();
    write_record(&mut bytes, RecordType::Stdout, 1, &vec![b'x'; 65535]);
    let mut reader = RecordReader::new(1);
    // The header and 100 bytes of content: 100 bytes come out at once.
    let (event, used) = reader.next(&bytes[..108]).expect("valid");
    assert_eq!(event, Some(Event::Stdout(&bytes[8..108])));
    assert_eq!(used, 108);
    assert_eq!(reader.next(&[]).expect("valid"), (None, 0));
    let (event, used) = reader.next(&bytes[108..]).expect("valid");
    assert_eq!(
        event.map(|e| matches!(e, Event::Stdout(p) if p.len() == 65435)),
        Some(true)
    );
    assert_eq!(used, 65435);
    // The one byte of padding is used on the next call.
    assert_eq!(
        reader.next(&bytes[108 + 65435..]).expect("valid"),
        (None, 1)
    );
}

#[test]
fn a_partial_header_is_not_consumed_but_padding_is() {
    let mut reader = RecordReader::new(1);
    assert_eq!(
        reader.next(b"\x01\x06\x00\x01\x00").expect("valid"),
        (None, 0)
    );
    // An empty record and 3 bytes of a header: the empty record is used, the rest kept.
    let bytes = b"\x01\x07\x00\x01\x00\x00\x05\x00\0\0\0\0\0\x01\x06\x00";
    assert_eq!(reader.next(bytes).expect("valid"), (None, 13));
}

#[test]
fn any_padding_length_is_accepted() {
    let bytes = b"\x01\x06\x00\x01\x00\x02\xff\x00ok";
    let mut all = bytes.to_vec();
    all.extend_from_slice(&[0xaa; 255]);
    all.extend_from_slice(b"\x01\x03\x00\x01\x00\x08\x01\x00\x00\x00\x00\x05\x00\x00\x00\x00\x07");
    let (events, outcome, left) = read_all(1, &all);
    assert_eq!(outcome, Ok(()));
    assert_eq!(left, 0, "END_REQUEST's padding is used before the event");
    assert_eq!(
        events,
        vec![
            Owned::Stdout(b"ok".to_vec()),
            Owned::End(EndRequest {
                app_status: 5,
                protocol_status: ProtocolStatus::RequestComplete
            })
        ]
    );
}

#[test]
fn every_protocol_status() {
    for (code, status) in [
        (0, ProtocolStatus::RequestComplete),
        (1, ProtocolStatus::CantMpxConn),
        (2, ProtocolStatus::Overloaded),
        (3, ProtocolStatus::UnknownRole),
        (9, ProtocolStatus::Other(9)),
    ] {
        let bytes = [
            1, 3, 0, 1, 0, 8, 0, 0, 0xff, 0xff, 0xff, 0xff, code, 0, 0, 0,
        ];
        let (events, outcome, _) = read_all(1, &bytes);
        assert_eq!(outcome, Ok(()));
        assert_eq!(
            events,
            vec![Owned::End(EndRequest {
                app_status: u32::MAX,
                protocol_status: status
            })]
        );
    }
}

#[test]
fn get_values_result_is_an_event_on_any_reader() {
    let mut bytes = Vec::new();
    let values: [(&[u8], &[u8]); 3] = [
        (b"FCGI_MAX_CONNS", b"5"),
        (b"FCGI_MAX_REQS", b"5"),
        (b"FCGI_MPXS_CONNS", b"0"),
    ];
    write_get_values_result(&mut bytes, values);
    let expected = Owned::Values(
        values
            .iter()
            .map(|(name, value)| (name.to_vec(), value.to_vec()))
            .collect(),
    );
    for request_id in [0, 1] {
        let (events, outcome, _) = read_all(request_id, &bytes);
        assert_eq!(outcome, Ok(()));
        assert_eq!(events, vec![expected.clone()]);
    }
    // Bad pairs inside it.
    let mut bad = Vec::new();
    write_record(&mut bad, RecordType::GetValuesResult, 0, b"\x05\x01AB");
    assert_eq!(read_all(0, &bad).1, Err(FastCgiError::NameValue));
}

#[test]
fn ended_and_after_end() {
    let mut bytes = Vec::new();
    write_end_request(&mut bytes, 1, COMPLETE);
    let mut reader = RecordReader::new(1);
    assert!(!reader.ended());
    assert_eq!(
        reader.next(&bytes).expect("valid"),
        (Some(Event::End(COMPLETE)), 16)
    );
    assert!(reader.ended());
    assert_eq!(reader.next(b"").expect("nothing more"), (None, 0));
    assert_eq!(reader.next(b"\x01"), Err(FastCgiError::AfterEnd));
}

#[test]
fn every_error() {
    let mut stdout_after_close = Vec::new();
    write_stream(&mut stdout_after_close, RecordType::Stdout, 1, b"");
    write_stream(&mut stdout_after_close, RecordType::Stdout, 1, b"late");
    let cases: Vec<(&str, Vec<u8>, FastCgiError)> = vec![
        (
            "HTTP answering",
            b"HTTP/1.1 200 OK\r\n\r\n".to_vec(),
            FastCgiError::Version(b'H'),
        ),
        (
            "version 2",
            vec![2, 6, 0, 1, 0, 0, 0, 0],
            FastCgiError::Version(2),
        ),
        (
            "another request",
            vec![1, 6, 0, 2, 0, 0, 0, 0],
            FastCgiError::RequestId(2),
        ),
        (
            "stream on id 0",
            vec![1, 7, 0, 0, 0, 0, 0, 0],
            FastCgiError::RequestId(0),
        ),
        (
            "end of another",
            vec![1, 3, 1, 1, 0, 8, 0, 0],
            FastCgiError::RequestId(257),
        ),
        (
            "values with an id",
            vec![1, 10, 0, 1, 0, 0, 0, 0],
            FastCgiError::RequestId(1),
        ),
        (
            "short end",
            vec![1, 3, 0, 1, 0, 7, 1, 0],
            FastCgiError::BadEndRequest,
        ),
        (
            "long end",
            vec![1, 3, 0, 1, 0, 9, 7, 0],
            FastCgiError::BadEndRequest,
        ),
        (
            "unknown type",
            vec![1, 12, 0, 1, 0, 0, 0, 0],
            FastCgiError::UnknownType(12),
        ),
        (
            "type 0",
            vec![1, 0, 0, 1, 0, 0, 0, 0],
            FastCgiError::UnknownType(0),
        ),
        (
            "stdout after its end",
            stdout_after_close,
            FastCgiError::AfterStreamEnd,
        ),
        (
            "unknown type answered",
            b"\x01\x0b\x00\x00\x00\x08\x00\x00\x09\0\0\0\0\0\0\0".to_vec(),
            FastCgiError::ManagementTypeRefused(9),
        ),
        (
            "unknown type answered without a body",
            b"\x01\x0b\x00\x00\x00\x00\x00\x00".to_vec(),
            FastCgiError::BadEndRequest,
        ),
    ];
    for (name, bytes, expected) in cases {
        assert_eq!(read_all(1, &bytes).1, Err(expected), "{name}");
    }
    for code in [1, 2, 4, 5, 8, 9] {
        let bytes = [1, code, 0, 1, 0, 0, 0, 0];
        assert_eq!(
            read_all(1, &bytes).1,
            Err(FastCgiError::UnexpectedType(code)),
            "type {code}"
        );
    }
}

#[test]
fn errors_say_what() {
    assert_eq!(
        FastCgiError::Version(72).to_string(),
        "FastCGI record of version 72, not 1 (not FastCGI?)"
    );
    assert_eq!(
        FastCgiError::RequestId(3).to_string(),
        "FastCGI record for request id 3, not ours"
    );
    assert_eq!(
        FastCgiError::NameValue.to_string(),
        "malformed FastCGI name-value pairs"
    );
}
