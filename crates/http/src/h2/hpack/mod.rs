//! HPACK (RFC 7541): the header compression of HTTP/2.
//!
//! Owns: the static and dynamic tables, integer and string literals, Huffman coding, and one
//! direction's state each: `Decoder` (the client's request blocks) and `Encoder` (our
//! response blocks). Must not touch: what fields mean (`fields.rs`), frames.
//!
//! Limits matter here more than anywhere (the "HPACK bomb", CVE-2016-6581 class): the decoder's
//! table is bounded by the size we advertise, and a block whose decoded list passes the
//! caller's limit stops yielding fields yet is still decoded to the end, so the table stays in
//! step with the client's and the connection survives (RFC 9113 §10.5.1).
//!
//! Files: `decoder.rs`, `encoder.rs` (one direction each), `table.rs` (the dynamic table),
//! `static_table.rs` (Appendix A); integers, string literals and the Huffman code (§5.1, §5.2,
//! Appendix B) are `crate::field_coding`'s, shared with QPACK.

mod decoder;
mod encoder;
mod static_table;
mod table;
#[cfg(test)]
mod tests;

pub use decoder::Decoder;
pub use encoder::Encoder;

/// Why a header block cannot be decoded: a connection error, COMPRESSION_ERROR (RFC 9113
/// §4.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HpackError {
    /// The block ends inside a representation.
    Truncated,
    /// An integer does not fit (RFC 7541 §5.1 allows any length; we stop past 2^32).
    IntegerOverflow,
    /// An index names no entry of the static or dynamic table (§2.3.3).
    BadIndex(u64),
    /// A Huffman string is malformed: EOS inside it, or padding over 7 bits or not all ones
    /// (§5.2).
    BadHuffman,
    /// A dynamic table size update above the limit we advertised, or after the first field
    /// of the block (§4.2, §6.3).
    BadTableSizeUpdate,
}

impl From<crate::field_coding::CodingError> for HpackError {
    fn from(error: crate::field_coding::CodingError) -> HpackError {
        use crate::field_coding::CodingError;
        match error {
            CodingError::Truncated => HpackError::Truncated,
            CodingError::IntegerOverflow => HpackError::IntegerOverflow,
            CodingError::BadHuffman => HpackError::BadHuffman,
        }
    }
}

/// What decoding a block found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// The decoded list's size as RFC 9113 §6.5.2 counts it (name + value + 32 per field).
    pub list_size: usize,
    /// The list passed the caller's limit: fields after that point were not handed over.
    pub over_limit: bool,
}
