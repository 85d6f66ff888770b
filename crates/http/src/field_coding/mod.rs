//! The primitives HPACK (RFC 7541) and QPACK (RFC 9204) share: integers with an N-bit prefix
//! (RFC 7541 §5.1, which RFC 9204 §4.1.1 reuses), string literals with an H flag above such a
//! prefix (§5.2; QPACK §4.1.2 moves the prefix), and the Huffman code of Appendix B.
//!
//! Owns the coding of one integer or one string. Must not know about tables, field lines or
//! which protocol a block belongs to (`h2::hpack`, `h3::qpack`).

pub(crate) mod huffman;
mod huffman_table;
pub(crate) mod integer;
pub(crate) mod string;

/// Why an integer or a string cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CodingError {
    /// The block ends inside it.
    Truncated,
    /// An integer past `integer::MAX_INTEGER`.
    IntegerOverflow,
    /// A Huffman string holds EOS, or its padding is over 7 bits or not all ones (§5.2).
    BadHuffman,
}
