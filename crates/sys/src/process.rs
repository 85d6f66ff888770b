//! Process-wide settings and accounting: signals, descriptor limits, CPU affinity, user lookup
//! and CPU-time measurement.
//!
//! Owns: calls that affect or describe the whole process or the calling thread. Must not touch:
//! sockets and files (see `socket.rs`, `file.rs`).

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use crate::cvt::cvt;

/// Ignores `SIGPIPE`, so a write to a closed connection returns `EPIPE` instead of killing the
/// server.
///
/// # Errors
/// Only if the signal number were invalid.
pub fn ignore_sigpipe() -> io::Result<()> {
    // SAFETY: installing SIG_IGN runs no handler code, so no async-signal-safety rules apply.
    let previous = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    if previous == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the new soft limit (each
/// connection needs a socket and often a file descriptor).
///
/// # Errors
/// `EPERM` should not happen (raising soft to hard needs no privilege).
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live, writable rlimit64.
    cvt(unsafe { libc::getrlimit64(libc::RLIMIT_NOFILE, &mut limit) })?;
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a live rlimit64 the kernel only reads.
        cvt(unsafe { libc::setrlimit64(libc::RLIMIT_NOFILE, &limit) })?;
    }
    Ok(limit.rlim_cur)
}

/// The current soft and hard `RLIMIT_NOFILE`.
///
/// # Errors
/// None expected.
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a live, writable rlimit64.
    cvt(unsafe { libc::getrlimit64(libc::RLIMIT_NOFILE, &mut limit) })?;
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`): the unit of the CPU times and the start
/// time in `/proc/PID/stat`.
#[must_use]
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf takes no pointers.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // 100 is what Linux reports on every architecture it runs on (USER_HZ).
    u64::try_from(ticks)
        .ok()
        .filter(|&ticks| ticks > 0)
        .unwrap_or(100)
}

/// Pins the calling thread to one CPU (benchmarks pin server and load generator apart).
///
/// # Errors
/// `EINVAL` when `cpu` is not available to this process (or ≥ `CPU_SETSIZE`).
pub fn set_cpu_affinity(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is a plain bit array for which all-zero bytes are the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE was checked above, so the bit is inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a live cpu_set_t whose size is passed; pid 0 means the calling thread.
    cvt(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })?;
    Ok(())
}

/// Raises the calling thread's nice value by `increment` (Linux keeps one per thread): a
/// smaller share of a busy CPU. Raising it needs no privilege.
///
/// # Errors
/// `EACCES`/`EPERM` for a negative increment without `CAP_SYS_NICE`.
pub fn lower_thread_priority(increment: i32) -> io::Result<()> {
    let tid = own_thread_id()?;
    let current = thread_nice()?;
    // SAFETY: setpriority takes no pointers; PRIO_PROCESS with a thread id names that thread.
    cvt(unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, current.saturating_add(increment)) })?;
    Ok(())
}

/// The calling thread's id, as the priority calls take it.
fn own_thread_id() -> io::Result<libc::id_t> {
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::gettid() };
    libc::id_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))
}

/// The calling thread's nice value.
///
/// # Errors
/// None expected.
pub fn thread_nice() -> io::Result<i32> {
    let tid = own_thread_id()?;
    // getpriority may return -1 as a value: errno tells an error apart.
    // SAFETY: writing errno through its thread-local location is always sound.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: getpriority takes no pointers.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
    if nice == -1 {
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(0) {
            return Err(error);
        }
    }
    Ok(nice)
}

/// The CPUs the calling thread may run on.
///
/// # Errors
/// None expected.
pub fn cpu_affinity() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array for which all-zero bytes are the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live, writable cpu_set_t whose size is passed.
    cvt(unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) })?;
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: every `cpu` in the range is < CPU_SETSIZE, so the bit is inside `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// The home directory of user `name` from the password database, for `~user` URLs (JAWS §3).
/// `Ok(None)` when there is no such user.
///
/// This may read `/etc/passwd` or ask NSS over the network: call it from a helper thread.
///
/// # Errors
/// `InvalidInput` for a name with a NUL byte; `EIO`/`EMFILE` from the lookup.
pub fn user_home_dir(name: &str) -> io::Result<Option<PathBuf>> {
    lookup_by_name(name, "user", libc::getpwnam_r, |entry: &libc::passwd| {
        // SAFETY: the entry was filled in by a successful getpwnam_r, so `pw_dir` points at a
        // NUL-terminated string inside the lookup's buffer, alive while this runs.
        let home = unsafe { CStr::from_ptr(entry.pw_dir) };
        PathBuf::from(OsStr::from_bytes(home.to_bytes()))
    })
}

