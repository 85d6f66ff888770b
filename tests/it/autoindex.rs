//! Directory listings (`--autoindex`) over real sockets: every link a listing shows fetches
//! with 200 under every engine, whatever the names (spaces, unicode, '%', '#', '?', '&', '<',
//! quotes, a leading dot); names the server refuses to serve (a TAB, a backslash, a line break)
//! and entries that cannot be fetched (a FIFO, a dangling or escaping symlink) are not listed.
//! Then the page itself: human sizes with exact bytes, UTC times, sorting by query, the JSON
//! form, and revalidation with its ETag.

use crate::support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use support::*;

/// Names that are served, so must be listed and fetch with 200, each holding its own name.
const SERVABLE: [&str; 15] = [
    "plain.txt",
    "with space.txt",
    "caf\u{e9} \u{fc}nicode.txt",
    "\u{65e5}\u{672c}\u{8a9e}.txt",
    "100%.txt",
    "a%2Fb.txt",
    "hash#tag.txt",
    "what?.txt",
    "a&b.txt",
    "<lt>.txt",
    "quote\"d.txt",
    "apos'trophe.txt",
    "javascript:alert(1)",
    "semi;colon=eq+plus.txt",
    ".dotfile",
];

/// Names `content::path::normalize` refuses (control characters and backslashes never reach a
/// file name): listing them would show links that answer 400.
const REFUSED: [&str; 3] = ["h\tTab.txt", "l\\back.txt", "new\nline.txt"];

fn awkward_root() -> TempRoot {
    let root = TempRoot::new();
    for name in SERVABLE.iter().chain(&REFUSED) {
        root.file(&format!("awk/{name}"), name);
    }
    root.file("awk/sub dir #1/inner file.txt", "inner file.txt");
    root.file("outside.txt", "outside");
    root.symlink("plain.txt", "awk/inside-link");
    root.symlink("../../secret", "awk/escaping-link");
    root.outside_file("secret", "secret");
    root.symlink("no-such-target", "awk/dangling-link");
    let fifo = root.path().join("awk/a-fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success());
    root
}

/// The `href` values of a page, HTML-unescaped.
fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"")
        .skip(1)
        .map(|rest| {
            let raw = &rest[..rest.find('"').expect("closing quote")];
            raw.replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        })
        .collect()
}

/// A link resolved against the directory `base` (which ends in '/'): relative names, `../`,
/// and query-only links, as a browser resolves them (RFC 3986 §5.2).
fn resolve(base: &str, link: &str) -> String {
    if link.starts_with('/') {
        return link.to_owned();
    }
    if let Some(query) = link.strip_prefix('?') {
        return format!("{base}?{query}");
    }
    if let Some(rest) = link.strip_prefix("../") {
        let trimmed = base.trim_end_matches('/');
        let parent = &trimmed[..=trimmed.rfind('/').expect("a parent")];
        return format!("{parent}{rest}");
    }
    format!("{base}{link}")
}

/// Every byte of a link must be one a URL may carry as it is (RFC 3986 §2).
fn assert_encoded(link: &str) {
    assert!(
        link.bytes().all(|byte| byte.is_ascii_graphic()
            && !matches!(
                byte,
                b'"' | b'<' | b'>' | b'\\' | b'`' | b'{' | b'}' | b'|' | b'^'
            )),
        "link not percent-encoded: {link:?}"
    );
}

