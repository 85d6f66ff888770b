//! Static files: bodies, headers, MIME types, HEAD, directories (redirect, index, autoindex),
//! dotfiles, permissions, symlinks inside the root, and `~user` directories.

use crate::support;

use support::*;

fn assert_imf_fixdate(value: &str) {
    // RFC 9110 §5.6.7: "Sun, 06 Nov 1994 08:49:37 GMT" — fixed length 29.
    assert_eq!(value.len(), 29, "not an IMF-fixdate: {value:?}");
    assert!(value.ends_with(" GMT"), "not an IMF-fixdate: {value:?}");
    assert_eq!(&value[3..5], ", ", "not an IMF-fixdate: {value:?}");
}

for_each_arch!(fn file_body_and_headers(arch) {
    let root = TempRoot::new();
    root.file("hello.txt", "hello, world\n");
    let server = Server::start(Options::new(root.path(), arch));
    let response = get(server.addr(), "/hello.txt");
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.version, "HTTP/1.1");
    assert_eq!(response.body, b"hello, world\n");
    response.assert_common_headers();
    assert_eq!(response.header("content-length"), Some("13"));
    assert_eq!(response.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(response.header("accept-ranges"), Some("bytes"));
    let etag = response.header("etag").expect("ETag");
    assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2, "strong quoted ETag: {etag}");
    assert_imf_fixdate(response.header("last-modified").expect("Last-Modified"));
    assert_imf_fixdate(response.header("date").expect("Date"));
});

default_arch!(fn mime_types(arch) {
    let table = [
        ("index.html", "text/html; charset=utf-8"),
        ("page.htm", "text/html; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("app.js", "application/javascript; charset=utf-8"),
        ("data.json", "application/json; charset=utf-8"),
        ("logo.svg", "image/svg+xml; charset=utf-8"),
        ("feed.xml", "text/xml; charset=utf-8") /* nginx mime.types */,
        ("readme.txt", "text/plain; charset=utf-8"),
        ("pic.png", "image/png"),
        ("pic.jpg", "image/jpeg"),
        ("anim.gif", "image/gif"),
        ("photo.webp", "image/webp"),
        ("mod.wasm", "application/wasm"),
        ("font.woff2", "font/woff2"),
        ("doc.pdf", "application/pdf"),
        ("blob.unknownext", "application/octet-stream"),
        ("noextension", "application/octet-stream"),
    ];
    let root = TempRoot::new();
    for (name, _) in table {
        root.file(name, "x");
    }
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    for (name, expected) in table {
        let response = conn.get(&format!("/{name}"), &[]);
        assert_eq!(response.status, 200, "{name}: {response:?}");
        assert_eq!(response.header("content-type"), Some(expected), "{name}");
    }
});

default_arch!(fn head_headers_match_get(arch) {
    let root = TempRoot::new();
    root.file("page.html", "<p>hi</p>");
    root.dir("sub");
    let server = Server::start(Options::new(root.path(), arch));
    for path in ["/page.html", "/missing.html", "/sub"] {
        let mut conn = Conn::open(server.addr());
        let full = conn.get(path, &[]);
        conn.send(support::http::build_request("HEAD", path, &[]));
        let head = conn.read_response("HEAD");
        assert_eq!(head.status, full.status, "{path}");
        assert_eq!(head.headers_without_date(), full.headers_without_date(), "{path}");
        assert!(head.has_header("date"));
        // Nothing after the HEAD response: the next request is answered cleanly.
        let again = conn.get(path, &[]);
        assert_eq!(again.status, full.status);
        assert_eq!(again.body, full.body);
    }
});

for_each_arch!(fn missing_file_is_404(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::new(root.path(), arch));
    let response = get(server.addr(), "/nope.html");
    assert_eq!(response.status, 404);
    response.assert_common_headers();
    let response = get(server.addr(), "/no/such/dir/");
    assert_eq!(response.status, 404);
});

default_arch!(fn directory_without_slash_redirects(arch) {
    let root = TempRoot::new();
    root.file("docs/index.html", "docs index");
    let server = Server::start(Options::new(root.path(), arch));
    let response = get(server.addr(), "/docs");
    assert_eq!(response.status, 301, "{response:?}");
    response.assert_common_headers();
    assert_eq!(response.header("location"), Some("/docs/"));
    let response = get(server.addr(), "/docs?x=1&y=2");
    assert_eq!(response.status, 301);
    assert_eq!(response.header("location"), Some("/docs/?x=1&y=2"));
    let response = get(server.addr(), "/docs/");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"docs index");
    assert_eq!(response.header("content-type"), Some("text/html; charset=utf-8"));
    let response = get(server.addr(), "/");
    assert_eq!(response.status, 403, "root without index and no --autoindex");
});

default_arch!(fn directory_without_index_is_403(arch) {
    let root = TempRoot::new();
    root.file("empty/file.txt", "x");
    let server = Server::start(Options::new(root.path(), arch));
    let response = get(server.addr(), "/empty/");
    assert_eq!(response.status, 403);
    response.assert_common_headers();
});

