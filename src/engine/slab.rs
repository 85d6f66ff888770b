//! The connection table of the epoll loop and the io_uring proactor: a slab whose slots carry
//! a generation, and the one token layout both hand to the kernel (epoll's `data`, a ring
//! entry's `user_data`) and to helpers.
//!
//! Owns: slot indices, generations and tokens. A token names a slot *and* the generation of the
//! connection that was in it, so an event or completion that arrives after the connection
//! closed (and another took its slot) resolves to nothing instead of to the newcomer.
//! Must not touch: what a slot holds (the engines' `Slot`s).
//!
//! Token layout (64 bits): `generation << 32 | link << LINK_SHIFT | index << KIND_BITS | kind`,
//! where `link` names one of the connection's upstream sockets (`conn::LinkId`) in a token of
//! kind `Upstream`, and is 0 otherwise. Generations start at 1 and skip 0 when they wrap; tokens
//! at the very top of the range (`u64::MAX - n`) are left to the engines for their own
//! descriptors (listener, waker, helpers, inotify): they would need slot 2^24 - 1, which the
//! slab never hands out.

/// Bits of a token that say what the event or completion is about.
const KIND_BITS: u32 = 3;
const KIND_MASK: u64 = (1 << KIND_BITS) - 1;
/// Bits of a token that name an upstream link: room for every `LinkId`.
const LINK_BITS: u32 = 5;
const LINK_SHIFT: u32 = 32 - LINK_BITS;
const LINK_MASK: u64 = (1 << LINK_BITS) - 1;
const _: () = assert!(1 << LINK_BITS >= crate::conn::LinkId::LIMIT);
/// Bits of a token's slot index: what the kind and link leave of its low half.
const INDEX_BITS: u32 = 32 - KIND_BITS - LINK_BITS;
/// Slots a slab may hold (16 million connections per loop: descriptors run out long before);
/// the highest index is never handed out (see the token layout).
const MAX_SLOTS: usize = (1 << INDEX_BITS) - 1;

/// What a token refers to, besides the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The client socket: epoll readiness; the proactor's receive; a helper job's completion.
    Connection,
    /// The connection's upstream socket: epoll readiness; the proactor's poll of it.
    Upstream,
    /// The proactor's send (`writev`) to the client.
    Send,
    /// The proactor's poll for room in the client's socket, after its `sendfile` filled it.
    Writable,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Connection, Kind::Upstream, Kind::Send, Kind::Writable];

    fn bits(self) -> u64 {
        self as u64
    }

    fn from_bits(bits: u64) -> Option<Kind> {
        Kind::ALL.get(usize::try_from(bits).ok()?).copied()
    }
}

/// `token` (of kind `Upstream`, link 0) for upstream link `link` (`Slab::link_token`).
#[must_use]
pub fn with_link(token: u64, link: usize) -> u64 {
    token | ((link as u64 & LINK_MASK) << LINK_SHIFT)
}

/// The upstream link a token of kind `Upstream` names (`Slab::link_token`).
#[must_use]
pub fn link_of(token: u64) -> usize {
    ((token >> LINK_SHIFT) & LINK_MASK) as usize
}

struct Entry<T> {
    generation: u32,
    /// Boxed, so the slab's spare capacity costs a pointer per slot, not a whole connection.
    value: Box<T>,
}

/// Slots with generations; freed indices are reused, newest first (its memory is warm).
pub struct Slab<T> {
    entries: Vec<Option<Entry<T>>>,
    free: Vec<usize>,
    next_generation: u32,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
            next_generation: 1,
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    /// Put `value` in a free slot; its index. `None` when the slab holds `MAX_SLOTS` (a half
    /// billion connections: the descriptor limit stops them long before).
    pub fn insert(&mut self, value: T) -> Option<usize> {
        let index = match self.free.pop() {
            Some(index) => index,
            None if self.entries.len() < MAX_SLOTS => {
                self.entries.push(None);
                self.entries.len() - 1
            }
            None => return None,
        };
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        self.entries[index] = Some(Entry {
            generation,
            value: Box::new(value),
        });
        self.len += 1;
        Some(index)
    }

    /// Take the value out of slot `index`; the slot is free for the next `insert`.
    pub fn remove(&mut self, index: usize) -> Option<T> {
        let entry = self.entries.get_mut(index)?.take()?;
        self.free.push(index);
        self.len -= 1;
        Some(*entry.value)
    }

