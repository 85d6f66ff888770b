//! Static files compressed on the fly (docs/config.md "Compression on the fly"): compressed once
//! per coding and kept in the compressed cache, then served like a precompressed sibling (a
//! pre-built head with `Content-Length`, shared bytes). Decoded here as clients decode them:
//! Python's `gzip`, `brotli` and `zstandard` over `http.client`, curl `--compressed` over
//! HTTP/1.1 and h2c, and a page in headless Chromium whose CSS and JS come compressed. What is
//! left plain (a PNG, a file under `compress_min_length`, `compress = false`, identity, a range,
//! a file past `compressed_max_file`), the validators (weak `ETag`, `304` by it), `HEAD`, a file
//! changed on disk, and the compressed cache's counts in `/status`.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use support::bulk::sha256;
use support::h2::PYTHON;
use support::tls::{eventually, tls_addr, write_tls_config, Ca, Issued, KeyKind};
use support::*;

const WAIT: Duration = Duration::from_secs(10);

/// Fetches `path` with `Accept-Encoding: accept` (none for `-`) and the `extra` fields, decodes
/// the body by its `Content-Encoding` and prints status, fields, the raw length and the
/// decoded body's SHA-256.
const FETCH: &str = r#"
import sys, json, http.client, gzip, hashlib
port, path, accept, method = sys.argv[1:5]
headers = {} if accept == "-" else {"Accept-Encoding": accept}
for extra in sys.argv[5:]:
    name, value = extra.split(":", 1)
    headers[name] = value.strip()
connection = http.client.HTTPConnection("127.0.0.1", int(port), timeout=20)
connection.request(method, path, headers=headers)
response = connection.getresponse()
raw = response.read()
coding = response.getheader("Content-Encoding")
if coding == "gzip":
    body = gzip.decompress(raw)
elif coding == "br":
    import brotli
    body = brotli.decompress(raw)
elif coding == "zstd":
    import zstandard
    body = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
else:
    body = raw
print(json.dumps({"status": response.status,
    "headers": {name.lower(): value for name, value in response.getheaders()},
    "raw": len(raw), "sha": hashlib.sha256(body).hexdigest(), "len": len(body)}))
"#;

/// One response as `FETCH` saw it.
struct Fetched(Value);

impl Fetched {
    fn status(&self) -> u64 {
        self.0["status"].as_u64().unwrap()
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.0["headers"][name].as_str()
    }
    fn raw(&self) -> u64 {
        self.0["raw"].as_u64().unwrap()
    }
    fn sha(&self) -> &str {
        self.0["sha"].as_str().unwrap()
    }
    fn vary_has_accept_encoding(&self) -> bool {
        self.header("vary")
            .is_some_and(|vary| vary.to_ascii_lowercase().contains("accept-encoding"))
    }
}

