//! Turning the C convention "−1 and errno" into `io::Result`, and retrying on `EINTR`.
//!
//! Owns: the two helpers every wrapper uses. Must not touch: any particular system call.

use std::io;

/// Return values of system calls that signal failure with −1.
pub(crate) trait MinusOne: Copy + PartialEq {
    const MINUS_ONE: Self;
}

impl MinusOne for i32 {
    const MINUS_ONE: Self = -1;
}

impl MinusOne for i64 {
    const MINUS_ONE: Self = -1;
}

impl MinusOne for isize {
    const MINUS_ONE: Self = -1;
}

/// `Err(last_os_error)` when the call returned −1, else the value.
pub(crate) fn cvt<T: MinusOne>(value: T) -> io::Result<T> {
    if value == T::MINUS_ONE {
        Err(io::Error::last_os_error())
    } else {
        Ok(value)
    }
}

/// Runs `call` until it fails with something other than `EINTR` or succeeds.
pub(crate) fn cvt_retry<T: MinusOne>(mut call: impl FnMut() -> T) -> io::Result<T> {
    loop {
        match cvt(call()) {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Converts a non-negative count returned by the kernel to `usize`.
pub(crate) fn to_usize<T: TryInto<usize>>(count: T) -> usize {
    // Counts come from calls that already returned non-negative values bounded by a usize
    // argument, so the conversion cannot fail; saturate rather than panic all the same.
    count.try_into().unwrap_or(usize::MAX)
}