default_arch!(fn autoindex_lists_escaped_names_dirs_first(arch) {
    let root = TempRoot::new();
    root.file("list/b.txt", "b");
    root.file("list/a.txt", "a");
    root.file("list/<script>&.txt", "x");
    root.dir("list/zdir");
    root.dir("list/adir");
    let server = Server::start(Options::new(root.path(), arch).arg("--autoindex"));
    let response = get(server.addr(), "/list/");
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.header("content-type"), Some("text/html; charset=utf-8"));
    let html = response.body_text();
    assert!(!html.contains("<script>&"), "names must be HTML-escaped: {html}");
    assert!(html.contains("&lt;script&gt;&amp;.txt"), "{html}");
    let order: Vec<usize> = ["adir", "zdir", "&lt;script&gt;", "a.txt", "b.txt"]
        .iter()
        .map(|name| html.find(name).unwrap_or_else(|| panic!("{name} missing from {html}")))
        .collect();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(order, sorted, "dirs first, then files by name: {html}");
    // An index.html still wins over the listing.
    root.file("withindex/index.html", "real index");
    let response = get(server.addr(), "/withindex/");
    assert_eq!(response.body, b"real index");
});

default_arch!(fn dotfiles_hidden_unless_enabled(arch) {
    let root = TempRoot::new();
    root.file(".env", "SECRET=1");
    root.file(".git/config", "[core]");
    root.file(".well-known/security.txt", "Contact: x");
    root.file("visible.txt", "ok");
    let server = Server::start(Options::new(root.path(), arch));
    assert_eq!(get(server.addr(), "/.env").status, 404);
    assert_eq!(get(server.addr(), "/.git/config").status, 404);
    assert_eq!(get(server.addr(), "/.git/").status, 404);
    assert_eq!(get(server.addr(), "/%2eenv").status, 404);
    let well_known = get(server.addr(), "/.well-known/security.txt");
    assert_eq!(well_known.status, 200);
    assert_eq!(well_known.body, b"Contact: x");
    drop(server);
    let server = Server::start(Options::new(root.path(), arch).arg("--dotfiles"));
    let response = get(server.addr(), "/.env");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"SECRET=1");
    assert_eq!(get(server.addr(), "/.git/config").status, 200);
});

for_each_arch!(fn unreadable_file_is_403(arch) {
    use std::os::unix::fs::PermissionsExt;
    if is_root_user() {
        println!("skipped: running as root, chmod 000 does not stop root from reading");
        return;
    }
    let root = TempRoot::new();
    let path = root.file("locked.txt", "no");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    let server = Server::start(Options::new(root.path(), arch));
    let response = get(server.addr(), "/locked.txt");
    assert_eq!(response.status, 403);
    assert!(!response.body.ends_with(b"no"));
});

// Relative and absolute links alike, when their target lies inside the root: served and
// listed (an absolute one names the root by its path; links leading out: tests/it/traversal.rs).
default_arch!(fn symlinks_inside_root_are_followed(arch) {
    let root = TempRoot::new();
    root.file("real/target.txt", "target body");
    root.symlink("real/target.txt", "link.txt");
    root.symlink("real", "linkdir");
    root.symlink(root.path().join("real/target.txt"), "abs.txt");
    root.symlink(root.path().join("real"), "absdir");
    // An absolute link through an absolute link, and a relative one through an absolute one.
    root.symlink(root.path().join("absdir/target.txt"), "real/abs-via-abs.txt");
    root.symlink("../absdir/target.txt", "real/rel-via-abs.txt");
    let server = Server::start(Options::new(root.path(), arch).arg("--autoindex"));
    for path in [
        "/link.txt",
        "/linkdir/target.txt",
        "/abs.txt",
        "/absdir/target.txt",
        "/real/abs-via-abs.txt",
        "/real/rel-via-abs.txt",
    ] {
        let response = get(server.addr(), path);
        assert_eq!((response.status, response.body_text().as_str()), (200, "target body"), "{path}");
    }
    assert_eq!(get(server.addr(), "/absdir").status, 301);
    let listing = get(server.addr(), "/?format=json").body_text();
    for name in ["abs.txt", "absdir", "link.txt", "linkdir"] {
        assert!(listing.contains(&format!("\"name\": \"{name}\"")), "{name} not listed: {listing}");
    }
    let inner = get(server.addr(), "/absdir/?format=json").body_text();
    assert!(inner.contains("\"name\": \"abs-via-abs.txt\""), "{inner}");
});

default_arch!(fn userdir_maps_tilde_paths(arch) {
    let root = TempRoot::new();
    root.outside_file("home/alice/public_html/x.html", "alice page");
    root.outside_file("home/alice/public_html/index.html", "alice index");
    root.file("~alice/x.html", "ordinary path");
    let pattern = format!("{}/home/*/public_html", root.outside_dir().display());
    let server = Server::start(Options::new(root.path(), arch).args(["--userdir", pattern.as_str()]));
    let response = get(server.addr(), "/~alice/x.html");
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.body, b"alice page");
    assert_eq!(get(server.addr(), "/~alice/").body, b"alice index");
    assert_eq!(get(server.addr(), "/~bob/x.html").status, 404);
    let escape = get(server.addr(), "/~alice/../../../secret.txt");
    assert!(escape.status == 400 || escape.status == 404, "{escape:?}");
    drop(server);
    let server = Server::start(Options::new(root.path(), arch));
    let response = get(server.addr(), "/~alice/x.html");
    assert_eq!(response.status, 200);
    assert_eq!(response.body, b"ordinary path");
});