fn fetch(port: u16, method: &str, path: &str, accept: &str, extra: &[&str]) -> Fetched {
    let output = Command::new("timeout")
        .args(["-k", "5", "30", PYTHON, "-c", FETCH])
        .args([&port.to_string(), path, accept, method])
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("python3");
    let text = String::from_utf8_lossy(&output.stdout);
    Fetched(serde_json::from_str(text.trim()).unwrap_or_else(|_| {
        panic!(
            "fetch {path}: {text}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    }))
}

/// Text that compresses well but is not one repeated line: `len` bytes.
fn text_of(len: usize, seed: usize) -> Vec<u8> {
    let mut text = Vec::with_capacity(len + 64);
    let mut line = 0;
    while text.len() < len {
        text.extend_from_slice(
            format!(
                "{{\"line\": {line}, \"seed\": {seed}, \"word\": \"w{}\"}},\n",
                line * 7 % 13
            )
            .as_bytes(),
        );
        line += 1;
    }
    text.truncate(len);
    text
}

/// `bytes` gzipped by gzip(1), as a site's build step makes a precompressed sibling.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut child = Command::new("gzip")
        .args(["-9", "-n", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    child.wait_with_output().expect("gzip output").stdout
}

/// The sample `name` of the status page (`ampd_cache_hits_total{cache="compressed"} 5`).
fn sample(port: u16, name: &str) -> f64 {
    let response = get(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        "/status",
    );
    response
        .body_text()
        .lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

const STATUS: &str = "[[site.location]]\npath = \"/status\"\nexact = true\nhandler = \"status\"\n";

/// A site on `root` with a status location, `/plain/` not compressed, `/fixed/` and
/// `/kept/` whose responses say `no-transform`, and `more` server lines.
fn start(root: &TempRoot, arch: &str, more: &str) -> Server {
    let body = format!(
        "{more}\n[[site]]\nroot = \"www\"\n{STATUS}\n[[site.location]]\npath = \"/plain/\"\n\
         compress = false\n[[site.location]]\npath = \"/fixed/\"\n\
         cache_control = \"public, no-transform\"\n[[site.location]]\npath = \"/kept/\"\n\
         headers = {{ \"Cache-Control\" = \"no-transform\" }}\n"
    );
    Server::start(Options::config_file(&write_config(root, arch, &body)))
}

default_arch!(fn compressed_once_then_served_from_the_compressed_cache(arch) {
    let root = TempRoot::new();
    let json = text_of(100 << 10, 1);
    root.file("data.json", &json);
    // One event loop: every request meets the same compressed cache, so its counts are exact.
    let _ = arch;
    let server = start(&root, "amped", "");
    let port = server.addr().port();
    let expected = sha256(&json);
    let mut etags = Vec::new();
    for coding in ["gzip", "br", "zstd"] {
        let first = fetch(port, "GET", "/data.json", coding, &[]);
        assert_eq!(first.status(), 200, "{}", first.0);
        assert_eq!(first.header("content-encoding"), Some(coding), "{}", first.0);
        assert_eq!(first.sha(), expected, "{coding} decodes to the file");
        assert!(first.raw() < json.len() as u64 / 4, "{coding}: {} bytes", first.raw());
        assert!(first.vary_has_accept_encoding(), "{}", first.0);
        assert_eq!(first.header("content-length"), Some(first.raw().to_string().as_str()),
            "the compressed length is known: {}", first.0);
        assert_eq!(first.header("accept-ranges"), None, "{}", first.0);
        let etag = first.header("etag").unwrap().to_owned();
        assert!(etag.starts_with("W/\""), "a weak validator: {etag}");
        let again = fetch(port, "GET", "/data.json", coding, &[]);
        assert_eq!(again.sha(), expected);
        assert_eq!(again.0["headers"]["content-length"], first.0["headers"]["content-length"]);
        etags.push(etag);
    }
    // The second request of each coding came from the compressed cache, the first did not.
    assert!(eventually(WAIT, || sample(port, "ampd_cache_hits_total{cache=\"compressed\"}") >= 3.0),
        "hits {}", sample(port, "ampd_cache_hits_total{cache=\"compressed\"}"));
    assert_eq!(sample(port, "ampd_cache_hits_total{cache=\"compressed\"}"), 3.0);
    assert_eq!(sample(port, "ampd_cache_misses_total{cache=\"compressed\"}"), 3.0);
    assert!(sample(port, "ampd_cache_bytes{cache=\"compressed\"}") > 0.0);

    // curl decodes what it asked for.
    let url = format!("http://127.0.0.1:{port}/data.json");
    let output = curl(["-s", "--compressed", "-D", "-", "-o", "/dev/null", url.as_str()]);
    let head = String::from_utf8_lossy(&output.stdout).to_ascii_lowercase();
    assert!(head.contains("content-encoding:"), "{head}");
    let output = curl(["-s", "--compressed", url.as_str()]);
    assert_eq!(output.stdout, json, "curl --compressed");

    // Identity: plain, with Vary and the strong validator.
    let plain = fetch(port, "GET", "/data.json", "identity", &[]);
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.raw(), json.len() as u64);
    assert!(plain.vary_has_accept_encoding(), "{}", plain.0);
    let strong = plain.header("etag").unwrap().to_owned();
    assert_eq!(format!("W/{strong}"), etags[0]);
    let none = fetch(port, "GET", "/data.json", "-", &[]);
    assert_eq!(none.header("content-encoding"), None);

    // A range is of the identity representation.
    let ranged = fetch(port, "GET", "/data.json", "gzip", &["Range: bytes=10-19"]);
    assert_eq!(ranged.status(), 206, "{}", ranged.0);
    assert_eq!(ranged.header("content-encoding"), None);
    assert_eq!(ranged.sha(), sha256(&json[10..20]));

    // HEAD: the compressed response's head, no body.
    let get_head = fetch(port, "GET", "/data.json", "gzip", &[]);
    let head = fetch(port, "HEAD", "/data.json", "gzip", &[]);
    assert_eq!(head.raw(), 0);
    for name in ["content-encoding", "content-length", "etag", "vary", "content-type"] {
        assert_eq!(head.header(name), get_head.header(name), "{name}: {}", head.0);
    }

    // 304 by the weak validator (If-None-Match compares weakly, RFC 9110 §13.1.2).
    let condition = format!("If-None-Match: {}", etags[0]);
    let not_modified = fetch(port, "GET", "/data.json", "gzip", &[condition.as_str()]);
    assert_eq!(not_modified.status(), 304, "{}", not_modified.0);
    assert_eq!(not_modified.header("etag"), Some(etags[0].as_str()));
    assert!(not_modified.vary_has_accept_encoding());
    assert_eq!(not_modified.raw(), 0);
});

default_arch!(fn what_is_left_plain(arch) {
    let root = TempRoot::new();
    let text = text_of(20 << 10, 2);
    root.file("image.png", &text);
    root.file("tiny.css", "p { margin: 0 }");
    root.file("plain/app.js", &text);
    root.file("fixed/app.js", &text);
    root.file("kept/app.js", &text);
    root.file("big.json", text_of(300 << 10, 3));
    // A precompressed sibling wins over compressing: it costs no CPU. Its bytes are sent as
    // they are (here of another text, to tell them apart).
    root.file("style.css", &text);
    let sibling_text = b"/* the sibling's text */\n".repeat(40);
    root.file("style.css.gz", gzip(&sibling_text));
    let server = start(&root, arch, "[caches]\ncompressed_max_file = \"64KiB\"\n");
    let port = server.addr().port();
    for path in ["/image.png", "/tiny.css", "/plain/app.js", "/fixed/app.js", "/kept/app.js", "/big.json"] {
        let response = fetch(port, "GET", path, "gzip, br, zstd", &[]);
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.header("content-encoding"), None, "{path}: {}", response.0);
        assert!(response.header("etag").is_some_and(|etag| etag.starts_with('"')), "{path}");
    }
    assert!(!fetch(port, "GET", "/plain/app.js", "gzip", &[]).vary_has_accept_encoding(),
        "a location that never compresses does not vary");
    assert!(fetch(port, "GET", "/big.json", "gzip", &[]).vary_has_accept_encoding(),
        "past compressed_max_file: plain, but the representation still varies");
    let sibling = fetch(port, "GET", "/style.css", "gzip", &[]);
    assert_eq!(sibling.header("content-encoding"), Some("gzip"));
    assert_eq!(sibling.sha(), sha256(&sibling_text), "the sibling's bytes");
    // A coding the sibling is not: compressed on the fly.
    let zstd = fetch(port, "GET", "/style.css", "zstd", &[]);
    assert_eq!(zstd.header("content-encoding"), Some("zstd"));
    assert_eq!(zstd.sha(), sha256(&text));
});

default_arch!(fn a_changed_file_is_compressed_afresh(arch) {
    let root = TempRoot::new();
    let first = text_of(30 << 10, 4);
    let path = root.file("app.js", &first);
    // One event loop, so that every request meets the same compressed cache (the default
    // engine runs one per core, each with its own caches).
    let _ = arch;
    let server = start(&root, "amped", "");
    let port = server.addr().port();
    assert_eq!(fetch(port, "GET", "/app.js", "gzip", &[]).sha(), sha256(&first));
    assert_eq!(fetch(port, "GET", "/app.js", "br", &[]).sha(), sha256(&first));
    // Another length.
    let second = text_of(31 << 10, 5);
    std::fs::write(&path, &second).unwrap();
    assert_eq!(fetch(port, "GET", "/app.js", "gzip", &[]).sha(), sha256(&second));
    // The same length and modification time: only inotify tells.
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let third = text_of(31 << 10, 6);
    assert_eq!(third.len(), second.len());
    std::fs::write(&path, &third).unwrap();
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(modified).unwrap();
    let after = fetch(port, "GET", "/app.js", "gzip", &[]);
    assert_eq!(after.header("content-encoding"), Some("gzip"));
    assert_eq!(after.sha(), sha256(&third), "not the stale compressed copy: {}", after.0);
    assert_eq!(fetch(port, "GET", "/app.js", "br", &[]).sha(), sha256(&third));
});

default_arch!(fn without_a_compressed_cache_each_request_compresses(arch) {
    let root = TempRoot::new();
    let text = text_of(40 << 10, 7);
    root.file("page.html", &text);
    let server = start(&root, arch, "[caches]\ncompressed_size = 0\n");
    let port = server.addr().port();
    for _ in 0..3 {
        let response = fetch(port, "GET", "/page.html", "br", &[]);
        assert_eq!(response.header("content-encoding"), Some("br"));
        assert_eq!(response.sha(), sha256(&text));
        assert!(response.header("content-length").is_some());
    }
    assert!(eventually(WAIT, || sample(port, "ampd_cache_misses_total{cache=\"compressed\"}") >= 3.0));
    assert_eq!(sample(port, "ampd_cache_hits_total{cache=\"compressed\"}"), 0.0);
});

default_arch!(fn compressed_over_h2c(arch) {
    let root = TempRoot::new();
    let text = text_of(50 << 10, 8);
    root.file("app.js", &text);
    let config = write_config(&root, arch, "[[site]]\nroot = \"www\"\n");
    let config_text = std::fs::read_to_string(&config).unwrap()
        .replace("listen = \"127.0.0.1:0\"", "listen = \"127.0.0.1:0 h2c\"");
    std::fs::write(&config, config_text).unwrap();
    let server = Server::start(Options::config_file(&config));
    let url = format!("http://127.0.0.1:{}/app.js", server.addr().port());
    for coding in ["gzip", "br", "zstd", "gzip"] {
        let output = curl(["-s", "--http2-prior-knowledge", "--compressed", "-H",
            &format!("Accept-Encoding: {coding}"), "-D", "-", url.as_str()]);
        let all = output.stdout;
        let split = support::http::find(&all, b"\r\n\r\n").expect("a head") + 4;
        let head = String::from_utf8_lossy(&all[..split]).to_ascii_lowercase();
        assert!(head.starts_with("http/2 200"), "{head}");
        assert!(head.contains(&format!("content-encoding: {coding}")), "{head}");
        assert!(head.contains("content-length:"), "{head}");
        assert_eq!(&all[split..], &text[..], "{coding} over h2c");
    }
});

for_each_arch!(fn every_engine_compresses_static_files(arch) {
    let root = TempRoot::new();
    // One file the file cache holds, one sent by `sendfile` (past `sendfile_threshold`).
    let small = text_of(20 << 10, 9);
    let large = text_of(200 << 10, 10);
    root.file("small.html", &small);
    root.file("large.json", &large);
    let server = Server::start(Options::new(root.path(), arch));
    let port = server.addr().port();
    for (path, text) in [("/small.html", &small), ("/large.json", &large)] {
        for coding in ["gzip", "br", "gzip"] {
            let response = fetch(port, "GET", path, coding, &[]);
            assert_eq!(response.status(), 200, "{path}");
            assert_eq!(response.header("content-encoding"), Some(coding), "{path}: {}", response.0);
            assert_eq!(response.sha(), sha256(text), "{path} {coding}");
        }
    }
});

/// Runs tests/fixtures/chromium_page.py (bounded: its own 60 s and `timeout` 90 s).
fn chromium_page(url: &str, profile: &Path) -> Value {
    let command = json!({"url": url, "resolve": "MAP a.test 127.0.0.1", "profile": profile,
        "expression": "document.getElementById('out').textContent", "timeout": 60});
    let mut child = Command::new("timeout")
        .args(["-k", "5", "90", PYTHON])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chromium_page.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chromium_page.py");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(command.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().expect("chromium_page.py output");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "chromium_page.py: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

default_arch!(fn chromium_renders_a_page_whose_css_and_js_are_compressed(arch) {
    let root = TempRoot::new();
    // Padding makes each file worth compressing (past compress_min_length).
    let padding = format!("/* {} */\n", "padding ".repeat(400));
    root.file("page.html", format!("<!doctype html><html><head>\
        <link rel=\"stylesheet\" href=\"style.css\"></head><body><p id=\"out\">not run</p>\
        <!-- {padding} --><script src=\"app.js\"></script></body></html>\n"));
    root.file("style.css", format!("{padding}#out {{ color: rgb(1, 2, 3); }}\n"));
    root.file("app.js", format!("{padding}const out = document.getElementById('out');\n\
        out.textContent = 'script ran, color ' + getComputedStyle(out).color;\n"));
    let ca = Ca::new(&root.outside_dir().join("pki"), "ampd test CA");
    let a: Issued = ca.server("a", &["a.test"], KeyKind::EcdsaP256);
    let body = format!("[[site]]\nserver_names = [\"a.test\"]\nroot = \"www\"\n\
        certificate = \"{}\"\ncertificate_key = \"{}\"\n", a.cert.display(), a.key.display());
    let config = write_tls_config(&root, arch, "\"127.0.0.1:0 tls\"", &body);
    let server = Server::start(Options::config_file(&config));
    let port = tls_addr(server.ready_line()).port();
    let profile = root.outside_dir().join("chromium-profile");
    let answer = chromium_page(&format!("https://a.test:{port}/page.html"), &profile);
    assert_eq!(answer["ok"], true, "{answer}\n{}", server.stderr());
    assert_eq!(answer["value"], "script ran, color rgb(1, 2, 3)", "{answer}");
    for name in ["page.html", "style.css", "app.js"] {
        let response = answer["responses"].as_array().unwrap().iter()
            .find(|response| response["url"].as_str().unwrap_or_default().ends_with(name))
            .unwrap_or_else(|| panic!("no response for {name}: {answer}"));
        assert_eq!(response["status"], 200, "{response}");
        let coding = response["content_encoding"].as_str().unwrap_or_default();
        assert!(["gzip", "br", "zstd"].contains(&coding), "{name} came compressed: {response}");
    }
});
