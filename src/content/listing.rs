//! A directory's entries as read for a listing, and their encoding between a helper process
//! and its loop.
//!
//! Owns: `Listing` and `DirEntry`. A type of its own module, not `autoindex`'s, because a
//! `Resolution` (`file.rs`) carries one, and `autoindex` renders pages with the response
//! vocabulary that uses `file.rs`: holding it there made `file → autoindex → serve → file` a
//! cycle. Must not touch: rendering (`autoindex`), reading directories (`resolve`).

/// One directory entry as the listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
    pub mtime_secs: i64,
}

/// The entries of one directory, in the order the directory gave them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    pub entries: Vec<DirEntry>,
}

impl Listing {
    /// Appends the listing as bytes (for a helper process to hand it to its loop): per entry a
    /// length-prefixed name, a kind byte, size and mtime, all little-endian.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        for entry in &self.entries {
            out.extend_from_slice(&(entry.name.len() as u64).to_le_bytes());
            out.extend_from_slice(entry.name.as_bytes());
            out.push(u8::from(entry.is_dir));
            out.extend_from_slice(&entry.size.to_le_bytes());
            out.extend_from_slice(&entry.mtime_secs.to_le_bytes());
        }
    }

    /// The listing `encode` wrote; `None` for bytes it cannot have written.
    #[must_use]
    pub fn decode(mut bytes: &[u8]) -> Option<Listing> {
        fn take<'a>(bytes: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
            let (head, rest) = bytes.split_at_checked(len)?;
            *bytes = rest;
            Some(head)
        }
        fn word(bytes: &mut &[u8]) -> Option<[u8; 8]> {
            take(bytes, 8)?.try_into().ok()
        }
        let count = usize::try_from(u64::from_le_bytes(word(&mut bytes)?)).ok()?;
        // Each entry takes at least 25 bytes: a count beyond that is a corrupt frame.
        let mut entries = Vec::with_capacity(count.min(bytes.len() / 25));
        for _ in 0..count {
            let len = usize::try_from(u64::from_le_bytes(word(&mut bytes)?)).ok()?;
            let name = String::from_utf8(take(&mut bytes, len)?.to_vec()).ok()?;
            let is_dir = match take(&mut bytes, 1)? {
                [0] => false,
                [1] => true,
                _ => return None,
            };
            let size = u64::from_le_bytes(word(&mut bytes)?);
            let mtime_secs = i64::from_le_bytes(word(&mut bytes)?);
            entries.push(DirEntry {
                name,
                is_dir,
                size,
                mtime_secs,
            });
        }
        bytes.is_empty().then_some(Listing { entries })
    }
}
