//! QPACK (RFC 9204): HTTP/3's field compression.
//!
//! Owns: the static table (`static_table.rs`, Appendix A), the decoder's dynamic table
//! (`table.rs`), the decoder of the peer's sections and encoder stream (`decoder.rs`), and our
//! encoder (`encoder.rs`), which uses the static table and literals only (why: there). Integers,
//! strings and the Huffman code are `crate::field_coding`'s, shared with HPACK.
//! Must not touch: what fields mean, frames, which QUIC stream carries what.

mod decoder;
mod encoder;
mod static_table;
mod table;
#[cfg(test)]
mod tests;

pub use decoder::{Decoder, Section};
pub use encoder::Encoder;

/// The unidirectional stream types of QPACK (§4.2).
pub const ENCODER_STREAM: u64 = 0x02;
pub const DECODER_STREAM: u64 = 0x03;
