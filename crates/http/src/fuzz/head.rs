//! The shared head reader on arbitrary bytes (`head`), under both line-end policies.

use crate::head::{field_line, Fields, HeadError, HeadReader, LineEnds};

/// What reading `data` as field lines gives: the fields handed out, then the outcome.
type Read = (Vec<(String, Vec<u8>)>, Result<Fields, HeadError>);

fn read(data: &[u8], ends: LineEnds, step: usize) -> Read {
    let mut reader = HeadReader::new(1024, 16, ends);
    let mut fields = Vec::new();
    let mut end = 0;
    loop {
        end = (end + step).min(data.len());
        let outcome = reader.on_field_line(&data[..end], |name, value| {
            fields.push((name.to_owned(), value.to_vec()));
            Ok::<(), HeadError>(())
        });
        if end == data.len() || !matches!(outcome, Ok(Fields::Partial)) {
            return (fields, outcome);
        }
    }
}

/// Feeds `data` to the shared head reader as field lines and checks:
///
/// * whole and piecewise reading agree, field by field, under each policy;
/// * what the CRLF-only reader accepts the LF-accepting one accepts the same;
/// * a complete head ends in LF within `data`, and every field handed out is a token name and
///   a value that reads back the same as a line of its own;
/// * the limits hold (at most 16 fields, the head within 1024 bytes).
///
/// # Panics
/// Only when an invariant is violated.
pub fn head_reader(data: &[u8]) {
    let step = 1 + data.first().map_or(0, |&b| usize::from(b % 7));
    let mut results = Vec::new();
    for ends in [LineEnds::CrlfOnly, LineEnds::LfAccepted] {
        let whole = read(data, ends, data.len().max(1));
        assert_eq!(read(data, ends, step), whole, "piecewise read differs");
        let (fields, outcome) = &whole;
        assert!(fields.len() <= 16, "{} fields over the limit", fields.len());
        if let Ok(Fields::Complete { len }) = outcome {
            assert!(
                *len <= data.len() && *len <= 1024,
                "len {len} out of bounds"
            );
            assert_eq!(data[len - 1], b'\n');
        }
        for (name, value) in fields {
            let mut line = name.as_bytes().to_vec();
            line.extend_from_slice(b": ");
            line.extend_from_slice(value);
            assert_eq!(
                field_line(&line),
                Ok((name.as_str(), &value[..])),
                "a field does not read back"
            );
        }
        results.push(whole);
    }
    if let (_, Ok(Fields::Complete { .. })) = &results[0] {
        assert_eq!(
            results[0], results[1],
            "CRLF-only and LF-accepting disagree"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::head_reader;

    #[test]
    fn accepts_valid_and_invalid_input() {
        head_reader(b"Host: a\r\nX: \x80\r\n\r\nbody");
        head_reader(b"Host: a\nX : b\n\n");
        head_reader(b" folded\r\n\r\n");
        head_reader(b"");
        head_reader(&[b'a'; 2000]);
        head_reader(&b"A: 1\r\n".repeat(20));
    }
}
