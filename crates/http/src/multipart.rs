//! `multipart/byteranges` framing for 206 responses with several ranges (RFC 9110 §14.6).
//!
//! Owns the part heads, the closing delimiter and the exact body length, so Content-Length is
//! known before the first byte is sent and the file data itself can go out with sendfile
//! between the part heads. Must not read file data or choose the boundary (the caller
//! generates one that cannot occur in the content).

use crate::range::ByteRange;
use crate::response::{decimal_len, write_decimal};

/// The framing of one multipart/byteranges body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Multipart {
    boundary: String,
    content_type: String,
    ranges: Vec<ByteRange>,
    total_len: u64,
}

impl Multipart {
    /// Framing for `ranges` of a representation of `total_len` bytes and type `content_type`
    /// (an empty type omits the parts' Content-Type line). `boundary` must be 1..=70 `bchars`
    /// (RFC 2046 §5.1.1).
    #[must_use]
    pub fn new(
        boundary: String,
        content_type: &str,
        ranges: &[ByteRange],
        total_len: u64,
    ) -> Multipart {
        debug_assert!(!boundary.is_empty() && boundary.len() <= 70);
        Multipart {
            boundary,
            content_type: content_type.to_owned(),
            ranges: ranges.to_vec(),
            total_len,
        }
    }

    /// The response's Content-Type value.
    #[must_use]
    pub fn content_type_value(&self) -> String {
        format!("multipart/byteranges; boundary={}", self.boundary)
    }

    /// The ranges, in the order their parts are sent.
    #[must_use]
    pub fn ranges(&self) -> &[ByteRange] {
        &self.ranges
    }

    /// The bytes sent before range `i`'s data: the delimiter and the part's header fields.
    ///
    /// # Panics
    /// If `i` is not below the number of ranges.
    #[must_use]
    pub fn part_head(&self, i: usize) -> Vec<u8> {
        let range = self.ranges[i];
        let mut head = Vec::with_capacity(self.part_head_len(range) as usize);
        head.extend_from_slice(b"\r\n--");
        head.extend_from_slice(self.boundary.as_bytes());
        head.extend_from_slice(b"\r\n");
        if !self.content_type.is_empty() {
            head.extend_from_slice(b"Content-Type: ");
            head.extend_from_slice(self.content_type.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"Content-Range: bytes ");
        write_decimal(&mut head, range.start);
        head.push(b'-');
        write_decimal(&mut head, range.end);
        head.push(b'/');
        write_decimal(&mut head, self.total_len);
        head.extend_from_slice(b"\r\n\r\n");
        head
    }

    /// The closing delimiter sent after the last part's data.
    #[must_use]
    pub fn trailer(&self) -> Vec<u8> {
        let mut trailer = Vec::with_capacity(self.boundary.len() + 8);
        trailer.extend_from_slice(b"\r\n--");
        trailer.extend_from_slice(self.boundary.as_bytes());
        trailer.extend_from_slice(b"--\r\n");
        trailer
    }

    /// The exact body length: every part head, every range's data, and the trailer, computed
    /// without formatting anything.
    #[must_use]
    pub fn body_len(&self) -> u64 {
        let parts: u64 = self
            .ranges
            .iter()
            .map(|&range| self.part_head_len(range) + range.len())
            .sum();
        parts + self.boundary.len() as u64 + 8
    }

    fn part_head_len(&self, range: ByteRange) -> u64 {
        let content_type = if self.content_type.is_empty() {
            0
        } else {
            "Content-Type: \r\n".len() + self.content_type.len()
        };
        let content_range = "Content-Range: bytes -/\r\n\r\n".len()
            + decimal_len(range.start)
            + decimal_len(range.end)
            + decimal_len(self.total_len);
        ("\r\n--\r\n".len() + self.boundary.len() + content_type + content_range) as u64
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn body(multipart: &Multipart, data: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        for (i, range) in multipart.ranges().iter().enumerate() {
            body.extend_from_slice(&multipart.part_head(i));
            body.extend_from_slice(&data[range.start as usize..=range.end as usize]);
        }
        body.extend_from_slice(&multipart.trailer());
        body
    }

    /// The shape of RFC 9110 §14.6's example.
    #[test]
    fn rfc_shaped_body() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let ranges = [
            ByteRange { start: 0, end: 1 },
            ByteRange {
                start: 998,
                end: 999,
            },
        ];
        let multipart = Multipart::new("THIS_STRING_SEPARATES".into(), "text/html", &ranges, 1000);
        assert_eq!(
            multipart.content_type_value(),
            "multipart/byteranges; boundary=THIS_STRING_SEPARATES"
        );
        let body = body(&multipart, &data);
        let expected = [
            &b"\r\n--THIS_STRING_SEPARATES\r\nContent-Type: text/html\r\nContent-Range: bytes 0-1/1000\r\n\r\n"[..],
            &data[0..2],
            b"\r\n--THIS_STRING_SEPARATES\r\nContent-Type: text/html\r\nContent-Range: bytes 998-999/1000\r\n\r\n",
            &data[998..1000],
            b"\r\n--THIS_STRING_SEPARATES--\r\n",
        ]
        .concat();
        assert_eq!(body, expected);
        assert_eq!(multipart.body_len(), body.len() as u64);
    }

    #[test]
    fn without_content_type() {
        let multipart = Multipart::new("b".into(), "", &[ByteRange { start: 5, end: 9 }], 10);
        assert_eq!(
            multipart.part_head(0),
            b"\r\n--b\r\nContent-Range: bytes 5-9/10\r\n\r\n"
        );
        assert_eq!(
            multipart.body_len(),
            multipart.part_head(0).len() as u64 + 5 + 9
        );
    }

    proptest! {
        #[test]
        fn body_len_is_exact(
            cuts in prop::collection::btree_set(0u64..2000, 2..12),
            boundary in "[0-9A-Za-z'()+_,./:=?-]{1,70}",
            content_type in "(|[a-z]{1,10}/[a-z0-9.+-]{1,20})",
        ) {
            let cuts: Vec<u64> = cuts.into_iter().collect();
            let ranges: Vec<ByteRange> = cuts
                .chunks_exact(2)
                .map(|pair| ByteRange { start: pair[0], end: pair[1] })
                .collect();
            let data = vec![b'x'; 2000];
            let multipart = Multipart::new(boundary, &content_type, &ranges, 2000);
            prop_assert_eq!(multipart.body_len(), body(&multipart, &data).len() as u64);
        }
    }
}
