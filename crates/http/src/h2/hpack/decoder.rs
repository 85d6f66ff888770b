//! The decoder of one connection's request header blocks (RFC 7541 §3, §6).
//!
//! Owns the representations of §6 (indexed, the three literals, the table size update) and
//! the list-size limit of RFC 9113 §6.5.2. Must not know what fields mean (`fields.rs`).
//!
//! No allocation per field: raw literals are handed straight out of the block, indexed fields
//! out of the tables, and Huffman strings out of one scratch buffer reused for the life of the
//! connection. Past the caller's limit, fields are decoded but not handed over, so a block that
//! names one large entry thousands of times (the HPACK bomb) costs a few integer reads per
//! reference and no copying, and the table stays in step with the client's.

use super::table::{DynamicTable, ENTRY_OVERHEAD};
use super::{static_table, Decoded, HpackError};
use crate::field_coding::integer;
use crate::field_coding::string::{self, Text};

/// The table size both ends start from (RFC 7541 §4.2, RFC 9113 §6.5.2).
const INITIAL_TABLE_SIZE: usize = 4_096;

/// Decodes the header blocks of one connection's client.
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// The largest size the client may set: until it has our SETTINGS, the larger of the
    /// initial 4,096 and what we advertised; then what we advertised.
    max_table_size: usize,
    /// What we advertised as SETTINGS_HEADER_TABLE_SIZE.
    advertised: usize,
    /// Set when our SETTINGS are acknowledged with the table larger than we advertised: the
    /// client's next block must start by shrinking it (RFC 7541 §4.2).
    shrink_due: bool,
    /// Huffman-decoded strings (and copied names) of the literal being read.
    scratch: Vec<u8>,
}

/// Whether a literal adds its field to the dynamic table (§6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Indexing {
    /// Literal with incremental indexing (§6.2.1).
    Add,
    /// Literal without indexing or never indexed (§6.2.2, §6.2.3): the same to a decoder that
    /// does not forward fields to another hop in HPACK.
    Skip,
}

/// A literal's name: a static table entry's, or a string in the block or the scratch buffer.
/// A dynamic table entry's name is copied to the scratch buffer first, since adding the field
/// may evict that very entry (§4.4).
enum Name {
    Static(&'static [u8]),
    Text(Text),
}

/// The running size of the decoded list against the caller's limit.
struct ListLimit {
    size: usize,
    max: usize,
    over: bool,
}

impl ListLimit {
    /// Counts a field and hands it over while the list is within the limit.
    #[inline]
    fn hand(&mut self, name: &[u8], value: &[u8], field: &mut dyn FnMut(&[u8], &[u8])) {
        self.size = self
            .size
            .saturating_add(name.len() + value.len() + ENTRY_OVERHEAD);
        if self.over {
            return;
        }
        if self.size > self.max {
            self.over = true;
            return;
        }
        field(name, value);
    }
}

impl Decoder {
    /// A decoder for a client we advertise `advertised` as SETTINGS_HEADER_TABLE_SIZE to (4,096
    /// unless configured). Until `settings_acknowledged`, the client may still use the initial
    /// 4,096 (RFC 9113 §6.5.2: a setting applies once its sender has the ACK), so a client
    /// that sends requests before it reads our SETTINGS is decoded as it encoded them.
    #[must_use]
    pub fn new(advertised: usize) -> Decoder {
        Decoder {
            table: DynamicTable::new(INITIAL_TABLE_SIZE),
            max_table_size: advertised.max(INITIAL_TABLE_SIZE),
            advertised,
            shrink_due: false,
            scratch: Vec::new(),
        }
    }

    /// A decoder whose table size both ends already agree on: `size`, from the first block
    /// (the examples of RFC 7541 Appendix C, and the fuzz target, which start there).
    #[must_use]
    pub fn agreed(size: usize) -> Decoder {
        Decoder {
            table: DynamicTable::new(size),
            max_table_size: size,
            advertised: size,
            shrink_due: false,
            scratch: Vec::new(),
        }
    }