    #[must_use]
    pub fn get(&self, index: usize) -> Option<&T> {
        self.entries.get(index)?.as_ref().map(|entry| &*entry.value)
    }

    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.entries
            .get_mut(index)?
            .as_mut()
            .map(|entry| &mut *entry.value)
    }

    /// The token for `kind` on slot `index`'s current connection (a free slot gets generation
    /// 0, which no live connection has, so its token resolves to nothing).
    #[must_use]
    pub fn token(&self, index: usize, kind: Kind) -> u64 {
        let generation = self
            .entries
            .get(index)
            .and_then(Option::as_ref)
            .map_or(0, |entry| entry.generation);
        (u64::from(generation) << 32) | ((index as u64) << KIND_BITS) | kind.bits()
    }

    /// The token for upstream link `link` (`conn::LinkId::index`) of slot `index`'s current
    /// connection: a token of kind `Upstream` that also says which link (`link_of`).
    #[must_use]
    pub fn link_token(&self, index: usize, link: usize) -> u64 {
        with_link(self.token(index, Kind::Upstream), link)
    }

    /// The slot and kind a token names, if the connection it was made for is still there.
    #[must_use]
    pub fn resolve(&self, token: u64) -> Option<(usize, Kind)> {
        let index = usize::try_from((token >> KIND_BITS) & ((1 << INDEX_BITS) - 1)).ok()?;
        let generation = (token >> 32) as u32;
        let kind = Kind::from_bits(token & KIND_MASK)?;
        match self.entries.get(index) {
            Some(Some(entry)) if entry.generation == generation => Some((index, kind)),
            _ => None,
        }
    }

    /// Connections in the slab.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One past the highest index ever used: `0..bound()` covers every slot (for loops that
    /// may close connections as they go, which an iterator's borrow would not allow).
    #[must_use]
    pub fn bound(&self) -> usize {
        self.entries.len()
    }

    /// The live slots, with their indices.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut T)> {
        self.entries
            .iter_mut()
            .enumerate()
            .filter_map(|(index, entry)| entry.as_mut().map(|entry| (index, &mut *entry.value)))
    }

    /// The live slots, with their indices.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| entry.as_ref().map(|entry| (index, &*entry.value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_resolves_to_its_slot_and_kind_until_the_connection_leaves() {
        let mut slab = Slab::default();
        let first = slab.insert("first").unwrap();
        let second = slab.insert("second").unwrap();
        assert_ne!(first, second);
        for kind in Kind::ALL {
            let token = slab.token(second, kind);
            assert_eq!(slab.resolve(token), Some((second, kind)));
        }
        let stale = slab.token(first, Kind::Upstream);
        assert_eq!(slab.remove(first), Some("first"));
        assert_eq!(slab.resolve(stale), None, "the connection left");
        // The next connection reuses the slot with a new generation: the old token stays dead.
        let third = slab.insert("third").unwrap();
        assert_eq!(third, first);
        assert_eq!(slab.resolve(stale), None, "a newcomer in the slot");
        assert_eq!(
            slab.resolve(slab.token(third, Kind::Upstream)),
            Some((third, Kind::Upstream))
        );
        assert_eq!(slab.get(third), Some(&"third"));
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.bound(), 2);
        let live: Vec<_> = slab.iter().map(|(index, value)| (index, *value)).collect();
        assert_eq!(live, vec![(first, "third"), (second, "second")]);
    }

    #[test]
    fn a_free_slot_and_the_engines_own_tokens_resolve_to_nothing() {
        let mut slab = Slab::default();
        let index = slab.insert(1u8).unwrap();
        slab.remove(index);
        assert_eq!(slab.resolve(slab.token(index, Kind::Connection)), None);
        for reserved in 0..8 {
            assert_eq!(slab.resolve(u64::MAX - reserved), None);
        }
        assert!(slab.is_empty());
        assert_eq!(slab.remove(index), None, "removed once");
    }

    #[test]
    fn generations_skip_zero_when_they_wrap() {
        let mut slab = Slab {
            next_generation: u32::MAX,
            ..Slab::default()
        };
        let index = slab.insert(()).unwrap();
        assert_eq!(
            slab.token(index, Kind::Connection) >> 32,
            u64::from(u32::MAX)
        );
        slab.remove(index);
        let index = slab.insert(()).unwrap();
        assert_eq!(slab.token(index, Kind::Connection) >> 32, 1);
    }

    #[test]
    fn a_link_token_names_its_slot_and_link() {
        let mut slab = Slab::default();
        let first = slab.insert(()).unwrap();
        let second = slab.insert(()).unwrap();
        for link in [0, 1, crate::conn::LinkId::LIMIT - 1] {
            let token = slab.link_token(second, link);
            assert_eq!(slab.resolve(token), Some((second, Kind::Upstream)));
            assert_eq!(link_of(token), link);
        }
        assert_eq!(
            slab.link_token(first, 0),
            slab.token(first, Kind::Upstream),
            "link 0 (HTTP/1) has the plain upstream token"
        );
    }

    #[test]
    fn an_unknown_kind_resolves_to_nothing() {
        let mut slab = Slab::default();
        let index = slab.insert(()).unwrap();
        let token = slab.token(index, Kind::Connection) | KIND_MASK;
        assert_eq!(slab.resolve(token), None);
    }
}
