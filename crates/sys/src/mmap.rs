//! Read-only file mappings used only to ask whether file pages are resident (mincore), as
//! Flash §5.4 did before each send.
//!
//! Owns: the mapping's lifetime. Must not touch: file data. There is deliberately no safe byte
//! view: if another process truncates the file, touching a mapped page past the new end raises
//! `SIGBUS` and would kill the whole server. ampd sends file bytes with `sendfile`.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

use crate::cvt::cvt;
use crate::file::page_size;

/// A read-only, shared mapping of part of a file.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<libc::c_void>,
    len: usize,
}

// SAFETY: the mapping is read-only and never dereferenced by this crate; its address may be
// passed to mincore/munmap from any thread.
unsafe impl Send for Mmap {}
// SAFETY: as above; `&Mmap` only allows mincore, which reads no mapped memory.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` from `offset` (a multiple of the page size).
    ///
    /// # Errors
    /// `EINVAL` for an unaligned offset or `len == 0`; `EACCES` if `fd` is not readable; `ENODEV`
    /// for files that cannot be mapped; `ENOMEM`.
    pub fn map(fd: BorrowedFd<'_>, offset: u64, len: usize) -> io::Result<Mmap> {
        let invalid = || io::Error::from_raw_os_error(libc::EINVAL);
        if len == 0 || offset & (page_size() as u64 - 1) != 0 {
            return Err(invalid());
        }
        let offset = libc::off64_t::try_from(offset).map_err(|_| invalid())?;
        // SAFETY: a null hint lets the kernel choose the address, so no existing mapping is
        // replaced; the descriptor is open; the result is checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap64(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr).ok_or_else(invalid)?;
        Ok(Mmap { ptr, len })
    }

    /// Length of the mapping in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether every page overlapping `[offset, offset + len)` of the mapping is in memory, so
    /// sending it will not wait for the disk. Pages past the end of the file count as not
    /// resident.
    ///
    /// # Errors
    /// `EINVAL` when the range is not inside the mapping; `ENOMEM` if the range is unmapped.
    pub fn is_resident(&self, offset: usize, len: usize) -> io::Result<bool> {
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= self.len)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        if len == 0 {
            return Ok(true);
        }
        let page = page_size();
        let first_page = offset / page * page;
        let span = end - first_page;
        let pages = span.div_ceil(page);
        let mut vector = vec![0u8; pages];
        // SAFETY: `first_page` is page-aligned and `[first_page, first_page + span)` lies inside
        // this live mapping (end ≤ self.len); `vector` has one writable byte per page.
        cvt(unsafe {
            libc::mincore(
                self.ptr.as_ptr().cast::<u8>().add(first_page).cast(),
                span,
                vector.as_mut_ptr(),
            )
        })?;
        Ok(vector.iter().all(|&flags| flags & 1 == 1))
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping this value created and nothing else unmaps.
        let result = unsafe { libc::munmap(self.ptr.as_ptr(), self.len) };
        debug_assert_eq!(result, 0, "munmap of our own mapping failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::TempDir;
    use std::fs;
    use std::os::fd::AsFd;

    #[test]
    fn freshly_written_file_is_resident() {
        let dir = TempDir::new("mmap");
        let path = dir.path().join("fresh");
        let page = page_size();
        fs::write(&path, vec![1u8; 4 * page]).unwrap();
        let file = fs::File::open(&path).unwrap();
        let map = Mmap::map(file.as_fd(), 0, 4 * page).unwrap();
        assert_eq!(map.len(), 4 * page);
        assert!(map.is_resident(0, 4 * page).unwrap());
        assert!(map.is_resident(page + 10, 5).unwrap());
        assert!(map.is_resident(0, 0).unwrap());
        let beyond = map.is_resident(4 * page, 1).unwrap_err();
        assert_eq!(beyond.raw_os_error(), Some(libc::EINVAL));
        let map_from_page = Mmap::map(file.as_fd(), page as u64, page).unwrap();
        assert!(map_from_page.is_resident(0, page).unwrap());
        std::thread::spawn(move || drop(map_from_page))
            .join()
            .unwrap();
    }

    #[test]
    fn pages_past_end_of_file_are_not_resident() {
        let dir = TempDir::new("mmap-short");
        let path = dir.path().join("short");
        let page = page_size();
        fs::write(&path, b"tiny").unwrap();
        let file = fs::File::open(&path).unwrap();
        let map = Mmap::map(file.as_fd(), 0, 3 * page).unwrap();
        assert!(map.is_resident(0, 4).unwrap());
        assert!(!map.is_resident(0, 3 * page).unwrap());
    }

    #[test]
    fn rejects_unaligned_and_empty() {
        let dir = TempDir::new("mmap-bad");
        let path = dir.path().join("f");
        fs::write(&path, b"data").unwrap();
        let file = fs::File::open(&path).unwrap();
        for (offset, len) in [(1u64, 4usize), (0, 0)] {
            let error = Mmap::map(file.as_fd(), offset, len).unwrap_err();
            assert_eq!(error.raw_os_error(), Some(libc::EINVAL));
        }
    }
}
