//! An application's listening socket: bound by ampd at the configured path and passed to every
//! process of the application as descriptor 0 (`FCGI_LISTENSOCK_FILENO`, as `spawn-fcgi` does).
//!
//! Owns: the bind and the socket file. A socket file already at the path is stale (or belongs
//! to the processes a reload or an upgrade replaces) and is replaced; any other file is left
//! alone and the start refused. The socket is bound under a name of its own beside the path and
//! renamed over it once its processes have started (`publish`), so the path never goes missing
//! while it is replaced, and a start that fails leaves a running application's file in place.
//! The file is removed at the end only if it is still the one bound here: a successor (a
//! reload's new processes, a binary upgrade) may have replaced it since.
//! Must not touch: the processes.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use super::ProgramError;

#[derive(Debug)]
pub struct BoundSocket {
    /// Blocking: the processes `accept` on it as FastCGI libraries expect.
    listener: UnixListener,
    /// The configured path.
    path: PathBuf,
    /// Where the socket file is now (beside `path` until `publish`).
    at: PathBuf,
    /// Device and inode of the socket file bound here.
    identity: (u64, u64),
}

impl BoundSocket {
    /// Bind a socket for application `name`, to be published at `path`.
    ///
    /// # Errors
    /// A file that is not a socket is at `path`; the bind fails (directory missing,
    /// permissions).
    pub fn bind(name: &str, path: &Path) -> Result<BoundSocket, ProgramError> {
        let failed = |error: io::Error| ProgramError::Socket {
            application: name.to_owned(),
            path: path.to_path_buf(),
            error,
        };
        match fs::symlink_metadata(path) {
            Ok(metadata) if metadata.file_type().is_socket() => {}
            Ok(_) => {
                return Err(ProgramError::NotASocket {
                    application: name.to_owned(),
                    path: path.to_path_buf(),
                })
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(failed(error)),
        }
        let mut beside = OsString::from(path.as_os_str());
        beside.push(format!(".{}", std::process::id()));
        let beside = PathBuf::from(beside);
        let _ = fs::remove_file(&beside);
        let (listener, at) = match UnixListener::bind(&beside) {
            Ok(listener) => (listener, beside),
            // A path near the 108-byte limit has no room for the suffix: bind in place.
            Err(error) if error.kind() == io::ErrorKind::InvalidInput => {
                if fs::symlink_metadata(path).is_ok() {
                    fs::remove_file(path).map_err(failed)?;
                }
                (
                    UnixListener::bind(path).map_err(failed)?,
                    path.to_path_buf(),
                )
            }
            Err(error) => return Err(failed(error)),
        };
        let metadata = fs::symlink_metadata(&at).map_err(failed)?;
        Ok(BoundSocket {
            listener,
            path: path.to_path_buf(),
            at,
            identity: (metadata.dev(), metadata.ino()),
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.listener.as_fd()
    }

    /// Put the socket file at its path (replacing what socket file was there, atomically).
    ///
    /// # Errors
    /// The rename fails.
    pub fn publish(&mut self) -> io::Result<()> {
        if self.at != self.path {
            fs::rename(&self.at, &self.path)?;
            self.at.clone_from(&self.path);
        }
        Ok(())
    }

    /// Remove the socket file if it is still the one bound here.
    pub fn remove_file(&self) {
        if let Ok(metadata) = fs::symlink_metadata(&self.at) {
            if (metadata.dev(), metadata.ino()) == self.identity {
                let _ = fs::remove_file(&self.at);
            }
        }
    }
}
