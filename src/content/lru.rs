//! A least-recently-used map bounded by total weight: bytes for the file cache, one per entry
//! for the path and header caches (Flash §5.2–5.3 use LRU for all three).
//!
//! Owns: recency order and the weight budget. Must not touch: what the values hold (file
//! descriptors, mappings): evicted entries are handed back so the caller releases them.
//!
//! Every operation is O(1): a `HashMap` from key to slot index, and a doubly-linked recency list
//! threaded through a slab of slots by index (no pointers, so no unsafe). Freed slots are
//! reused, so the slab never grows past the largest number of live entries.
//!
//! The map hashes with foldhash (randomly seeded), not std's SipHash: SipHash was 13 % of the
//! instructions a cached response costs (callgrind, three lookups per request), and the keys
//! here are not a client's to choose freely (normalized paths that resolved to something on
//! disk, file identities), which is what SipHash's flooding resistance is for.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use foldhash::fast::RandomState;

struct Node<K, V> {
    key: K,
    value: V,
    weight: u64,
    /// Towards the most recently used end.
    newer: Option<usize>,
    /// Towards the least recently used end.
    older: Option<usize>,
}

/// A weight-bounded LRU map. Keys are stored twice (index and slot), hence `K: Clone`.
pub struct Lru<K, V> {
    index: HashMap<K, usize, RandomState>,
    slots: Vec<Option<Node<K, V>>>,
    free: Vec<usize>,
    newest: Option<usize>,
    oldest: Option<usize>,
    budget: u64,
    weight: u64,
}