/// The user id and primary group id of user `name`; `Ok(None)` when there is no such user.
///
/// # Errors
/// `InvalidInput` for a name with a NUL byte; `EIO`/`EMFILE` from the lookup.
pub fn user_ids(name: &str) -> io::Result<Option<(u32, u32)>> {
    lookup_by_name(name, "user", libc::getpwnam_r, |entry: &libc::passwd| {
        (entry.pw_uid, entry.pw_gid)
    })
}

/// The id of group `name`; `Ok(None)` when there is no such group.
///
/// # Errors
/// `InvalidInput` for a name with a NUL byte; `EIO`/`EMFILE` from the lookup.
pub fn group_id(name: &str) -> io::Result<Option<u32>> {
    lookup_by_name(name, "group", libc::getgrnam_r, |entry: &libc::group| {
        entry.gr_gid
    })
}

/// The shape of the reentrant name lookups (`getpwnam_r`, `getgrnam_r`): the strings of the
/// entry go into a buffer that grows on `ERANGE`; `read` sees the entry only when one was found,
/// while the buffer is alive.
fn lookup_by_name<Entry, T>(
    name: &str,
    kind: &str,
    lookup: unsafe extern "C" fn(
        *const libc::c_char,
        *mut Entry,
        *mut libc::c_char,
        libc::size_t,
        *mut *mut Entry,
    ) -> libc::c_int,
    read: impl FnOnce(&Entry) -> T,
) -> io::Result<Option<T>> {
    let name = CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{kind} name contains NUL"),
        )
    })?;
    let mut buf = vec![0u8; 1024];
    loop {
        let mut entry = MaybeUninit::<Entry>::uninit();
        let mut found: *mut Entry = std::ptr::null_mut();
        // SAFETY: `lookup` is getpwnam_r or getgrnam_r with its matching entry type; `name` is
        // NUL-terminated; `entry`, `buf` (of the given length) and `found` are live and
        // writable for the call.
        let code = unsafe {
            lookup(
                name.as_ptr(),
                entry.as_mut_ptr(),
                buf.as_mut_ptr().cast::<libc::c_char>(),
                buf.len(),
                &mut found,
            )
        };
        match code {
            0 if found.is_null() => return Ok(None),
            0 => {
                // SAFETY: the lookup succeeded and `found` is non-null, so `entry` is filled in.
                let entry = unsafe { entry.assume_init_ref() };
                return Ok(Some(read(entry)));
            }
            libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            // Some C libraries report "no such entry" as an error number; POSIX lists these.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            code => return Err(io::Error::from_raw_os_error(code)),
        }
    }
}

/// The effective user id of the process.
#[must_use]
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// The effective group id of the process.
#[must_use]
pub fn effective_gid() -> u32 {
    // SAFETY: getegid takes no arguments and cannot fail.
    unsafe { libc::getegid() }
}

/// Gives up root for good: supplementary groups become `user`'s (plus `gid`), then the group
/// and user ids change (group first: once the user id changes, the group can no longer). Call it
/// before other threads start; glibc applies it to every thread, but there is no reason to
/// rely on that.
///
/// # Errors
/// `EPERM` when the process is not root.
pub fn drop_privileges(user: &str, uid: u32, gid: u32) -> io::Result<()> {
    let name = CString::new(user)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "user name contains NUL"))?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    cvt(unsafe { libc::initgroups(name.as_ptr(), gid) })?;
    // SAFETY: setresgid takes no pointers.
    cvt(unsafe { libc::setresgid(gid, gid, gid) })?;
    // SAFETY: setresuid takes no pointers.
    cvt(unsafe { libc::setresuid(uid, uid, uid) })?;
    Ok(())
}

