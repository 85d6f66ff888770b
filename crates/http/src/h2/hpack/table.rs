//! The dynamic table (RFC 7541 §2.3.2, §4): a FIFO of fields, newest first by index, bounded
//! by a size counted as name + value + 32 octets per entry.
//!
//! Owns insertion, eviction and the size accounting, for the decoder and the encoder alike.
//! Must not know how fields are represented on the wire.
//!
//! The entries' bytes live back to back in one buffer, oldest first, so an insertion costs no
//! allocation once the buffer has grown: eviction only moves `start` forward, and the dead
//! front is dropped when it is as large as the live part (amortised O(1) per byte, and the
//! buffer never holds more than about twice the table's size).

use std::collections::VecDeque;

/// What an entry costs beyond its name and value (§4.1).
pub(super) const ENTRY_OVERHEAD: usize = 32;

/// Where one entry's bytes are in `DynamicTable::bytes`.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Offset of the name, counted from the buffer's start when the entry was inserted, less
    /// what compaction has dropped since (`DynamicTable::dropped`).
    at: usize,
    name_len: usize,
    value_len: usize,
}

impl Entry {
    fn size(&self) -> usize {
        self.name_len + self.value_len + ENTRY_OVERHEAD
    }
}

#[derive(Debug)]
pub(super) struct DynamicTable {
    /// Names and values back to back; live from `start` to the end.
    bytes: Vec<u8>,
    start: usize,
    /// Bytes compaction removed from the front over the table's life: entries keep the
    /// offsets they were given and subtract this.
    dropped: usize,
    /// Oldest at the front, newest at the back (index 1 = the back).
    entries: VecDeque<Entry>,
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    pub(super) fn new(max_size: usize) -> DynamicTable {
        DynamicTable {
            bytes: Vec::new(),
            start: 0,
            dropped: 0,
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    /// The entries' size as §4.1 counts it.
    pub(super) fn size(&self) -> usize {
        self.size
    }

    pub(super) fn max_size(&self) -> usize {
        self.max_size
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// A new maximum (§4.3): entries are evicted, oldest first, until the table fits.
    pub(super) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    /// The entry at `index`, 1 being the newest (the dynamic part of the index space, less
    /// the static table's length).
    #[inline]
    pub(super) fn get(&self, index: usize) -> Option<(&[u8], &[u8])> {
        if index == 0 {
            return None;
        }
        let position = self.entries.len().checked_sub(index)?;
        let entry = self.entries[position];
        let at = entry.at - self.dropped;
        let name_end = at + entry.name_len;
        Some((
            &self.bytes[at..name_end],
            &self.bytes[name_end..name_end + entry.value_len],
        ))
    }

    /// The entries, newest first (index 1 first).
    pub(super) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        (1..=self.entries.len()).filter_map(|index| self.get(index))
    }

    /// Adds a field as the newest entry, evicting the oldest ones to make room. A field larger
    /// than the whole table empties it and is not added (§4.4): not an error.
    pub(super) fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            self.clear();
            return;
        }
        self.evict_to(self.max_size - size);
        self.compact_if_half_dead();
        let at = self.bytes.len() + self.dropped;
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        self.entries.push_back(Entry {
            at,
            name_len: name.len(),
            value_len: value.len(),
        });
        self.size += size;
    }

    fn evict_to(&mut self, size: usize) {
        while self.size > size {
            let Some(oldest) = self.entries.pop_front() else {
                break;
            };
            self.size -= oldest.size();
            self.start += oldest.name_len + oldest.value_len;
        }
        if self.entries.is_empty() {
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.dropped += self.bytes.len();
        self.bytes.clear();
        self.start = 0;
        self.size = 0;
    }

    fn compact_if_half_dead(&mut self) {
        if self.start > 0 && self.start >= self.bytes.len() - self.start {
            self.bytes.drain(..self.start);
            self.dropped += self.start;
            self.start = 0;
        }
    }

    /// The bytes the buffer holds, dead ones included (tests check the bound).
    #[cfg(test)]
    pub(super) fn buffered(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(table: &DynamicTable) -> Vec<(String, String)> {
        table
            .iter()
            .map(|(name, value)| {
                (
                    String::from_utf8(name.to_vec()).unwrap(),
                    String::from_utf8(value.to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn newest_is_index_one_and_the_oldest_is_evicted_first() {
        let mut table = DynamicTable::new(3 * (ENTRY_OVERHEAD + 2));
        for name in ["a", "b", "c", "d"] {
            table.insert(name.as_bytes(), b"v");
        }
        assert_eq!(table.len(), 3);
        assert_eq!(table.size(), 3 * (ENTRY_OVERHEAD + 2));
        assert_eq!(
            contents(&table),
            [("d", "v"), ("c", "v"), ("b", "v")].map(|(n, v)| (n.into(), v.into()))
        );
        assert_eq!(table.get(0), None);
        assert_eq!(table.get(4), None);
    }

    #[test]
    fn an_entry_larger_than_the_table_empties_it() {
        let mut table = DynamicTable::new(40);
        table.insert(b"a", b"b");
        table.insert(b"name", b"a value too large");
        assert_eq!(table.len(), 0);
        assert_eq!(table.size(), 0);
        // An entry of exactly the table's size fits.
        table.insert(b"abcd", b"efgh");
        assert_eq!(table.size(), 40);
    }

    #[test]
    fn shrinking_evicts_and_zero_empties() {
        let mut table = DynamicTable::new(4096);
        table.insert(b"one", b"1");
        table.insert(b"two", b"2");
        table.set_max_size(ENTRY_OVERHEAD + 4);
        assert_eq!(contents(&table), [("two".into(), "2".into())]);
        table.set_max_size(0);
        assert_eq!(table.len(), 0);
        table.insert(b"x", b"");
        assert_eq!(table.len(), 0);
    }

    #[test]
    fn the_buffer_stays_bounded_over_many_insertions() {
        let mut table = DynamicTable::new(256);
        for i in 0..10_000u32 {
            let value = i.to_string().repeat(1 + (i % 7) as usize);
            table.insert(b"key", value.as_bytes());
            assert!(table.size() <= 256);
            assert!(table.buffered() <= 2 * 256 + 64, "{}", table.buffered());
            let (name, newest) = table.get(1).unwrap();
            assert_eq!((name, newest), (&b"key"[..], value.as_bytes()));
        }
    }
}
