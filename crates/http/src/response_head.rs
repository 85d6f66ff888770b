//! A response head as data: the status and the end-to-end fields, before any protocol's
//! framing (RFC 9110 §6.3, §15). HTTP/1 writes it as a status line and field lines
//! (`write_http1`), HTTP/2 HPACK-encodes it (`h2::Connection::write_head`): one structure,
//! serialised once per protocol, never parsed back.
//!
//! Owns: the field list's storage (names and values back to back in one buffer, spans beside
//! it: a head reused from response to response costs no allocation per field). Must not hold
//! connection-specific fields (`Connection`, `Keep-Alive`, `Transfer-Encoding`, …, RFC 9110
//! §7.6.1): the HTTP/1 serialiser decides those from persistence and framing; HTTP/2 has none
//! (RFC 9113 §8.2.2).

use crate::response::{reason, write_decimal};

/// A response's status and fields, in the order they are sent. Names keep the case they were
/// pushed with (HTTP/1 sends them so; HTTP/2 lower-cases them as it encodes).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// Names and values, back to back.
    text: Vec<u8>,
    /// `[name start, name end (= value start), value end]` in `text`. A head is far below
    /// 4 GiB (ampd's are a few hundred bytes, an upstream's at most its head limit).
    spans: Vec<[u32; 3]>,
}

impl Head {
    #[must_use]
    pub fn new(status: u16) -> Head {
        Head {
            status,
            ..Head::default()
        }
    }

    /// Empty the fields and set `status`, keeping the memory.
    pub fn reset(&mut self, status: u16) {
        self.status = status;
        self.text.clear();
        self.spans.clear();
    }

    /// Add a field. The caller guarantees `name` is a token and `value` holds no CR or LF, as
    /// for `response::write_header` (values made from request data are checked first).
    pub fn push(&mut self, name: &str, value: &[u8]) {
        debug_assert!(!value.contains(&b'\r') && !value.contains(&b'\n'));
        let start = self.text.len();
        self.text.extend_from_slice(name.as_bytes());
        let name_end = self.text.len();
        self.text.extend_from_slice(value);
        self.push_span(start, name_end);
    }

    /// Add a field whose value is `n` in decimal (`Content-Length`), formatted in place.
    pub fn push_decimal(&mut self, name: &str, n: u64) {
        self.push_with(name, |value| write_decimal(value, n));
    }

    /// Add a field whose value `write` appends where it is kept (`max-age=60`, a
    /// `Content-Range`): formatted in place, without a buffer of its own. Same rules for the
    /// value as `push`.
    pub fn push_with(&mut self, name: &str, write: impl FnOnce(&mut Vec<u8>)) {
        let start = self.text.len();
        self.text.extend_from_slice(name.as_bytes());
        let name_end = self.text.len();
        write(&mut self.text);
        self.push_span(start, name_end);
    }

    /// Add every field of `other`, in order (a cached head's fields under this head's status).
    pub fn extend(&mut self, other: &Head) {
        let base = u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        self.text.extend_from_slice(&other.text);
        self.spans.extend(
            other
                .spans
                .iter()
                .map(|span| span.map(|at| at.saturating_add(base))),
        );
    }

