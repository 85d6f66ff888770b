//! The encoder of one connection's response header blocks (RFC 7541 §6, §7.1).
//!
//! Owns the choice of representation per field and the table size the client allows. Must not
//! know about frames (the caller splits the block into HEADERS and CONTINUATION).
//!
//! The policy: index what repeats on a connection, so a second response sends most of its
//! head as one octet per field; index what differs per response only into free room (evicting
//! for it would push out what repeats); never index credentials and cookies (§7.1.3: an intermediary must not
//! index them either, and a table of secrets invites probing, §7.1.1).

use super::static_table::{self, Match};
use super::table::{DynamicTable, ENTRY_OVERHEAD};
use crate::field_coding::{integer, string};

/// The largest dynamic table this encoder keeps, whatever larger size the client allows. The
/// fields that repeat across a connection's responses (`date`, `server`, `content-type`,
/// `cache-control`, `vary`, ...) fit many times over in the initial 4,096, so more would only
/// cost memory per connection.
const MAX_TABLE_SIZE: usize = 4_096;

/// The initial table size both ends assume (RFC 7541 §4.2, RFC 9113 §6.5.2).
const INITIAL_TABLE_SIZE: usize = 4_096;

/// How a field is sent when it is not found whole in a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Literal {
    /// Added to the table: the next response sends it as an index.
    Indexed,
    /// Sent as is and not added (§6.2.2).
    NotIndexed,
    /// Sent as is, and no intermediary may index it (§6.2.3).
    NeverIndexed,
}

/// Encodes our response blocks for one connection.
#[derive(Debug)]
pub struct Encoder {
    table: DynamicTable,
    /// The smallest size set since the last block, when the size changed: §4.2 wants it
    /// signalled first when the size went down and up again between blocks.
    smallest_pending: Option<usize>,
    /// Counts the changes to the table's contents or size: two blocks encoded at the same
    /// generation from the same fields are the same bytes (`h2::head_block` relies on it).
    generation: u64,
}

impl Encoder {
    /// An encoder with the initial table size (4,096, RFC 7541 §4.2 / RFC 9113 §6.5.2).
    #[must_use]
    pub fn new() -> Encoder {
        Encoder {
            table: DynamicTable::new(INITIAL_TABLE_SIZE),
            smallest_pending: None,
            generation: 0,
        }
    }

    /// The client's SETTINGS_HEADER_TABLE_SIZE: the table shrinks (or may grow, up to a bound
    /// of our own) and the next block starts with a size update (§6.3).
    pub fn set_max_table_size(&mut self, size: usize) {
        let size = size.min(MAX_TABLE_SIZE);
        if size == self.table.max_size() && self.smallest_pending.is_none() {
            return;
        }
        self.table.set_max_size(size);
        self.generation += 1;
        self.smallest_pending = Some(self.smallest_pending.map_or(size, |s| s.min(size)));
    }

    /// Start a block: a pending table size update goes first.
    pub fn begin(&mut self, out: &mut Vec<u8>) {
        let Some(smallest) = self.smallest_pending.take() else {
            return;
        };
        let size = self.table.max_size();
        if smallest < size {
            integer::encode(smallest, 5, 0x20, out);
        }
        integer::encode(size, 5, 0x20, out);
    }

    /// Append one field (`name` in lower case). A field in the tables is sent as an index;
    /// others are literals, added to the dynamic table unless `never_index` (credentials,
    /// cookies: RFC 7541 §7.1.3) or larger than the table.
    pub fn field(&mut self, name: &[u8], value: &[u8], never_index: bool, out: &mut Vec<u8>) {
        let static_match = static_table::find(name, value);
        if let Match::Field(index) = static_match {
            integer::encode(index, 7, 0x80, out);
            return;
        }
        let literal = if never_index || is_sensitive(name) {
            Literal::NeverIndexed
        } else if name.len() + value.len() + ENTRY_OVERHEAD > self.table.max_size()
            || (differs_per_response(name)
                && name.len() + value.len() + ENTRY_OVERHEAD
                    > self.table.max_size() - self.table.size())
        {
            // A per-resource value goes into the table only while it has room to spare: a
            // connection that asks for the same resource again then gets it in one octet,
            // and on one that asks for many it never evicts what repeats.
            Literal::NotIndexed
        } else {
            Literal::Indexed
        };
        let mut name_index = match static_match {
            Match::Name(index) => index,
            Match::None | Match::Field(_) => 0,
        };
        if literal == Literal::Indexed {
            for (position, (entry_name, entry_value)) in self.table.iter().enumerate() {
                if entry_name == name {
                    let index = static_table::LEN + 1 + position;
                    if entry_value == value {
                        integer::encode(index, 7, 0x80, out);
                        return;
                    }
                    if name_index == 0 {
                        name_index = index;
                    }
                }
            }
        }
        match literal {
            Literal::Indexed => integer::encode(name_index, 6, 0x40, out),
            Literal::NotIndexed => integer::encode(name_index, 4, 0x00, out),
            Literal::NeverIndexed => integer::encode(name_index, 4, 0x10, out),
        }
        if name_index == 0 {
            string::encode(name, 7, 0, out);
        }
        string::encode(value, 7, 0, out);
        if literal == Literal::Indexed {
            self.table.insert(name, value);
            self.generation += 1;
        }
    }

    /// The table's generation: it changes whenever a field is added or the size changes.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the next block starts with a table size update (`begin` writes it).
    #[must_use]
    pub fn has_pending_size_update(&self) -> bool {
        self.smallest_pending.is_some()
    }

    /// The dynamic table's size as §4.1 counts it.
    #[cfg(test)]
    pub(crate) fn table_size(&self) -> usize {
        self.table.size()
    }
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder::new()
    }
}

/// Credentials and cookies: never indexed, whatever the caller says (§7.1.3).
fn is_sensitive(name: &[u8]) -> bool {
    matches!(
        name,
        b"set-cookie" | b"cookie" | b"authorization" | b"proxy-authorization"
    )
}

/// Fields whose values are specific to one resource or one instant: a table entry for them
/// would rarely be used again and would evict entries that are.
fn differs_per_response(name: &[u8]) -> bool {
    matches!(
        name,
        b"content-length"
            | b"content-range"
            | b"etag"
            | b"last-modified"
            | b"expires"
            | b"age"
            | b"location"
            | b"content-disposition"
    )
}
