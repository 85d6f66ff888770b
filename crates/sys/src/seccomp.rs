//! seccomp(2) filters: make one system call fail with a chosen `errno`, exactly as a container
//! runtime's profile does (Docker's default profile answers `io_uring_setup` with `EPERM`).
//!
//! Owns: installing such a filter on the whole process. Used to exercise the `uring` engine's
//! fallback through the real kernel path: the probe calls `io_uring_setup` and the kernel itself
//! refuses it. Must not touch: anything else — a filter can only take permissions away.

use std::io;

use crate::cvt::cvt;

/// The system call numbers a filter can name.
pub use libc::SYS_io_uring_setup;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

// Offsets in `struct seccomp_data`: `int nr; __u32 arch; ...`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// From now on, system call `syscall` fails with `errno` in every thread of this process (and in
/// processes it starts). Sets `no_new_privs`, which an unprivileged filter requires.
///
/// # Errors
/// `EINVAL` for a number that does not fit, `EACCES` without `no_new_privs` (set here),
/// `ENOSYS`/`EINVAL` on a kernel without seccomp filters.
pub fn deny(syscall: libc::c_long, errno: i32) -> io::Result<()> {
    let number = u32::try_from(syscall).map_err(|_| io::ErrorKind::InvalidInput)?;
    let errno = u32::try_from(errno)
        .ok()
        .filter(|&errno| errno <= libc::SECCOMP_RET_DATA)
        .ok_or(io::ErrorKind::InvalidInput)?;
    let program = [
        statement(BPF_LD_W_ABS, OFFSET_ARCH),
        // Another architecture's calling convention: leave it alone.
        jump(BPF_JEQ_K, AUDIT_ARCH, 0, 3),
        statement(BPF_LD_W_ABS, OFFSET_NR),
        jump(BPF_JEQ_K, number, 0, 1),
        statement(BPF_RET_K, libc::SECCOMP_RET_ERRNO | errno),
        statement(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only.
    cvt(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
    // SAFETY: `fprog` points at `program`, a live array of `len` sock_filter instructions that
    // the kernel copies during the call; TSYNC applies the filter to every thread.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &fprog as *const libc::sock_fprog,
        )
    })?;
    Ok(())
}
