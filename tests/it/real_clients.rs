//! Real clients against the server: curl (HTTP/1.1 and 1.0, ranges, conditionals, compressed
//! transfer via a real gzip sibling) and Python's http.client (tests/clients/*.py).

use crate::support;

use std::process::Command;
use support::*;

fn url(server: &Server, path: &str) -> String {
    format!("http://{}{path}", server.addr())
}

fn build_root() -> TempRoot {
    let root = TempRoot::new();
    root.file("index.html", "<h1>python</h1>");
    let data: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    root.file("data.bin", data);
    root.file("dir/index.html", "dir index");
    root.file("text.txt", "plain text for gzip ".repeat(100));
    let status = Command::new("gzip")
        .args(["-k", "-9"])
        .arg(root.path().join("text.txt"))
        .status()
        .expect("gzip must be installed");
    assert!(status.success());
    root
}

/// Splits `curl -D -` output into (status code, header block).
fn status_of(dump: &str) -> u16 {
    dump.lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {dump:?}"))
}

for_each_arch!(fn curl_basics(arch) {
    let root = build_root();
    let server = Server::start(Options::new(root.path(), arch));
    let out_dir = root.outside_dir();
    let body_path = out_dir.join("curl-body");

    let output = curl(["-sS", "-D", "-", "-o"].iter().map(|s| s.to_string()).chain([body_path.display().to_string(), url(&server, "/index.html")]));
    assert!(output.status.success(), "{output:?}");
    let dump = String::from_utf8_lossy(&output.stdout);
    assert_eq!(status_of(&dump), 200);
    assert!(dump.to_ascii_lowercase().contains("server: ampd"), "{dump}");
    assert_eq!(std::fs::read(&body_path).unwrap(), b"<h1>python</h1>");

    let output = curl(["-sS", "--http1.0", "-D", "-", &url(&server, "/index.html")]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(status_of(&text), 200);
    assert!(text.ends_with("<h1>python</h1>"), "{text}");

    let output = curl(["-sS", "-r", "10-19", &url(&server, "/data.bin")]);
    assert_eq!(output.stdout, (10..20u8).collect::<Vec<u8>>());

    let output = curl(["-sS", "-D", "-", "-o", "/dev/null", &url(&server, "/data.bin")]);
    let dump = String::from_utf8_lossy(&output.stdout).to_string();
    let etag = dump
        .lines()
        .find_map(|line| line.strip_prefix("ETag: ").or_else(|| line.strip_prefix("etag: ")))
        .expect("ETag in curl dump")
        .trim()
        .to_string();
    let header = format!("If-None-Match: {etag}");
    let output = curl(["-sS", "-D", "-", "-H", &header, &url(&server, "/data.bin")]);
    let dump = String::from_utf8_lossy(&output.stdout);
    assert_eq!(status_of(&dump), 304, "{dump}");

    let output = curl(["-sS", "--compressed", "-D", "-", "-o", &body_path.display().to_string(), &url(&server, "/text.txt")]);
    let dump = String::from_utf8_lossy(&output.stdout).to_ascii_lowercase();
    assert!(dump.contains("content-encoding: gzip"), "{dump}");
    assert_eq!(std::fs::read(&body_path).unwrap(), "plain text for gzip ".repeat(100).as_bytes());

    // Several URLs on one curl invocation reuse the connection.
    let output = curl(["-sS", &url(&server, "/index.html"), &url(&server, "/dir/")]);
    assert_eq!(output.stdout, b"<h1>python</h1>dir index");
});

for_each_arch!(fn python_http_client(arch) {
    let root = build_root();
    let server = Server::start(Options::new(root.path(), arch));
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/http_client_checks.py");
    let output = Command::new("python3")
        .arg(&script)
        .arg(server.addr().ip().to_string())
        .arg(server.addr().port().to_string())
        .output()
        .expect("python3 must be installed");
    assert!(
        output.status.success(),
        "python http.client checks failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
});
