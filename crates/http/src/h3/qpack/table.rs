//! QPACK's dynamic table (RFC 9204 §3.2) as the decoder keeps it: entries by absolute index
//! (§3.2.4), the capacity the encoder set, eviction of the oldest entries.
//!
//! Owns the entries and their size accounting. Must not know the instructions that change
//! the table (`decoder.rs`) or how field lines refer to it.

use std::collections::VecDeque;

/// What an entry costs beyond its name and value (§3.2.1, as in HPACK).
pub(super) const ENTRY_OVERHEAD: usize = 32;

/// An entry's name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

#[derive(Debug, Default)]
pub(super) struct DynamicTable {
    /// Oldest first: `entries[0]` has absolute index `evicted`.
    entries: VecDeque<Entry>,
    evicted: u64,
    size: usize,
    capacity: usize,
}

/// An insertion the table cannot hold: larger than its capacity (§3.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TooLarge;

impl DynamicTable {
    /// How many entries were ever inserted: the Insert Count of §2.1.
    pub(super) fn insert_count(&self) -> u64 {
        self.evicted + self.entries.len() as u64
    }

    /// The entry with absolute index `index`, unless it was evicted or not yet inserted.
    pub(super) fn get(&self, index: u64) -> Option<(&[u8], &[u8])> {
        let offset = usize::try_from(index.checked_sub(self.evicted)?).ok()?;
        self.entries
            .get(offset)
            .map(|(name, value)| (&name[..], &value[..]))
    }

    /// Sets the capacity (the caller checked it against the maximum it advertised), evicting
    /// what no longer fits.
    pub(super) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.evict_to(capacity);
    }

    /// Inserts an entry, evicting the oldest ones to make room.
    ///
    /// # Errors
    /// `TooLarge` when the entry alone is larger than the capacity (§3.2.2).
    pub(super) fn insert(&mut self, name: &[u8], value: &[u8]) -> Result<(), TooLarge> {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.capacity {
            return Err(TooLarge);
        }
        self.evict_to(self.capacity - size);
        self.entries.push_back((name.into(), value.into()));
        self.size += size;
        Ok(())
    }

    fn evict_to(&mut self, size: usize) {
        while self.size > size {
            let Some((name, value)) = self.entries.pop_front() else {
                break;
            };
            self.size -= name.len() + value.len() + ENTRY_OVERHEAD;
            self.evicted += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_their_absolute_index_and_the_oldest_go_first() {
        let mut table = DynamicTable::default();
        table.set_capacity(100);
        table.insert(b"a", b"1").unwrap(); // 34 octets
        table.insert(b"b", b"2").unwrap();
        assert_eq!(table.insert_count(), 2);
        assert_eq!(table.get(0), Some((&b"a"[..], &b"1"[..])));
        table.insert(b"c", b"3").unwrap(); // 102 > 100: "a" goes
        assert_eq!(table.insert_count(), 3);
        assert_eq!(table.get(0), None);
        assert_eq!(table.get(2), Some((&b"c"[..], &b"3"[..])));
        assert_eq!(table.get(3), None);
        table.set_capacity(40);
        assert_eq!(table.get(1), None);
        assert_eq!(table.get(2), Some((&b"c"[..], &b"3"[..])));
        assert_eq!(table.insert(&[b'x'; 10], b""), Err(TooLarge));
        table.set_capacity(0);
        assert_eq!(table.get(2), None);
        assert_eq!(table.insert_count(), 3);
    }
}