    /// The client acknowledged our SETTINGS: from now on the table may not pass what we
    /// advertised, and if it is larger, the client's next block must begin with a size update
    /// that shrinks it.
    pub fn settings_acknowledged(&mut self) {
        self.max_table_size = self.advertised;
        self.shrink_due = self.table.max_size() > self.advertised;
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
        let mut list = ListLimit {
            size: 0,
            max: max_list_size,
            over: false,
        };
        let mut at = 0;
        let mut at_block_start = true;
        if self.shrink_due && block.first().is_none_or(|&first| first & 0xe0 != 0x20) {
            return Err(HpackError::BadTableSizeUpdate);
        }
        while let Some(&first) = block.get(at) {
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = integer::decode(block, &mut at, 7)?;
                let (name, value) = self.entry(index)?;
                list.hand(name, value, field);
            } else if first & 0x40 != 0 {
                self.literal(block, &mut at, 6, Indexing::Add, &mut list, field)?;
            } else if first & 0x20 != 0 {
                // Dynamic table size update (§6.3): only before the block's first field
                // (§4.2), and within what we advertised.
                if !at_block_start {
                    return Err(HpackError::BadTableSizeUpdate);
                }
                let size = integer::decode(block, &mut at, 5)?;
                let size = usize::try_from(size)
                    .ok()
                    .filter(|&size| size <= self.max_table_size)
                    .ok_or(HpackError::BadTableSizeUpdate)?;
                self.table.set_max_size(size);
                self.shrink_due = false;
                continue;
            } else {
                // Without indexing (0000) or never indexed (0001), both with a 4-bit prefix.
                self.literal(block, &mut at, 4, Indexing::Skip, &mut list, field)?;
            }
            at_block_start = false;
        }
        Ok(Decoded {
            list_size: list.size,
            over_limit: list.over,
        })
    }

    /// The field at `index` of the static table then the dynamic one (§2.3.3).
    #[inline]
    fn entry(&self, index: u64) -> Result<(&[u8], &[u8]), HpackError> {
        let position = usize::try_from(index).map_err(|_| HpackError::BadIndex(index))?;
        static_table::get(position)
            .or_else(|| {
                position
                    .checked_sub(static_table::LEN)
                    .and_then(|dynamic| self.table.get(dynamic))
            })
            .ok_or(HpackError::BadIndex(index))
    }

    /// A literal field (§6.2): its name index (0: a literal name follows), then its value.
    fn literal(
        &mut self,
        block: &[u8],
        at: &mut usize,
        prefix_bits: u8,
        indexing: Indexing,
        list: &mut ListLimit,
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        self.scratch.clear();
        let index = integer::decode(block, at, prefix_bits)?;
        let name = if index == 0 {
            Name::Text(string::decode(block, at, 7, &mut self.scratch)?)
        } else {
            let position = usize::try_from(index).map_err(|_| HpackError::BadIndex(index))?;
            if let Some((name, _)) = static_table::get(position) {
                Name::Static(name)
            } else {
                let (name, _) = position
                    .checked_sub(static_table::LEN)
                    .and_then(|dynamic| self.table.get(dynamic))
                    .ok_or(HpackError::BadIndex(index))?;
                self.scratch.extend_from_slice(name);
                Name::Text(Text::Scratch(0..self.scratch.len()))
            }
        };
        let value = string::decode(block, at, 7, &mut self.scratch)?;

        let Decoder { table, scratch, .. } = self;
        let name = match &name {
            Name::Static(name) => name,
            Name::Text(text) => text.get(block, scratch),
        };
        let value = value.get(block, scratch);
        list.hand(name, value, field);
        if indexing == Indexing::Add {
            table.insert(name, value);
        }
        Ok(())
    }

    /// The dynamic table's size as §4.1 counts it.
    pub(crate) fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The dynamic table's entries, newest (index 62) first.
    pub(crate) fn table_entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.table.iter()
    }
}