/// `CLOCK_MONOTONIC` in microseconds (what systemd's `MONOTONIC_USEC=` expects).
#[must_use]
pub fn monotonic_micros() -> u64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a live, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let _ = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut time) };
    u64::try_from(time.tv_sec).unwrap_or(0) * 1_000_000
        + u64::try_from(time.tv_nsec).unwrap_or(0) / 1_000
}

/// The process id.
#[must_use]
pub fn pid() -> u32 {
    std::process::id()
}

fn timeval_duration(time: libc::timeval) -> Duration {
    Duration::from_secs(u64::try_from(time.tv_sec).unwrap_or(0))
        + Duration::from_micros(u64::try_from(time.tv_usec).unwrap_or(0))
}

/// CPU time the whole process has used so far: (user, system).
///
/// # Errors
/// None expected.
pub fn getrusage_self() -> io::Result<(Duration, Duration)> {
    // SAFETY: rusage is plain old data for which all-zero bytes are valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a live, writable rusage.
    cvt(unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) })?;
    Ok((
        timeval_duration(usage.ru_utime),
        timeval_duration(usage.ru_stime),
    ))
}

/// CPU time the calling thread has used so far (user + system).
///
/// # Errors
/// None expected.
pub fn thread_cpu_time() -> io::Result<Duration> {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a live, writable timespec.
    cvt(unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) })?;
    Ok(Duration::new(
        u64::try_from(time.tv_sec).unwrap_or(0),
        u32::try_from(time.tv_nsec).unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_ticks_are_user_hz() {
        assert!((1..=10_000).contains(&clock_ticks_per_second()));
    }

    #[test]
    fn a_thread_lowers_its_own_priority_only() {
        let before = thread_nice().unwrap();
        let own = std::thread::spawn(move || {
            lower_thread_priority(3).unwrap();
            thread_nice().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(own, (before + 3).min(19));
        assert_eq!(thread_nice().unwrap(), before, "other threads keep theirs");
    }
    use crate::io::write;
    use crate::socket::socket_pair;
    use std::os::fd::AsFd;

    #[test]
    fn with_sigpipe_ignored_a_write_to_a_closed_socket_is_epipe() {
        ignore_sigpipe().unwrap();
        let (left, right) = socket_pair().unwrap();
        drop(right);
        let error = write(left.as_fd(), b"x").unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::EPIPE));
    }

    #[test]
    fn nofile_soft_limit_becomes_the_hard_limit() {
        let raised = raise_nofile_limit().unwrap();
        let (soft, hard) = nofile_limit().unwrap();
        assert_eq!((raised, soft), (hard, hard));
    }

    #[test]
    fn affinity_pins_the_calling_thread_only() {
        std::thread::spawn(|| {
            let allowed = cpu_affinity().unwrap();
            let cpu = *allowed.first().unwrap();
            set_cpu_affinity(cpu).unwrap();
            assert_eq!(cpu_affinity().unwrap(), vec![cpu]);
            let error = set_cpu_affinity(libc::CPU_SETSIZE as usize).unwrap_err();
            assert_eq!(error.raw_os_error(), Some(libc::EINVAL));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn root_has_a_home_and_nonsense_users_do_not_exist() {
        assert_eq!(user_home_dir("root").unwrap(), Some(PathBuf::from("/root")));
        assert_eq!(user_home_dir("no-such-user-ampd-xyz").unwrap(), None);
        assert!(user_home_dir("nul\0byte").is_err());
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let before_thread = thread_cpu_time().unwrap();
        let (before_user, before_system) = getrusage_self().unwrap();
        let mut sum = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(50) {
            sum = sum.wrapping_add(std::hint::black_box(sum) ^ 0x9e37);
        }
        std::hint::black_box(sum);
        assert!(thread_cpu_time().unwrap() > before_thread);
        let (after_user, after_system) = getrusage_self().unwrap();
        assert!(after_user + after_system > before_user + before_system);
    }
}