    /// Add the fields of `lines`, `Name: value\r\n` lines as the configuration renders a
    /// location's added fields once at load (well-formed by construction: a line without a
    /// colon is skipped).
    pub fn push_lines(&mut self, lines: &[u8]) {
        for line in lines.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let value = &line[colon + 1..];
            let value = value.strip_prefix(b" ").unwrap_or(value);
            let start = self.text.len();
            self.text.extend_from_slice(&line[..colon]);
            let name_end = self.text.len();
            self.text.extend_from_slice(value);
            self.push_span(start, name_end);
        }
    }

    /// Drop every field named `name` (case-insensitive), keeping the others in order; the
    /// kept fields' bytes move down so the head stays as compact as if they were pushed alone
    /// (`http1_len` counts them).
    pub fn remove(&mut self, name: &str) {
        let mut to = 0usize;
        let mut kept = 0usize;
        for index in 0..self.spans.len() {
            let [start, name_end, end] = self.spans[index].map(|at| at as usize);
            if self.text[start..name_end].eq_ignore_ascii_case(name.as_bytes()) {
                continue;
            }
            self.text.copy_within(start..end, to);
            let at = |offset: usize| u32::try_from(offset).unwrap_or(u32::MAX);
            self.spans[kept] = [at(to), at(to + name_end - start), at(to + end - start)];
            to += end - start;
            kept += 1;
        }
        self.spans.truncate(kept);
        self.text.truncate(to);
    }

    /// The fields, in order: `(name, value)`.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.spans.iter().map(|&[start, name_end, end]| {
            (
                &self.text[start as usize..name_end as usize],
                &self.text[name_end as usize..end as usize],
            )
        })
    }

    /// The value of the first field named `name` (case-insensitive).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields()
            .find(|(field, _)| field.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, value)| value)
    }

    /// How many fields the head holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Append the status line and the field lines (without the blank line that ends a head:
    /// the HTTP/1 connection adds its own fields first). `HTTP/1.1` whatever the request's
    /// minor version (RFC 9110 §6.2).
    pub fn write_http1(&self, out: &mut Vec<u8>) {
        out.reserve(self.http1_len());
        crate::response::write_status_line(out, self.status);
        for (name, value) in self.fields() {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }

    /// The bytes `write_http1` appends.
    #[must_use]
    pub fn http1_len(&self) -> usize {
        let status = self.status % 1000;
        let line = b"HTTP/1.1 000 \r\n".len() + reason(status).len();
        line + self.text.len() + 4 * self.spans.len()
    }

    fn push_span(&mut self, start: usize, name_end: usize) {
        let at = |offset: usize| u32::try_from(offset).unwrap_or(u32::MAX);
        self.spans
            .push([at(start), at(name_end), at(self.text.len())]);
    }
}

#[cfg(test)]
mod tests {
    use super::Head;

    #[test]
    fn a_head_writes_as_http1_and_reuses_its_memory() {
        let mut head = Head::new(404);
        head.push("Server", b"ampd");
        head.push_decimal("Content-Length", 1234);
        head.push_lines(b"X-A: 1\r\nX-B: two words\r\n");
        let mut out = Vec::new();
        head.write_http1(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 404 Not Found\r\nServer: ampd\r\nContent-Length: 1234\r\n\
              X-A: 1\r\nX-B: two words\r\n"
        );
        assert_eq!(head.http1_len(), out.len());
        assert_eq!(head.get("content-length"), Some(&b"1234"[..]));
        assert_eq!(head.len(), 4);

        let (text, spans) = (head.text.as_ptr(), head.spans.as_ptr());
        for _ in 0..10 {
            head.reset(200);
            head.push("Server", b"ampd");
            head.push_decimal("Content-Length", 1);
            assert_eq!(head.text.as_ptr(), text);
            assert_eq!(head.spans.as_ptr(), spans);
        }
    }

    #[test]
    fn removed_fields_leave_the_others_in_order_and_the_length_right() {
        let mut head = Head::new(200);
        head.push("Server", b"ampd");
        head.push("X-Powered-By", b"PHP");
        head.push("Content-Type", b"text/plain");
        head.push("x-powered-by", b"again");
        head.remove("X-POWERED-BY");
        let mut out = Vec::new();
        head.write_http1(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nServer: ampd\r\nContent-Type: text/plain\r\n"
        );
        assert_eq!(head.http1_len(), out.len());
        head.remove("Server");
        head.push("Server", b"other");
        assert_eq!(head.len(), 2);
        assert_eq!(head.get("server"), Some(&b"other"[..]));
        head.remove("absent");
        assert_eq!(head.len(), 2);
    }

    #[test]
    fn extended_fields_keep_their_order_and_values() {
        let mut cached = Head::new(200);
        cached.push("Content-Type", b"text/html");
        cached.push("ETag", b"\"e\"");
        let mut head = Head::new(200);
        head.push("Server", b"ampd");
        head.extend(&cached);
        head.push("Date", b"now");
        let fields: Vec<_> = head.fields().collect();
        assert_eq!(
            fields,
            [
                (&b"Server"[..], &b"ampd"[..]),
                (b"Content-Type", b"text/html"),
                (b"ETag", b"\"e\""),
                (b"Date", b"now"),
            ]
        );
    }
}
