//! Which file a request's script is, and how its path splits into `SCRIPT_NAME` and
//! `PATH_INFO` (RFC 3875 §4.1.13, §4.1.5).
//!
//! Owns: the walk of `Script::Search` (Apache's `ScriptAlias`: segment by segment below the
//! directory, the first one naming a regular file is the script) and the checks of both kinds:
//! never above the directory (no `..`, and a symbolic link whose target lies outside is
//! `NotFound`, as if nothing were there), a directory or a file without an execute bit is
//! `Forbidden`. Runs on the launcher thread: it blocks on the disk.
//! Must not touch: processes.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{LaunchFailure, Script};

/// The script a request runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub filename: PathBuf,
    pub script_name: String,
    /// Empty when the request names the script itself.
    pub path_info: String,
}

/// Find `script`; `document_root` confines a `Fixed` script below it.
pub fn find(script: &Script, document_root: &Path) -> Result<Found, LaunchFailure> {
    match script {
        Script::Search {
            directory,
            url_base,
            rest,
        } => search(directory, url_base, rest),
        Script::Fixed {
            filename,
            script_name,
            path_info,
        } => {
            // A script named below the document root must really be there: a link out of it
            // is as good as nothing (as for static files).
            if filename.starts_with(document_root) {
                confined(filename, document_root)?;
            }
            let metadata = fs::metadata(filename).map_err(|error| missing(&error))?;
            runnable(&metadata)?;
            Ok(Found {
                filename: filename.clone(),
                script_name: script_name.clone(),
                path_info: path_info.clone(),
            })
        }
    }
}

fn search(directory: &Path, url_base: &str, rest: &str) -> Result<Found, LaunchFailure> {
    let mut filename = directory.to_path_buf();
    let mut script_name = url_base.trim_end_matches('/').to_owned();
    let mut at = 0;
    while at < rest.len() {
        let segment_end = rest[at..].find('/').map_or(rest.len(), |end| at + end);
        let segment = &rest[at..segment_end];
        at = segment_end + 1;
        if segment.is_empty() {
            continue;
        }
        if segment == "." || segment == ".." {
            return Err(LaunchFailure::NotFound);
        }
        filename.push(segment);
        script_name.push('/');
        script_name.push_str(segment);
        confined(&filename, directory)?;
        let metadata = fs::metadata(&filename).map_err(|error| missing(&error))?;
        if metadata.is_dir() {
            continue;
        }
        runnable(&metadata)?;
        return Ok(Found {
            filename,
            script_name,
            path_info: rest[segment_end..].to_owned(),
        });
    }
    // The walk ended on the directory or one below it: a directory is not a script.
    Err(LaunchFailure::Forbidden)
}

/// `NotFound` unless `path`, links resolved, lies below `directory` (links resolved too).
fn confined(path: &Path, directory: &Path) -> Result<(), LaunchFailure> {
    let base = fs::canonicalize(directory).map_err(|error| missing(&error))?;
    let real = fs::canonicalize(path).map_err(|error| missing(&error))?;
    if real.starts_with(&base) {
        Ok(())
    } else {
        Err(LaunchFailure::NotFound)
    }
}

/// A regular file with an execute bit; anything else that exists is `Forbidden`.
fn runnable(metadata: &fs::Metadata) -> Result<(), LaunchFailure> {
    if metadata.is_file() && metadata.permissions().mode() & 0o111 != 0 {
        Ok(())
    } else {
        Err(LaunchFailure::Forbidden)
    }
}

fn missing(error: &io::Error) -> LaunchFailure {
    match error.kind() {
        io::ErrorKind::PermissionDenied => LaunchFailure::Forbidden,
        _ => LaunchFailure::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::programs::test_support::{script, TempDir};

    fn search_in(dir: &Path, rest: &str) -> Result<Found, LaunchFailure> {
        find(
            &Script::Search {
                directory: dir.to_path_buf(),
                url_base: "/cgi-bin/".to_owned(),
                rest: rest.to_owned(),
            },
            dir,
        )
    }

    #[test]
    fn the_first_file_segment_is_the_script_and_the_rest_path_info() {
        let dir = TempDir::new("search");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        script(&dir.path().join("sub/env.sh"), "#!/bin/sh\n");
        let found = search_in(dir.path(), "/sub/env.sh/x/y").unwrap();
        assert_eq!(found.filename, dir.path().join("sub/env.sh"));
        assert_eq!(found.script_name, "/cgi-bin/sub/env.sh");
        assert_eq!(found.path_info, "/x/y");
        let bare = search_in(dir.path(), "sub/env.sh").unwrap();
        assert_eq!(
            (bare.script_name.as_str(), bare.path_info.as_str()),
            ("/cgi-bin/sub/env.sh", "")
        );
        let slash = search_in(dir.path(), "/sub/env.sh/").unwrap();
        assert_eq!(slash.path_info, "/");
    }

    #[test]
    fn missing_dot_dot_directories_and_plain_files_are_refused() {
        let dir = TempDir::new("refused");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("data.txt"), "not a script").unwrap();
        script(&dir.path().join("sub/ok.sh"), "#!/bin/sh\n");
        assert_eq!(
            search_in(dir.path(), "/nothing.sh"),
            Err(LaunchFailure::NotFound)
        );
        assert_eq!(
            search_in(dir.path(), "/sub/../sub/ok.sh"),
            Err(LaunchFailure::NotFound)
        );
        assert_eq!(
            search_in(dir.path(), "/sub/"),
            Err(LaunchFailure::Forbidden)
        );
        assert_eq!(search_in(dir.path(), ""), Err(LaunchFailure::Forbidden));
        assert_eq!(
            search_in(dir.path(), "/data.txt/x"),
            Err(LaunchFailure::Forbidden)
        );
    }

    #[test]
    fn a_symbolic_link_out_of_the_directory_is_not_found_one_inside_is_followed() {
        let outside = TempDir::new("outside");
        script(&outside.path().join("evil.sh"), "#!/bin/sh\n");
        let dir = TempDir::new("links");
        script(&dir.path().join("real.sh"), "#!/bin/sh\n");
        std::os::unix::fs::symlink(outside.path().join("evil.sh"), dir.path().join("evil.sh"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("away")).unwrap();
        std::os::unix::fs::symlink("real.sh", dir.path().join("alias.sh")).unwrap();
        assert_eq!(
            search_in(dir.path(), "/evil.sh"),
            Err(LaunchFailure::NotFound)
        );
        assert_eq!(
            search_in(dir.path(), "/away/evil.sh"),
            Err(LaunchFailure::NotFound)
        );
        let followed = search_in(dir.path(), "/alias.sh/p").unwrap();
        assert_eq!(
            (followed.script_name.as_str(), followed.path_info.as_str()),
            ("/cgi-bin/alias.sh", "/p")
        );
        // A fixed script below the document root is held to it too.
        let fixed = Script::Fixed {
            filename: dir.path().join("evil.sh"),
            script_name: "/evil.sh".to_owned(),
            path_info: String::new(),
        };
        assert_eq!(find(&fixed, dir.path()), Err(LaunchFailure::NotFound));
    }
}
