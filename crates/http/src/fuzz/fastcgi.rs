//! Fuzz checks of the dynamic-content protocols: the FastCGI records an application answers
//! (`crate::fastcgi`), name-value pairs, and the CGI response head (`crate::cgi`).
//!
//! Owns those invariants. Must not be used by the server; every check panics on violation.

use crate::cgi::{CgiKind, CgiParse, CgiParser};
use crate::fastcgi::{
    decode_name_values, encode_name_value, write_end_request, write_get_values_result,
    write_params, write_stream, Event, FastCgiError, NameValues, RecordHeader, RecordReader,
    RecordType, HEADER_LEN, MAX_CONTENT,
};
use crate::upstream::Limits;

/// An event with its bytes owned, stream pieces merged, so feeds split differently compare.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owned {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    End(crate::fastcgi::EndRequest),
    Values(NameValues),
}

/// What one feed of a record stream gave: the events, then the error or the bytes left over.
type Outcome = (Vec<Owned>, Result<usize, FastCgiError>);

/// Feeds `data` to a [`RecordReader`] for request 1 whole, byte by byte and in splits chosen by
/// the input, as a connection's reads would deliver it, and checks:
///
/// * every feed gives the same events (stream pieces joined) and the same error, or leaves the
///   same bytes unused;
/// * no call uses more than it was given, every event uses at least one byte, nothing follows
///   `End`, and `ended()` says whether `End` came;
/// * the events, written back out with the crate's writers, read back the same.
///
/// # Panics
/// Only when an invariant is violated, which is the bug the fuzzer is looking for.
pub fn fastcgi_response(data: &[u8]) {
    let whole = feed(data, &mut |_| data.len().max(1));
    assert_eq!(feed(data, &mut |_| 1), whole, "byte by byte differs");
    let mut at = 0;
    let split = feed(data, &mut |fed| {
        at += 1;
        // Read sizes from the input itself, 1..=64 bytes, different at each read.
        1 + usize::from(
            data.get((fed + at) % data.len().max(1))
                .copied()
                .unwrap_or(0)
                % 64,
        )
    });
    assert_eq!(split, whole, "split feed differs");

    let (events, Ok(0)) = whole else {
        return;
    };
    let mut encoded = Vec::new();
    for event in &events {
        match event {
            Owned::Stdout(bytes) => write_stream(&mut encoded, RecordType::Stdout, 1, bytes),
            Owned::Stderr(bytes) => write_stream(&mut encoded, RecordType::Stderr, 1, bytes),
            Owned::End(end) => write_end_request(&mut encoded, 1, *end),
            Owned::Values(values) => write_get_values_result(
                &mut encoded,
                values.iter().map(|(n, v)| (n.as_slice(), v.as_slice())),
            ),
        }
    }
    assert_eq!(
        feed(&encoded, &mut |_| encoded.len().max(1)),
        (events, Ok(0)),
        "the events written back read differently"
    );
}

/// Feeds `data` in reads of `next_read(fed)` bytes, keeping what the reader left unused.
fn feed(data: &[u8], next_read: &mut dyn FnMut(usize) -> usize) -> Outcome {
    let mut reader = RecordReader::new(1);
    let mut events: Vec<Owned> = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut fed = 0;
    loop {
        let (event, used) = match reader.next(&pending) {
            Ok(step) => step,
            Err(error) => return (events, Err(error)),
        };
        assert!(used <= pending.len(), "used {used} of {}", pending.len());
        let event = event.map(|event| match event {
            Event::Stdout(piece) => Owned::Stdout(piece.to_vec()),
            Event::Stderr(piece) => Owned::Stderr(piece.to_vec()),
            Event::End(end) => Owned::End(end),
            Event::Values(values) => Owned::Values(values),
        });
        pending.drain(..used);
        let Some(event) = event else {
            if fed == data.len() {
                assert_eq!(
                    reader.ended(),
                    matches!(events.last(), Some(Owned::End(_))),
                    "ended() disagrees with the events"
                );
                return (events, Ok(pending.len()));
            }
            let end = (fed + next_read(fed).max(1)).min(data.len());
            pending.extend_from_slice(&data[fed..end]);
            fed = end;
            continue;
        };
        assert!(used > 0, "an event that used no input");
        assert!(
            !matches!(events.last(), Some(Owned::End(_))),
            "an event after End"
        );
        if let Owned::Stdout(piece) | Owned::Stderr(piece) = &event {
            assert!(!piece.is_empty(), "an empty stream piece");
        }
        match (events.last_mut(), event) {
            (Some(Owned::Stdout(before)), Owned::Stdout(piece))
            | (Some(Owned::Stderr(before)), Owned::Stderr(piece)) => {
                before.extend_from_slice(&piece);
            }
            (_, event) => events.push(event),
        }
    }
}

