//! A response as HEADERS carries it, built field by field (`Connection::write_headers`):
//! `:status` and lower-case fields (RFC 9113 §8.2, §8.3.2). ampd's server writes its heads from
//! `response_head::Head` instead (`Connection::write_head`).
//!
//! Owns the storage of such a field list. Must not touch HPACK: the Connection encodes it.

/// A response head as HEADERS carries it: `:status` and the fields, names in lower case, in
/// the order pushed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ResponseFields {
    pub status: u16,
    /// Names (lower-cased) and values, back to back.
    text: Vec<u8>,
    /// `[name start, name end, value start, value end]` in `text`.
    spans: Vec<[u32; 4]>,
}

impl ResponseFields {
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