impl<K: std::fmt::Debug, V> std::fmt::Debug for Lru<K, V> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Lru")
            .field("len", &self.index.len())
            .field("weight", &self.weight)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// An empty cache that holds at most `budget` total weight.
    #[must_use]
    pub fn new(budget: u64) -> Lru<K, V> {
        Lru {
            index: HashMap::with_hasher(RandomState::default()),
            slots: Vec::new(),
            free: Vec::new(),
            newest: None,
            oldest: None,
            budget,
            weight: 0,
        }
    }

    fn node(&self, slot: usize) -> &Node<K, V> {
        self.slots[slot]
            .as_ref()
            .expect("indexed slot holds a node")
    }

    fn node_mut(&mut self, slot: usize) -> &mut Node<K, V> {
        self.slots[slot]
            .as_mut()
            .expect("indexed slot holds a node")
    }

    /// Takes `slot` out of the recency list (it stays in the slab).
    fn unlink(&mut self, slot: usize) {
        let (newer, older) = {
            let node = self.node(slot);
            (node.newer, node.older)
        };
        match newer {
            Some(newer) => self.node_mut(newer).older = older,
            None => self.newest = older,
        }
        match older {
            Some(older) => self.node_mut(older).newer = newer,
            None => self.oldest = newer,
        }
    }

    /// Puts an unlinked `slot` at the most recently used end.
    fn push_newest(&mut self, slot: usize) {
        let previous_newest = self.newest;
        {
            let node = self.node_mut(slot);
            node.newer = None;
            node.older = previous_newest;
        }
        match previous_newest {
            Some(previous) => self.node_mut(previous).newer = Some(slot),
            None => self.oldest = Some(slot),
        }
        self.newest = Some(slot);
    }

    /// Unlinks and frees `slot`, returning its key and value.
    fn take(&mut self, slot: usize) -> (K, V) {
        self.unlink(slot);
        let node = self.slots[slot].take().expect("indexed slot holds a node");
        self.free.push(slot);
        self.index.remove(&node.key);
        self.weight -= node.weight;
        (node.key, node.value)
    }

    /// The value for `key`, marking it most recently used.
    pub fn get<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = *self.index.get(key)?;
        self.unlink(slot);
        self.push_newest(slot);
        Some(&self.node(slot).value)
    }

    /// The value for `key`, mutable, marking it most recently used.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = *self.index.get(key)?;
        self.unlink(slot);
        self.push_newest(slot);
        Some(&mut self.node_mut(slot).value)
    }

    /// The value for `key` without changing its recency.
    pub fn peek<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = *self.index.get(key)?;
        Some(&self.node(slot).value)
    }

    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.index.contains_key(key)
    }

    /// Inserts `key` as most recently used and evicts least recently used entries until the
    /// total weight fits the budget. Returns what left the cache, in order: the previous value
    /// for `key` (if any), then evictions oldest first. An entry heavier than the whole budget is
    /// not stored and comes back as the last element.
    pub fn insert(&mut self, key: K, value: V, weight: u64) -> Vec<(K, V)> {
        let mut evicted = Vec::new();
        if let Some(&slot) = self.index.get(&key) {
            evicted.push(self.take(slot));
        }
        if weight > self.budget {
            evicted.push((key, value));
            return evicted;
        }
        while self.weight + weight > self.budget {
            let Some(oldest) = self.oldest else { break };
            evicted.push(self.take(oldest));
        }
        let node = Node {
            key: key.clone(),
            value,
            weight,
            newer: None,
            older: None,
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(node);
                slot
            }
            None => {
                self.slots.push(Some(node));
                self.slots.len() - 1
            }
        };
        self.push_newest(slot);
        self.index.insert(key, slot);
        self.weight += weight;
        evicted
    }

    /// Removes `key`, returning its value.
    pub fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = *self.index.get(key)?;
        Some(self.take(slot).1)
    }

    /// Keeps only the entries for which `keep` is true; returns the others, oldest first.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) -> Vec<(K, V)> {
        let mut removed = Vec::new();
        let mut cursor = self.oldest;
        while let Some(slot) = cursor {
            let node = self.node(slot);
            cursor = node.newer;
            if !keep(&node.key, &node.value) {
                removed.push(self.take(slot));
            }
        }
        removed
    }

    /// Removes the least recently used entry.
    pub fn pop_oldest(&mut self) -> Option<(K, V)> {
        let oldest = self.oldest?;
        Some(self.take(oldest))
    }

    /// Removes everything; returns the entries, oldest first.
    pub fn clear(&mut self) -> Vec<(K, V)> {
        self.retain(|_, _| false)
    }

    /// Entries from most to least recently used, without changing recency.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        let mut cursor = self.newest;
        std::iter::from_fn(move || {
            let node = self.node(cursor?);
            cursor = node.older;
            Some((&node.key, &node.value))
        })
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Total weight of the entries held.
    #[must_use]
    pub fn weight(&self) -> u64 {
        self.weight
    }

    #[must_use]
    pub fn budget(&self) -> u64 {
        self.budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn keys<V>(lru: &Lru<String, V>) -> Vec<&str> {
        lru.iter().map(|(key, _)| key.as_str()).collect()
    }

    #[test]
    fn evicts_least_recently_used_by_weight() {
        let mut lru = Lru::new(10);
        assert!(lru.insert("a".to_owned(), 1, 4).is_empty());
        assert!(lru.insert("b".to_owned(), 2, 4).is_empty());
        assert_eq!(lru.get("a"), Some(&1));
        let evicted = lru.insert("c".to_owned(), 3, 4);
        assert_eq!(evicted, vec![("b".to_owned(), 2)]);
        assert_eq!(keys(&lru), ["c", "a"]);
        assert_eq!((lru.len(), lru.weight()), (2, 8));
        let evicted = lru.insert("d".to_owned(), 4, 10);
        assert_eq!(evicted, vec![("a".to_owned(), 1), ("c".to_owned(), 3)]);
        assert_eq!(keys(&lru), ["d"]);
    }

    #[test]
    fn too_heavy_is_refused_and_replaces_the_old_version() {
        let mut lru = Lru::new(10);
        lru.insert("a".to_owned(), 1, 5);
        let evicted = lru.insert("a".to_owned(), 2, 11);
        assert_eq!(evicted, vec![("a".to_owned(), 1), ("a".to_owned(), 2)]);
        assert!(lru.is_empty());
        assert_eq!(lru.weight(), 0);
    }

    #[test]
    fn replace_returns_old_value_and_updates_weight() {
        let mut lru = Lru::new(100);
        lru.insert("a".to_owned(), 1, 50);
        lru.insert("b".to_owned(), 2, 10);
        let evicted = lru.insert("a".to_owned(), 3, 20);
        assert_eq!(evicted, vec![("a".to_owned(), 1)]);
        assert_eq!((lru.weight(), lru.peek("a")), (30, Some(&3)));
        assert_eq!(keys(&lru), ["a", "b"]);
    }

    #[test]
    fn remove_retain_clear_and_slot_reuse() {
        let mut lru = Lru::new(1000);
        for number in 0..10u64 {
            lru.insert(number.to_string(), number, 1);
        }
        assert_eq!(lru.remove("3"), Some(3));
        assert_eq!(lru.remove("3"), None);
        let removed = lru.retain(|_, value| value % 2 == 0);
        assert_eq!(
            removed.iter().map(|(_, value)| *value).collect::<Vec<_>>(),
            [1, 5, 7, 9]
        );
        assert_eq!(keys(&lru), ["8", "6", "4", "2", "0"]);
        *lru.get_mut("0").unwrap() = 100;
        assert_eq!(keys(&lru)[0], "0");
        let slab_size = lru.slots.len();
        lru.insert("new".to_owned(), 1, 1);
        assert_eq!(lru.slots.len(), slab_size, "a freed slot is reused");
        assert_eq!(lru.clear().len(), 6);
        assert!(lru.is_empty() && lru.weight() == 0 && lru.iter().next().is_none());
        assert!(!lru.contains("0"));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Get(u8),
        Insert(u8, u32, u64),
        Remove(u8),
        RetainOdd,
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..12).prop_map(Op::Get),
            6 => (0u8..12, any::<u32>(), 0u64..40).prop_map(|(k, v, w)| Op::Insert(k, v, w)),
            2 => (0u8..12).prop_map(Op::Remove),
            1 => Just(Op::RetainOdd),
            1 => Just(Op::Clear),
        ]
    }

    /// The obvious model: front = most recently used.
    struct Model {
        entries: VecDeque<(u8, u32, u64)>,
        budget: u64,
    }

    impl Model {
        fn position(&self, key: u8) -> Option<usize> {
            self.entries.iter().position(|entry| entry.0 == key)
        }

        fn weight(&self) -> u64 {
            self.entries.iter().map(|entry| entry.2).sum()
        }

        fn get(&mut self, key: u8) -> Option<u32> {
            let entry = self.entries.remove(self.position(key)?)?;
            self.entries.push_front(entry);
            Some(entry.1)
        }

        fn insert(&mut self, key: u8, value: u32, weight: u64) -> Vec<(u8, u32)> {
            let mut out = Vec::new();
            if let Some(at) = self.position(key) {
                let old = self.entries.remove(at).unwrap();
                out.push((old.0, old.1));
            }
            if weight > self.budget {
                out.push((key, value));
                return out;
            }
            while self.weight() + weight > self.budget {
                let old = self.entries.pop_back().unwrap();
                out.push((old.0, old.1));
            }
            self.entries.push_front((key, value, weight));
            out
        }

        fn remove(&mut self, key: u8) -> Option<u32> {
            Some(self.entries.remove(self.position(key)?)?.1)
        }

        fn retain_odd(&mut self) -> Vec<(u8, u32)> {
            let removed = self
                .entries
                .iter()
                .rev()
                .filter(|entry| entry.1 % 2 == 0)
                .map(|entry| (entry.0, entry.1))
                .collect();
            self.entries.retain(|entry| entry.1 % 2 == 1);
            removed
        }
    }

    proptest! {
        #[test]
        fn behaves_like_the_model(budget in 0u64..100, ops in prop::collection::vec(op(), 0..200)) {
            let mut lru: Lru<u8, u32> = Lru::new(budget);
            let mut model = Model { entries: VecDeque::new(), budget };
            for op in ops {
                match op {
                    Op::Get(key) => prop_assert_eq!(lru.get(&key).copied(), model.get(key)),
                    Op::Insert(key, value, weight) => {
                        prop_assert_eq!(lru.insert(key, value, weight), model.insert(key, value, weight));
                    }
                    Op::Remove(key) => prop_assert_eq!(lru.remove(&key), model.remove(key)),
                    Op::RetainOdd => prop_assert_eq!(lru.retain(|_, value| value % 2 == 1), model.retain_odd()),
                    Op::Clear => {
                        let mut expected: Vec<_> = model.entries.drain(..).map(|entry| (entry.0, entry.1)).collect();
                        expected.reverse();
                        prop_assert_eq!(lru.clear(), expected);
                    }
                }
                let order: Vec<_> = lru.iter().map(|(key, value)| (*key, *value)).collect();
                let expected: Vec<_> = model.entries.iter().map(|entry| (entry.0, entry.1)).collect();
                prop_assert_eq!(order, expected);
                prop_assert_eq!(lru.weight(), model.weight());
                prop_assert!(lru.weight() <= budget);
                prop_assert_eq!(lru.len(), model.entries.len());
                prop_assert!(lru.slots.len() <= 12);
            }
        }
    }
}