/// Decodes `data` as name-value pairs and checks:
///
/// * pairs that decode, encoded again (shortest lengths), decode to the same pairs in at most
///   as many bytes;
/// * [`write_params`] of those pairs is valid records, padded to 8, ending in an empty record,
///   whose contents joined decode to the same pairs, and no pair that fits one record is cut
///   between two.
///
/// # Panics
/// Only when an invariant is violated.
pub fn fastcgi_name_value(data: &[u8]) {
    let Ok(pairs) = decode_name_values(data) else {
        return;
    };
    let mut encoded = Vec::new();
    for (name, value) in &pairs {
        encode_name_value(&mut encoded, name, value);
    }
    assert!(encoded.len() <= data.len(), "re-encoding grew");
    assert_eq!(decode_name_values(&encoded).as_ref(), Ok(&pairs));

    let mut records = Vec::new();
    write_params(
        &mut records,
        1,
        pairs.iter().map(|(n, v)| (n.as_slice(), v.as_slice())),
    );
    let mut joined = Vec::new();
    let mut rest = &records[..];
    let mut last_empty = false;
    while !rest.is_empty() {
        let header = RecordHeader::parse(rest).expect("a whole record header");
        assert_eq!(header.record_type, RecordType::Params);
        let length = usize::from(header.content_length);
        let total = HEADER_LEN + length + usize::from(header.padding_length);
        assert_eq!(total % 8, 0, "a record not padded to 8");
        let content = &rest[HEADER_LEN..HEADER_LEN + length];
        if pairs
            .iter()
            .all(|(n, v)| n.len() + v.len() + 8 <= MAX_CONTENT)
        {
            assert!(
                decode_name_values(content).is_ok(),
                "a pair cut between records"
            );
        }
        joined.extend_from_slice(content);
        last_empty = length == 0;
        rest = &rest[total..];
    }
    assert!(last_empty, "PARAMS not ended by an empty record");
    assert_eq!(decode_name_values(&joined), Ok(pairs));
}

