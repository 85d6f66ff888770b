//! An HTTP/1 response head, as ampd's handlers write it → the `:status` and fields of a
//! HEADERS frame (RFC 9113 §8.2.2, §8.3.2).
//!
//! Owns the status line and field lines of ampd's own output, and which fields HTTP/2 must
//! not carry. Must not touch HPACK: the Connection encodes what this yields.

use memchr::memmem;

use super::is_connection_specific;
use crate::token::{is_tchar, list_elements, trim_ows};

/// A response head as HEADERS carries it: `:status` and the fields, names in lower case, in
/// the order the HTTP/1 head had them, connection-specific ones left out. Kept and reused by
/// the server (one per connection), so a response costs no allocation per field.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ResponseFields {
    pub status: u16,
    /// Names (lower-cased) and values, back to back.
    text: Vec<u8>,
    /// `[name start, name end, value start, value end]` in `text`.
    spans: Vec<[u32; 4]>,
}

impl ResponseFields {
    /// Read an HTTP/1 response head (`HTTP/1.1 200 OK\r\n...\r\n\r\n`, as ampd wrote it) into
    /// `self`, replacing what it held. Returns `None` when `head` is not a complete head.
    pub fn from_http1(&mut self, head: &[u8]) -> Option<()> {
        self.status = 0;
        self.text.clear();
        self.spans.clear();
        let end = memmem::find(head, b"\r\n\r\n")?;
        let head = &head[..end + 2];
        let line_end = memchr::memchr(b'\n', head)?;
        let status = parse_status_line(trim_cr(&head[..line_end]))?;
        // One pass over the field lines. Fields a `Connection` field names are hop-by-hop too
        // (RFC 9110 §7.6.1); ampd's own heads name none but `close` / `keep-alive`, so those
        // are dropped afterwards, only when some head names others (a proxied one may).
        let mut names_fields = false;
        let mut rest = &head[line_end + 1..];
        while let Some(at) = memchr::memchr(b'\n', rest) {
            let line = trim_cr(&rest[..at]);
            rest = &rest[at + 1..];
            let colon = memchr::memchr(b':', line)?;
            let (name, value) = (&line[..colon], trim_ows(&line[colon + 1..]));
            if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
                return None;
            }
            let name_start = self.text.len();
            self.text.extend(name.iter().map(u8::to_ascii_lowercase));
            let lower = &self.text[name_start..];
            if is_connection_specific(lower) {
                if lower == b"connection" {
                    names_fields |= list_elements(value).any(|option| {
                        !option.eq_ignore_ascii_case(b"close")
                            && !option.eq_ignore_ascii_case(b"keep-alive")
                    });
                }
                self.text.truncate(name_start);
                continue;
            }
            self.text.extend_from_slice(value);
            self.push_span(name_start, name.len(), value.len());
        }
        if names_fields {
            let text = &self.text;
            self.spans.retain(|span| {
                let name = &text[span[0] as usize..span[1] as usize];
                !connection_options(head).any(|option| option.eq_ignore_ascii_case(name))
            });
        }
        self.status = status;
        Some(())
    }

    /// Add a field (name in lower case).
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        let name_start = self.text.len();
        self.text.extend_from_slice(name);
        self.text.extend_from_slice(value);
        self.push_span(name_start, name.len(), value.len());
    }

    /// The fields, in order (`:status` is not among them).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.spans.iter().map(|span| {
            (
                &self.text[span[0] as usize..span[1] as usize],
                &self.text[span[2] as usize..span[3] as usize],
            )
        })
    }

    /// Records the field whose name starts at `name_start` in `text` and whose value follows
    /// it. A head is far below 4 GiB (ampd's heads are a few hundred bytes), so `u32` spans.
    fn push_span(&mut self, name_start: usize, name_len: usize, value_len: usize) {
        let at = |offset: usize| u32::try_from(offset).unwrap_or(u32::MAX);
        let name_end = name_start + name_len;
        self.spans.push([
            at(name_start),
            at(name_end),
            at(name_end),
            at(name_end + value_len),
        ]);
    }
}

/// The status of an HTTP/1 response head (its first line), without reading its fields.
pub(crate) fn status_of_http1(head: &[u8]) -> Option<u16> {
    let line_end = memchr::memchr(b'\n', head)?;
    parse_status_line(trim_cr(&head[..line_end]))
}

/// `HTTP/1.x SP 3DIGIT [SP reason]`: the status code, 100 to 999.
fn parse_status_line(line: &[u8]) -> Option<u16> {
    let rest = line.strip_prefix(b"HTTP/1.")?;
    let (&[minor, b' ', hundreds, tens, units], after) = rest.split_first_chunk::<5>()? else {
        return None;
    };
    let digits = [hundreds, tens, units];
    if !minor.is_ascii_digit()
        || !digits.iter().all(u8::is_ascii_digit)
        || !(after.is_empty() || after[0] == b' ')
        || hundreds == b'0'
    {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0u16, |status, &d| status * 10 + u16::from(d - b'0')),
    )
}

/// The options of every `Connection` field of `head` (its field lines).
fn connection_options(head: &[u8]) -> impl Iterator<Item = &[u8]> {
    head.split(|&b| b == b'\n')
        .skip(1)
        .filter_map(|line| {
            let line = trim_cr(line);
            let colon = memchr::memchr(b':', line)?;
            line[..colon]
                .eq_ignore_ascii_case(b"connection")
                .then(|| &line[colon + 1..])
        })
        .flat_map(list_elements)
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::ResponseFields;

    #[test]
    fn buffers_are_reused_from_head_to_head() {
        let head =
            b"HTTP/1.1 200 OK\r\nDate: Mon, 21 Oct 2013 20:13:21 GMT\r\nServer: ampd\r\n\r\n";
        let mut fields = ResponseFields::default();
        fields.from_http1(head).unwrap();
        let (text, spans) = (fields.text.as_ptr(), fields.spans.as_ptr());
        for _ in 0..10 {
            fields.from_http1(head).unwrap();
            assert_eq!(fields.text.as_ptr(), text);
            assert_eq!(fields.spans.as_ptr(), spans);
        }
    }
}
