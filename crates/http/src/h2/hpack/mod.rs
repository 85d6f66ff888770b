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

/// What decoding a block found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// The decoded list's size as RFC 9113 §6.5.2 counts it (name + value + 32 per field).
    pub list_size: usize,
    /// The list passed the caller's limit: fields after that point were not handed over.
    pub over_limit: bool,
}

/// Decodes the header blocks of one connection's client.
#[derive(Debug)]
pub struct Decoder {}

impl Decoder {
    /// A decoder whose dynamic table may grow to `max_table_size` (what we advertise as
    /// SETTINGS_HEADER_TABLE_SIZE; 4,096 unless configured).
    #[must_use]
    pub fn new(max_table_size: usize) -> Decoder {
        let _ = max_table_size;
        todo!("hpack helper")
    }

    /// Decode one complete header block, handing each field to `field(name, value)` in order
    /// until the list passes `max_list_size`.
    ///
    /// # Errors
    /// The block is malformed: the connection must end with COMPRESSION_ERROR.
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list_size: usize,
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<Decoded, HpackError> {
        let _ = (block, max_list_size, field);
        todo!("hpack helper")
    }
}

/// Encodes our response blocks for one connection.
#[derive(Debug)]
pub struct Encoder {}

impl Encoder {
    /// An encoder with the initial table size (4,096, RFC 7541 §4.2 / RFC 9113 §6.5.2).
    #[must_use]
    pub fn new() -> Encoder {
        todo!("hpack helper")
    }

    /// The client's SETTINGS_HEADER_TABLE_SIZE: the table shrinks (or may grow, up to a bound
    /// of our own) and the next block starts with a size update (§6.3).
    pub fn set_max_table_size(&mut self, size: usize) {
        let _ = size;
        todo!("hpack helper")
    }

    /// Start a block: a pending table size update goes first.
    pub fn begin(&mut self, out: &mut Vec<u8>) {
        let _ = out;
        todo!("hpack helper")
    }

    /// Append one field (`name` in lower case). A field in the tables is sent as an index;
    /// others are literals, added to the dynamic table unless `never_index` (credentials,
    /// cookies: RFC 7541 §7.1.3) or larger than the table.
    pub fn field(&mut self, name: &[u8], value: &[u8], never_index: bool, out: &mut Vec<u8>) {
        let _ = (name, value, never_index, out);
        todo!("hpack helper")
    }
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new()
    }
}