/// Feeds `data` to the CGI head parser whole and in pieces, and checks:
///
/// * whole, byte-by-byte and stepped parsing agree; `end_of_output` agrees with them, and
///   turns a partial head into `Incomplete`;
/// * a complete head used at most `data.len()` bytes, has a status in 100..=599, holds no
///   `Status` or `Transfer-Encoding`, and a local redirect is a path;
/// * the head, written back as CGI output, parses to an equal head of exactly that length;
/// * its response head frames like the proxy's: the same `Content-Length`.
///
/// # Panics
/// Only when an invariant is violated.
pub fn cgi_head(data: &[u8]) {
    let limits = Limits {
        max_head_bytes: 2048,
        max_headers: 32,
    };
    let whole = CgiParser::new(limits).parse(data);
    for step in [1, 1 + data.first().map_or(0, |&b| usize::from(b % 7))] {
        let mut parser = CgiParser::new(limits);
        let mut end = 0;
        let mut piecewise = parser.parse(&data[..0]);
        while end < data.len() && piecewise == Ok(CgiParse::Partial) {
            end = (end + step).min(data.len());
            piecewise = parser.parse(&data[..end]);
        }
        assert_eq!(piecewise, whole, "parsing {step} bytes at a time differs");
    }
    let at_end = CgiParser::new(limits).end_of_output(data);
    match &whole {
        Ok(CgiParse::Partial) => assert_eq!(at_end, Err(crate::cgi::CgiError::Incomplete)),
        other => assert_eq!(&at_end, other),
    }

    let Ok(CgiParse::Complete { head, len }) = whole else {
        return;
    };
    assert!(len > 0 && len <= data.len(), "len {len} out of bounds");
    assert!((100..=599).contains(&head.status));
    for header in &head.headers {
        assert!(!header.name.eq_ignore_ascii_case("status"));
        assert!(!header.name.eq_ignore_ascii_case("transfer-encoding"));
    }
    if let CgiKind::LocalRedirect(path) = &head.kind {
        assert!(path.starts_with('/') && path.bytes().all(|b| b.is_ascii_graphic()));
        assert_eq!(head.status, 200);
    }

    let mut encoded = Vec::new();
    if !matches!(head.kind, CgiKind::LocalRedirect(_)) {
        encoded
            .extend_from_slice(format!("Status: {} {}\r\n", head.status, head.reason).as_bytes());
    }
    for header in &head.headers {
        crate::response::write_header(&mut encoded, &header.name, &header.value);
    }
    encoded.extend_from_slice(b"\n");
    let limits = Limits {
        max_head_bytes: encoded.len(),
        max_headers: 33,
    };
    match CgiParser::new(limits).parse(&encoded) {
        Ok(CgiParse::Complete {
            head: again,
            len: again_len,
        }) => {
            assert_eq!(again, head, "written back, the head parses differently");
            assert_eq!(again_len, encoded.len());
        }
        other => panic!("written back, the head failed to parse: {other:?}"),
    }

    let content_length = head
        .headers
        .iter()
        .find(|header| header.name.eq_ignore_ascii_case("content-length"))
        .map(|header| header.value.clone());
    let response = head.into_response_head();
    assert_eq!(
        response.content_length().is_some(),
        content_length.is_some()
    );
    assert!(response.keep_alive);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_and_invalid_input() {
        let mut records = Vec::new();
        write_stream(&mut records, RecordType::Stdout, 1, b"Status: 200\n\nhi");
        write_stream(&mut records, RecordType::Stderr, 1, b"warn");
        write_stream(&mut records, RecordType::Stdout, 1, b"");
        write_end_request(
            &mut records,
            1,
            crate::fastcgi::EndRequest {
                app_status: 0,
                protocol_status: crate::fastcgi::ProtocolStatus::RequestComplete,
            },
        );
        fastcgi_response(&records);
        fastcgi_response(b"");
        fastcgi_response(b"HTTP/1.1 200 OK\r\n\r\n");
        fastcgi_response(&[1; 300]);
        fastcgi_name_value(b"\x0b\x02SERVER_PORT80\x80\x00\x00\x01\x00A");
        fastcgi_name_value(&[0x80; 9]);
        cgi_head(b"Status: 404 Nope\r\nLocation: /x\r\nContent-Length: 3\n\nabc");
        cgi_head(b"Location: /local?q\n\n");
        cgi_head(b"Location: http://h/\nX: \xff\n\n");
        cgi_head(b"");
        cgi_head(&[b'\n'; 3]);
    }

    #[test]
    fn a_feed_that_stops_inside_a_record_leaves_no_bytes_unread() {
        // A partial header is left to the caller; the rest of a record is the reader's.
        let (events, outcome) = feed(b"\x01\x06\x00\x01\x00\x04\x00\x00ab", &mut |_| 3);
        assert_eq!(events, vec![Owned::Stdout(b"ab".to_vec())]);
        assert_eq!(outcome, Ok(0));
        let (_, outcome) = feed(b"\x01\x06\x00", &mut |_| 1);
        assert_eq!(outcome, Ok(3));
    }
}
