//! Changes inotify cannot report are still seen within `revalidate_after` (docs/config.md):
//! files on a FUSE filesystem (tests/fixtures/slowfs.py), edited in its source directory, as a
//! network filesystem's files are edited by another machine. A cached translation that has aged
//! out is checked by `stat` and kept when nothing changed (`resolve::revalidate`); these tests
//! hold it to seeing every kind of change there, under every engine (with helper processes too,
//! which carry the check over their pipe). Needs what tests/it/slow_disk.rs needs.

use crate::support;

use std::time::{Duration, Instant, SystemTime};
use support::*;

/// revalidate_after (0.5 s here) + the FUSE attribute timeout (1 s) + slack.
const SEEN_WITHIN: Duration = Duration::from_secs(8);

/// GET `path` until `wanted` holds for the response; the time it took, or a panic naming
/// `what` after `SEEN_WITHIN`.
fn until(
    conn: &mut Conn,
    path: &str,
    headers: &[(&str, &str)],
    what: &str,
    wanted: impl Fn(&Response) -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        let response = conn.get(path, headers);
        if wanted(&response) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < SEEN_WITHIN,
            "{what} not seen within {SEEN_WITHIN:?}: last answer {} {:?}",
            response.status,
            response.body_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

for_each_arch!(fn changes_behind_a_filesystem_inotify_cannot_watch_are_seen(arch) {
    let root = TempRoot::new();
    let source = root.outside_dir().join("remote-source");
    std::fs::create_dir_all(&source).unwrap();
    let page = source.join("page.txt");
    std::fs::write(&page, "AAAA").unwrap();
    let mountpoint = root.dir("remote");
    let Some(_mounted) = support::slowfs::mount_or_skip(&source, &mountpoint, "0") else {
        return;
    };
    // Half a second: also holds `--revalidate-after` to working end to end.
    let server = Server::start(Options::new(root.path(), arch).args(["--revalidate-after", "0.5"]));
    let mut conn = Conn::open(server.addr());
    let first = conn.get("/remote/page.txt", &[]);
    assert_eq!(first.body, b"AAAA");
    let etag = first.header("etag").unwrap().to_string();

    // Unchanged: the same answer, the same validator, past several revalidations.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1500) {
        let response = conn.get("/remote/page.txt", &[]);
        assert_eq!(response.body, b"AAAA");
        assert_eq!(response.header("etag"), Some(etag.as_str()));
        std::thread::sleep(Duration::from_millis(100));
    }

    // An edit in place of the same size, dated an hour back (a new modification time).
    std::fs::write(&page, "BBBB").unwrap();
    std::fs::File::options().write(true).open(&page).unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(3600)).unwrap();
    until(&mut conn, "/remote/page.txt", &[], "in-place edit", |r| r.body == b"BBBB");

    // A precompressed sibling appears, then goes.
    std::fs::write(source.join("page.txt.gz"), "gzipped").unwrap();
    let gzip = [("Accept-Encoding", "gzip")];
    until(&mut conn, "/remote/page.txt", &gzip, "new .gz sibling", |r| {
        r.header("content-encoding") == Some("gzip") && r.body == b"gzipped"
    });
    std::fs::remove_file(source.join("page.txt.gz")).unwrap();
    until(&mut conn, "/remote/page.txt", &gzip, "removed .gz sibling", |r| {
        r.header("content-encoding").is_none() && r.body == b"BBBB"
    });

    // Replaced by a rename, then deleted.
    let staging = source.join("staging");
    std::fs::write(&staging, "CCCCCC").unwrap();
    std::fs::rename(&staging, &page).unwrap();
    until(&mut conn, "/remote/page.txt", &[], "rename over the file", |r| r.body == b"CCCCCC");
    std::fs::remove_file(&page).unwrap();
    until(&mut conn, "/remote/page.txt", &[], "deletion", |r| r.status == 404);
});
