//! Escaping the document root: dot-segments in every encoding, backslashes, NUL, overlong UTF-8,
//! absolute-form URIs and symlinks. A `secret.txt` sits next to (outside) the root and its content
//! must never appear in any response.

use crate::support;

use support::*;

const SECRET: &str = "TOP-SECRET-c0ffee-4242";

/// (request-target, statuses allowed). Secret content is checked on every response regardless.
const CASES: &[(&str, &[u16])] = &[
    ("/../secret.txt", &[400]),
    ("/../../secret.txt", &[400]),
    ("/sub/../../secret.txt", &[400]),
    ("/./../secret.txt", &[400]),
    ("/sub/./../../secret.txt", &[400]),
    ("/..", &[400]),
    ("/%2e%2e/secret.txt", &[400]),
    ("/%2E%2E/secret.txt", &[400]),
    ("/.%2e/secret.txt", &[400]),
    ("/%2e./secret.txt", &[400]),
    ("/%2e%2e", &[400]),
    ("/sub/%2e%2e/%2e%2e/secret.txt", &[400]),
    ("/..%2fsecret.txt", &[400]),
    ("/%2e%2e%2fsecret.txt", &[400]),
    ("/sub/..%2f..%2fsecret.txt", &[400]),
    ("/%2f..%2fsecret.txt", &[400]),
    ("/sub/%2e%2e%2f%2e%2e%2fsecret.txt", &[400]),
    ("/%252e%252e/secret.txt", &[404]),
    ("/%252e%252e%252fsecret.txt", &[404]),
    ("/..%252fsecret.txt", &[404]),
    ("/..%5csecret.txt", &[400]),
    ("/..%5Csecret.txt", &[400]),
    ("/..\\secret.txt", &[400]),
    ("/sub\\..\\..\\secret.txt", &[400]),
    ("/%5c..%5csecret.txt", &[400]),
    ("/%2e%2e%5csecret.txt", &[400]),
    ("/..%00/secret.txt", &[400]),
    ("/secret.txt%00.html", &[400]),
    ("/ok.txt%00", &[400]),
    ("/.%00./secret.txt", &[400]),
    ("/%c0%ae%c0%ae/secret.txt", &[400]),
    ("/%c0%ae%c0%ae%c0%afsecret.txt", &[400]),
    ("/%e0%80%ae%e0%80%ae/secret.txt", &[400]),
    ("/..%c0%afsecret.txt", &[400]),
    ("/%c1%9c..%c1%9csecret.txt", &[400]),
    ("/%ff/secret.txt", &[400]),
    ("/%u002e%u002e/secret.txt", &[400]),
    ("/%", &[400]),
    ("/%2", &[400]),
    ("/%zz", &[400]),
    ("/.../secret.txt", &[404]),
    ("/..;/secret.txt", &[404]),
    ("//../secret.txt", &[400, 404]),
    ("/../../../../../../etc/passwd", &[400]),
    ("/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd", &[400]),
    ("http://test/../secret.txt", &[400]),
    ("http://test/%2e%2e/secret.txt", &[400]),
    ("http://test/sub/..%2f..%2fsecret.txt", &[400]),
    ("/linkout/secret.txt", &[403, 404]),
    ("/secretlink.txt", &[403, 404]),
    ("/abslink.txt", &[403, 404]),
    ("/sub/inner-escape.txt", &[403, 404]),
    ("/twinlink.txt", &[403, 404]),
    ("/abs-dotdot.txt", &[403, 404]),
    ("/abs-outdir/secret.txt", &[403, 404]),
    ("*", &[400]),
    ("secret.txt", &[400]),
    // Positive controls: these stay inside the root and must be served.
    ("/sub/../ok.txt", &[200]),
    ("/%6f%6b.txt", &[200]),
    ("/./ok.txt", &[200]),
    ("/sub/./../ok.txt", &[200]),
    ("http://test/ok.txt", &[200]),
    ("/ok.txt?../../secret.txt", &[200]),
];

fn build_root() -> TempRoot {
    let root = TempRoot::new();
    let secret = root.outside_file("secret.txt", SECRET);
    root.file("ok.txt", "inside the root");
    root.file("sub/file.txt", "sub file");
    root.symlink("../secret.txt", "secretlink.txt");
    root.symlink(&secret, "abslink.txt");
    root.symlink("..", "linkout");
    root.symlink("../../secret.txt", "sub/inner-escape.txt");
    // Absolute links that name the root's path as a string prefix only, or climb out of it.
    let twin = root.outside_file("www-twin/secret.txt", SECRET);
    root.symlink(&twin, "twinlink.txt");
    root.symlink(root.path().join("../secret.txt"), "abs-dotdot.txt");
    root.symlink(root.outside_dir(), "abs-outdir");
    root
}

default_arch!(fn no_encoding_escapes_the_root(arch) {
    let root = build_root();
    let server = Server::start(Options::new(root.path(), arch));
    let mut failures = Vec::new();
    for (target, allowed) in CASES {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        let bytes = send_raw(server.addr(), raw.as_bytes());
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(SECRET), "SECRET LEAKED for {target:?}: {text}");
        assert!(!text.contains("root:x:0:0"), "/etc/passwd leaked for {target:?}");
        let responses = support::http::parse_all(&bytes, "GET");
        match responses.first() {
            Some(response) if allowed.contains(&response.status) => {
                if response.status == 200 {
                    assert_eq!(response.body, b"inside the root", "{target}");
                }
            }
            Some(response) => failures.push(format!("{target:?}: {} (want {allowed:?})", response.status)),
            None => failures.push(format!("{target:?}: no response")),
        }
    }
    assert!(failures.is_empty(), "{} of {} cases wrong:\n{}", failures.len(), CASES.len(), failures.join("\n"));
});

default_arch!(fn follow_symlinks_serves_outside_links(arch) {
    let root = build_root();
    let server = Server::start(Options::new(root.path(), arch).arg("--follow-symlinks"));
    let response = get(server.addr(), "/secretlink.txt");
    assert_eq!(response.status, 200);
    assert_eq!(response.body_text(), SECRET);
    let response = get(server.addr(), "/abslink.txt");
    assert_eq!(response.body_text(), SECRET);
    // Dot-segments still may not climb out, even with symlinks followed.
    assert_eq!(get(server.addr(), "/../secret.txt").status, 400);
});
