//! Memory shared between a process and the processes it forks: the `mp` engine's scoreboard
//! (Apache prefork's, Flash-MP's) and admission counts, so that every worker counts into, and
//! reports from, the same numbers.
//!
//! Owns: one anonymous `MAP_SHARED` mapping, handed out only as a slice of atomics. Atomic
//! operations on shared memory are atomic between processes as they are between threads (the
//! CPU does not know the difference), and atomics are the only access this module allows, so no
//! process can ever see a torn value or make another's view undefined.
//! Must not touch: what the cells mean (the server's `log::stats` and `ops::admission`).

use std::io;
use std::sync::atomic::AtomicU64;

/// A zero-filled array of `count` atomics in a mapping that forked children share with this
/// process (and with each other). The mapping is never unmapped: it lives as long as the
/// process, which is what a scoreboard needs, and is why the slice can be `'static`.
///
/// # Errors
/// `ENOMEM`; `EINVAL` for `count == 0`.
pub fn atomics(count: usize) -> io::Result<&'static [AtomicU64]> {
    let size = std::mem::size_of::<AtomicU64>();
    let len = count
        .checked_mul(size)
        .filter(|&len| len > 0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: an anonymous mapping with a null hint: the kernel picks a fresh address range,
    // so no existing memory is replaced; no descriptor is involved; the result is checked
    // against MAP_FAILED below.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the mapping is `len` = `count` × 8 bytes, readable and writable, page-aligned
    // (more than AtomicU64's alignment) and zero-filled by the kernel; zero is a valid
    // AtomicU64, which has the layout of u64. It is never unmapped, so `'static` holds. Only
    // `&AtomicU64` references are ever made to it, here or in any process that inherits it,
    // so every access is atomic.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<AtomicU64>(), count) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn cells_start_at_zero_and_count() {
        let cells = atomics(1024).unwrap();
        assert!(cells.iter().all(|cell| cell.load(Ordering::Relaxed) == 0));
        cells[1023].fetch_add(5, Ordering::Relaxed);
        assert_eq!(cells[1023].load(Ordering::Relaxed), 5);
        assert!(atomics(0).is_err());
    }
}