/// Follows every link of the HTML listing of `dir` and of its JSON form; returns the names the
/// JSON form lists.
fn walk(addr: SocketAddr, dir: &str) -> BTreeSet<String> {
    let page = get(addr, dir);
    assert_eq!(page.status, 200, "{page:?}");
    let html = page.body_text();
    let links = hrefs(&html);
    assert!(links.len() > 3, "{html}");
    for link in &links {
        assert_encoded(link);
        let target = resolve(dir, link);
        let response = get(addr, &target);
        assert_eq!(
            response.status, 200,
            "link {link:?} of {dir} (GET {target}) in\n{html}"
        );
    }
    let json = get(addr, &format!("{dir}?format=json"));
    assert_eq!(json.status, 200, "{json:?}");
    assert_eq!(
        json.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    let entries: serde_json::Value = serde_json::from_slice(&json.body).expect("valid JSON");
    let mut names = BTreeSet::new();
    for entry in entries.as_array().expect("an array") {
        let name = entry["name"].as_str().expect("name").to_owned();
        let url = entry["url"].as_str().expect("url");
        assert_encoded(url);
        let response = get(addr, url);
        assert_eq!(response.status, 200, "{entry} ({url})");
        match entry["type"].as_str() {
            Some("file") => {
                let size = entry["size"].as_u64().expect("size");
                assert_eq!(size, response.body.len() as u64, "{entry}");
            }
            Some("directory") => assert!(url.ends_with('/'), "{entry}"),
            other => panic!("type {other:?} in {entry}"),
        }
        let modified = entry["modified"].as_str().expect("modified");
        assert!(
            modified.len() == 20 && modified.ends_with('Z') && modified.as_bytes()[10] == b'T',
            "RFC 3339 UTC time expected: {modified}"
        );
        names.insert(name);
    }
    names
}

default_arch!(fn every_listed_link_fetches(arch) {
    let root = awkward_root();
    let server = Server::start(
        Options::new(root.path(), arch).args(["--autoindex", "--dotfiles"]),
    );
    let addr = server.addr();
    let names = walk(addr, "/awk/");
    for name in SERVABLE {
        assert!(names.contains(name), "{name:?} not listed: {names:?}");
    }
    for name in REFUSED {
        assert!(!names.contains(name), "{name:?} is listed but refused");
    }
    for name in ["a-fifo", "dangling-link", "escaping-link"] {
        assert!(!names.contains(name), "{name} is listed but cannot be fetched");
    }
    assert!(names.contains("inside-link"), "{names:?}");
    assert!(names.contains("sub dir #1"), "{names:?}");
    // Each served name's link gives that file (the body is the name).
    let json = get(addr, "/awk/?format=json");
    let entries: serde_json::Value = serde_json::from_slice(&json.body).unwrap();
    for entry in entries.as_array().unwrap() {
        let name = entry["name"].as_str().unwrap();
        if SERVABLE.contains(&name) {
            let body = get(addr, entry["url"].as_str().unwrap()).body;
            assert_eq!(body, name.as_bytes(), "{entry}");
        }
    }
    // One level down: the parent link and the sort links work there too.
    let below = walk(addr, "/awk/sub%20dir%20%231/");
    assert_eq!(below.into_iter().collect::<Vec<_>>(), ["inner file.txt"]);
    // The root has no parent link.
    let top = get(addr, "/");
    assert!(!hrefs(&top.body_text()).iter().any(|link| link.starts_with("..")));
});

/// The names of a JSON listing in order.
fn json_names(addr: SocketAddr, target: &str) -> Vec<String> {
    let response = get(addr, target);
    assert_eq!(response.status, 200, "{target}: {response:?}");
    let entries: serde_json::Value = serde_json::from_slice(&response.body).expect("JSON");
    entries
        .as_array()
        .expect("an array")
        .iter()
        .map(|entry| entry["name"].as_str().expect("name").to_owned())
        .collect()
}

default_arch!(fn sorting_formats_and_revalidation(arch) {
    let root = TempRoot::new();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    root.file("d/small.txt", "x");
    root.file("d/Big.bin", vec![7u8; 3000]);
    root.file("d/medium.txt", "0123456789");
    root.set_mtime("d/medium.txt", hour_ago);
    root.dir("d/sub");
    root.file("d/.hidden", "h");
    let server = Server::start(Options::new(root.path(), arch).arg("--autoindex"));
    let addr = server.addr();

    assert_eq!(json_names(addr, "/d/?format=json"), ["sub", "Big.bin", "medium.txt", "small.txt"]);
    assert_eq!(
        json_names(addr, "/d/?format=json&sort=size&order=desc"),
        ["sub", "Big.bin", "medium.txt", "small.txt"]
    );
    assert_eq!(
        json_names(addr, "/d/?sort=size&format=json"),
        ["sub", "small.txt", "medium.txt", "Big.bin"]
    );
    assert_eq!(
        json_names(addr, "/d/?sort=time&order=asc&format=json")[1],
        "medium.txt",
        "the oldest file first"
    );

    // The HTML page: human size with exact bytes, UTC time, sorted as asked, no script.
    let page = get(addr, "/d/?sort=size&order=desc");
    assert_eq!(page.status, 200);
    assert_eq!(page.header("content-type"), Some("text/html; charset=utf-8"));
    let policy = page.header("content-security-policy").expect("a CSP");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    let html = page.body_text();
    assert!(html.contains("name=\"viewport\""), "{html}");
    assert!(html.contains("title=\"3000 bytes\">2.9 KiB<"), "{html}");
    assert!(html.contains(" UTC</time>"), "{html}");
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains(".hidden"), "dot-files are not listed without --dotfiles");
    let big = html.find(">Big.bin<").unwrap();
    let small = html.find(">small.txt<").unwrap();
    assert!(big < small, "largest first: {html}");
    assert!(html.contains("<a href=\"?sort=size&amp;order=asc\">Size"), "{html}");

    // Revalidation: the ETag names this page; it changes when the directory does.
    let etag = page.header("etag").expect("an ETag").to_owned();
    assert!(page.header("last-modified").is_none());
    let again = request(addr, "GET", "/d/?sort=size&order=desc", &[("If-None-Match", &etag)]);
    assert_eq!(again.status, 304, "{again:?}");
    assert!(again.body.is_empty());
    assert_eq!(again.header("etag"), Some(etag.as_str()));
    let other_order = request(addr, "GET", "/d/", &[("If-None-Match", &etag)]);
    assert_eq!(other_order.status, 200, "another view is another page");
    root.file("d/new.txt", "new");
    let changed = request(addr, "GET", "/d/?sort=size&order=desc", &[("If-None-Match", &etag)]);
    assert_eq!(changed.status, 200);
    assert!(changed.body_text().contains(">new.txt<"));
    assert_ne!(changed.header("etag"), Some(etag.as_str()));

    // HEAD: the same head, no body.
    let head = request(addr, "HEAD", "/d/?format=json", &[]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-type"), Some("application/json; charset=utf-8"));

    // A known parameter with a value it does not take is a 400; unknown parameters are ignored.
    assert_eq!(get(addr, "/d/?sort=colour").status, 400);
    assert_eq!(get(addr, "/d/?format=xml").status, 400);
    assert_eq!(get(addr, "/d/?v=3").status, 200);
    // The server keeps serving.
    assert_eq!(get(addr, "/d/small.txt").body, b"x");
});
