//! The path, header and file caches must never serve stale content: an in-place edit (same inode,
//! same size, same second), a rename over the file, a delete and a new index are all seen by the
//! very next request. Also a smoke test with every cache switched off.

use crate::support;

use std::io::Write;
use support::*;

fn overwrite_in_place(path: &std::path::Path, contents: &[u8]) {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(false)
        .open(path)
        .expect("open for in-place edit");
    file.write_all(contents).expect("in-place write");
    file.sync_all().expect("sync");
}

fn changes_are_seen(options: Options, root: &TempRoot) {
    let path = root.file("page.txt", "AAAAAAAAAAAAAAAA");
    root.dir("later");
    let server = Server::start(options);
    let mut conn = Conn::open(server.addr());
    for _ in 0..3 {
        assert_eq!(conn.get("/page.txt", &[]).body, b"AAAAAAAAAAAAAAAA");
    }
    let first_etag = conn
        .get("/page.txt", &[])
        .header("etag")
        .unwrap()
        .to_string();

    overwrite_in_place(&path, b"BBBBBBBBBBBBBBBB");
    let response = conn.get("/page.txt", &[]);
    assert_eq!(
        response.body, b"BBBBBBBBBBBBBBBB",
        "in-place edit of the same size hidden by a cache"
    );
    assert_ne!(
        response.header("etag"),
        Some(first_etag.as_str()),
        "ETag must change with content"
    );
    let range = conn.get("/page.txt", &[("Range", "bytes=0-3")]);
    assert_eq!(range.body, b"BBBB");

    let staging = root.file("staging.tmp", "CCCCCCCCCCCCCCCCCCCCCC");
    std::fs::rename(&staging, &path).unwrap();
    let response = conn.get("/page.txt", &[]);
    assert_eq!(
        response.body, b"CCCCCCCCCCCCCCCCCCCCCC",
        "rename over the file hidden by a cache"
    );

    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        conn.get("/page.txt", &[]).status,
        404,
        "deleted file still served"
    );

    root.file("page.txt", "DD");
    assert_eq!(
        conn.get("/page.txt", &[]).body,
        b"DD",
        "recreated file not seen"
    );

    assert_eq!(conn.get("/later/", &[]).status, 403);
    root.file("later/index.html", "new index");
    assert_eq!(
        conn.get("/later/", &[]).body,
        b"new index",
        "new index.html not seen"
    );
    std::fs::remove_file(root.path().join("later/index.html")).unwrap();
    assert_eq!(
        conn.get("/later/", &[]).status,
        403,
        "removed index.html still served"
    );

    root.file("was-file", "plain");
    assert_eq!(conn.get("/was-file", &[]).body, b"plain");
    std::fs::remove_file(root.path().join("was-file")).unwrap();
    root.file("was-file/index.html", "now a dir");
    assert_eq!(
        conn.get("/was-file", &[]).status,
        301,
        "file replaced by a directory"
    );
}

for_each_arch!(fn caches_on_see_every_change(arch) {
    let root = TempRoot::new();
    changes_are_seen(Options::new(root.path(), arch), &root);
});

for_each_arch!(fn caches_off_smoke(arch) {
    let root = TempRoot::new();
    let options = Options::new(root.path(), arch).args(["--no-path-cache", "--no-header-cache", "--no-file-cache"]);
    root.file("conditional.txt", "0123456789");
    root.file("dir/index.html", "index");
    changes_are_seen(options.clone(), &root);
    let server = Server::start(options);
    let plain = get(server.addr(), "/conditional.txt");
    let etag = plain.header("etag").unwrap().to_string();
    let hit = request(server.addr(), "GET", "/conditional.txt", &[("If-None-Match", etag.as_str())]);
    assert_eq!(hit.status, 304);
    let range = request(server.addr(), "GET", "/conditional.txt", &[("Range", "bytes=2-4")]);
    assert_eq!(range.body, b"234");
    assert_eq!(get(server.addr(), "/dir/").body, b"index");
    assert_eq!(get(server.addr(), "/dir").status, 301);
});

for_each_arch!(fn many_files_through_small_caches(arch) {
    // More distinct files than a cache would plausibly hold, each read twice, all exact.
    let root = TempRoot::new();
    for index in 0..300 {
        root.file(&format!("many/f{index}.txt"), format!("{index}:").repeat(index % 50 + 1));
    }
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    for round in 0..2 {
        for index in 0..300 {
            let response = conn.get(&format!("/many/f{index}.txt"), &[]);
            assert_eq!(response.body_text(), format!("{index}:").repeat(index % 50 + 1), "round {round} file {index}");
        }
    }
});
