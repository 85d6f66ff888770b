//! Classes of errno values, named for what the caller does about them.
//!
//! Owns: which errno numbers make up each class, so that no code outside this crate names an
//! errno by number. Must not touch: the calls that fail (each wrapper returns the plain
//! `io::Error`) or what a caller does once it knows the class.

use std::io;

/// errno values a caller names in its own messages, or hands to [`crate::seccomp::deny`]; the
/// classes below are for deciding what to do.
pub use libc::{EINVAL, EMFILE, ENOSYS, EPERM};

/// The process (`EMFILE`) or the system (`ENFILE`) has no descriptor left: closing files this
/// process holds open (the caches) is what frees one.
pub fn out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Out of descriptors (`EMFILE`, `ENFILE`) or of kernel memory (`ENOBUFS`, `ENOMEM`): a passing
/// condition of the whole process, not a fault of the connection or file at hand. accept(2)
/// lists these four as the limits it can hit; on them the listener stays readable, so accepting
/// pauses (clients wait in the backlog) instead of spinning, and a directory listing fails
/// (to be retried) rather than silently miss entries.
pub fn out_of_resources(error: &io::Error) -> bool {
    error.raw_os_error().is_some_and(out_of_resources_errno)
}

/// [`out_of_resources`] for a bare errno, as an io_uring completion carries it (negated).
pub fn out_of_resources_errno(errno: i32) -> bool {
    matches!(
        errno,
        libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM
    )
}

/// An io_uring receive that takes a provided buffer found none free (`ENOBUFS`, negated in
/// the completion): the data waits in the socket, and a receive armed again takes it.
pub fn no_provided_buffer(completion_result: i32) -> bool {
    completion_result == -libc::ENOBUFS
}

/// An io_uring operation on a nonblocking socket found it full or empty (`EAGAIN`, negated in
/// the completion's result): no progress, not an error.
#[must_use]
pub fn would_block(completion_result: i32) -> bool {
    completion_result == -libc::EAGAIN
}

/// An io_uring operation ended because it was cancelled (`ECANCELED`, negated in the
/// completion): not a fault of its descriptor.
pub fn cancelled(completion_result: i32) -> bool {
    completion_result == -libc::ECANCELED
}

/// The path names no file: a component is missing (`ENOENT`), is not a directory (`ENOTDIR`),
/// or the path is too long to exist (`ENAMETOOLONG`). A server answers these `404`.
pub fn names_nothing(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG)
    )
}

/// [`crate::file::open_beneath`] refused to leave its directory: `EXDEV` for an escape
/// (`RESOLVE_BENEATH`), `ELOOP` for a symlink it may not follow. A server answers these as if
/// the file did not exist, so the response does not confirm what lies outside.
pub fn left_the_root(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EXDEV | libc::ELOOP))
}

/// The file exists but this process may not open it (`EACCES` from permissions, `EPERM` from a
/// policy such as a seccomp profile or an immutable file). A server answers these `403`.
pub fn access_refused(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EACCES | libc::EPERM))
}

/// `exec` refused a program that a process still has open for writing (`ETXTBSY`): a
/// passing state while it is being written, or while a process forked in between holds the
/// writer's descriptor until its own `exec`.
#[must_use]
pub fn text_file_busy(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::ETXTBSY)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every errno the classes below mention, plus a few they must not.
    const SEEN: [i32; 14] = [
        libc::EMFILE,
        libc::ENFILE,
        libc::ENOBUFS,
        libc::ENOMEM,
        libc::ENOENT,
        libc::ENOTDIR,
        libc::ENAMETOOLONG,
        libc::EXDEV,
        libc::ELOOP,
        libc::EACCES,
        libc::EPERM,
        libc::ECONNABORTED,
        libc::EINTR,
        libc::EAGAIN,
    ];

    /// `predicate` holds for exactly the errnos in `members` among `SEEN`, and never for an
    /// error that carries no errno.
    fn holds_for_exactly(predicate: fn(&io::Error) -> bool, members: &[i32]) {
        for errno in SEEN {
            let error = io::Error::from_raw_os_error(errno);
            assert_eq!(predicate(&error), members.contains(&errno), "{error}");
        }
        assert!(!predicate(&io::Error::other("no errno")));
        assert!(!predicate(&io::ErrorKind::WouldBlock.into()));
    }

    #[test]
    fn out_of_descriptors_is_emfile_and_enfile() {
        holds_for_exactly(out_of_descriptors, &[libc::EMFILE, libc::ENFILE]);
    }

    #[test]
    fn out_of_resources_adds_kernel_memory() {
        let members = [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM];
        holds_for_exactly(out_of_resources, &members);
        // A uring completion carries `-errno`: the raw form agrees with the error form.
        for errno in SEEN {
            assert_eq!(out_of_resources_errno(errno), members.contains(&errno));
        }
        assert!(!out_of_resources_errno(0));
    }

    #[test]
    fn completion_results_name_a_missing_buffer_and_a_cancel() {
        assert!(no_provided_buffer(-libc::ENOBUFS));
        assert!(cancelled(-libc::ECANCELED));
        for errno in SEEN.into_iter().filter(|&errno| errno != libc::ENOBUFS) {
            assert!(!no_provided_buffer(-errno), "{errno}");
            assert!(!cancelled(-errno), "{errno}");
        }
        // Positive results are bytes moved, never an error.
        assert!(!no_provided_buffer(libc::ENOBUFS) && !cancelled(libc::ECANCELED));
        assert!(!no_provided_buffer(0) && !cancelled(0));
    }

    #[test]
    fn names_nothing_is_a_missing_or_impossible_path() {
        holds_for_exactly(
            names_nothing,
            &[libc::ENOENT, libc::ENOTDIR, libc::ENAMETOOLONG],
        );
    }

    #[test]
    fn left_the_root_is_exdev_and_eloop() {
        holds_for_exactly(left_the_root, &[libc::EXDEV, libc::ELOOP]);
    }

    #[test]
    fn access_refused_is_eacces_and_eperm() {
        holds_for_exactly(access_refused, &[libc::EACCES, libc::EPERM]);
    }

    #[test]
    fn real_open_failures_fall_in_their_classes() {
        use crate::file::{open_beneath, ResolveFlags};
        use crate::test_support::TempDir;
        use std::os::fd::AsFd;
        use std::path::Path;

        let base = TempDir::new("errno-classes");
        std::fs::create_dir(base.path().join("root")).unwrap();
        std::fs::write(base.path().join("root/file"), "x").unwrap();
        let root = std::fs::File::open(base.path().join("root")).unwrap();
        let open = |path: &str| {
            open_beneath(root.as_fd(), Path::new(path), ResolveFlags::BENEATH).unwrap_err()
        };
        assert!(names_nothing(&open("missing")));
        assert!(names_nothing(&open("file/below")));
        assert!(left_the_root(&open("../root/file")));
        assert!(!out_of_resources(&open("missing")));
    }
}
