//! Chunked framing of a body ampd relays (RFC 9112 §7.1): upstream responses of unknown
//! length to the client, and chunked request bodies to the upstream.
//!
//! Owns the bytes around each chunk. Must not decode (`ChunkedDecoder` does) or buffer data:
//! the caller writes `write_chunk_header`, the data, then `CHUNK_END`, and `LAST_CHUNK` once.

/// The last chunk and the empty trailer section: the end of a chunked body. ampd sends no
/// trailer fields (it drops those it receives, which RFC 9110 §6.5.1 allows).
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The CRLF that follows each chunk's data.
pub const CHUNK_END: &[u8] = b"\r\n";

/// Appends the size line of a chunk of `len` bytes: lowercase hex, no extensions, CRLF.
///
/// A `len` of zero appends nothing: a zero-size chunk is the last chunk, so writing one for an
/// empty read would end the body early and let whatever follows be read as a new message.
pub fn write_chunk_header(len: usize, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    if len == 0 {
        return;
    }
    let mut digits = [0u8; 2 * std::mem::size_of::<usize>()];
    let mut at = digits.len();
    let mut rest = len;
    while rest > 0 {
        at -= 1;
        digits[at] = HEX[rest & 0xf];
        rest >>= 4;
    }
    out.extend_from_slice(&digits[at..]);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::chunked::ChunkedDecoder;

    #[test]
    fn size_lines_are_lowercase_hex() {
        let mut out = Vec::new();
        write_chunk_header(1, &mut out);
        write_chunk_header(255, &mut out);
        write_chunk_header(4096, &mut out);
        assert_eq!(out, b"1\r\nff\r\n1000\r\n");
        let mut out = Vec::new();
        write_chunk_header(usize::MAX, &mut out);
        assert_eq!(out, format!("{:x}\r\n", usize::MAX).as_bytes());
    }

    #[test]
    fn an_empty_piece_writes_no_chunk() {
        let mut out = b"x".to_vec();
        write_chunk_header(0, &mut out);
        assert_eq!(out, b"x");
    }

    proptest! {
        /// Pieces framed with these helpers decode, with ampd's own strict decoder, to the
        /// same bytes and end exactly at the last chunk.
        #[test]
        fn framed_pieces_decode_to_the_same_body(
            pieces in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..8),
        ) {
            let mut wire = Vec::new();
            for piece in &pieces {
                write_chunk_header(piece.len(), &mut wire);
                if !piece.is_empty() {
                    wire.extend_from_slice(piece);
                    wire.extend_from_slice(CHUNK_END);
                }
            }
            wire.extend_from_slice(LAST_CHUNK);
            wire.extend_from_slice(b"NEXT");
            let mut decoder = ChunkedDecoder::new();
            let mut body = Vec::new();
            let progress = decoder
                .feed(&wire, &mut |data| body.extend_from_slice(data))
                .expect("well-formed chunked body");
            prop_assert!(decoder.is_done());
            prop_assert_eq!(progress.consumed, wire.len() - 4);
            prop_assert_eq!(body, pieces.concat());
        }
    }
}
