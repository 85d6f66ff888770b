//! CGI/1.1 (RFC 3875) under every engine, with real Python and Perl scripts
//! (tests/fixtures/cgi): the meta-variables a script sees (httpoxy's `Proxy` field never becomes
//! `HTTP_PROXY`), scripts found below an alias and never through a link out of it, HEAD,
//! `Status`, local and client `Location`, `X-Accel-Redirect`, an extension-mapped script,
//! responses without a length (chunked to HTTP/1.1, close-delimited to HTTP/1.0, streamed as the
//! script writes), 10 MiB and chunked request bodies on stdin, `max_body` refusing before the
//! script starts, malformed heads (502 and an error-log line naming the script), stderr in the
//! error log, `cgi_timeout` killing the script's process group (and a stop of ampd ending
//! running scripts), a script's leftover children killed when it exits (and its response ended
//! then, though one of them holds its stdout), a script whose client left ended, stderr within
//! a budget of lines and a length cap, scripts running as the configured `user`, and the `max_scripts` cap (503
//! with `Retry-After`).

use crate::support;

use std::io::{Read, Write};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use support::bulk::{pattern_sha256, sha256};
use support::gateway::{dump_value, fetch, post_pattern, Framing};
use support::http::{build_request, find, parse_all, send_raw, Conn, IO_TIMEOUT};
use support::processes::{wait_gone, wait_pid_file};
use support::scripts::install_cgi;
use support::*;

const MIB: u64 = 1 << 20;
const WAIT: Duration = Duration::from_secs(10);

/// The locations every test here serves: `/cgi-bin/` (scripts below the site root), `/slow-bin/`
/// with a 1 s `cgi_timeout`, `/small-bin/` with a 64 KiB `max_body`, and an internal
/// `/protected/` for `X-Accel-Redirect`.
const LOCATIONS: &str = r#"
[[site]]
root = "www"

[[site.location]]
path = "/cgi-bin/"
handler = "cgi"
max_body = "20MiB"
cgi_timeout = "60s"

[[site.location]]
path = "/slow-bin/"
handler = "cgi"
cgi_timeout = "1s"

[[site.location]]
path = "/small-bin/"
handler = "cgi"
max_body = "64KiB"

[[site.location]]
path = "/protected/"
internal = true
"#;

/// A root with the scripts in cgi-bin, slow-bin and small-bin, an extension-mapped script, a
/// local redirect's target, an internal file and a file in cgi-bin that is not executable.
fn build_root() -> TempRoot {
    let root = TempRoot::new();
    install_cgi(&root, "cgi-bin");
    install_cgi(&root, "slow-bin");
    install_cgi(&root, "small-bin");
    let hello = root.path().join("cgi-bin/hello.cgi");
    std::fs::copy(&hello, root.dir("scripts").join("hello.cgi")).expect("copy hello.cgi");
    root.file("target.txt", "the local redirect's target\n");
    root.file("hello.txt", "hello world\n");
    root.file("protected/report.txt", "the protected report\n");
    root.file("cgi-bin/readme.txt", "not a script\n");
    root
}

fn start(root: &TempRoot, arch: &str, max_scripts: usize) -> Server {
    start_with(root, arch, max_scripts, "")
}

/// `LOCATIONS` and then `more` locations.
fn start_with(root: &TempRoot, arch: &str, max_scripts: usize, more: &str) -> Server {
    let config = write_config(
        root,
        arch,
        &format!("[cgi]\nmax_scripts = {max_scripts}\n{LOCATIONS}\n{more}"),
    );
    Server::start(Options::config_file(&config))
}

default_arch!(fn cgi_meta_variables(arch) {
    let root = build_root();
    let server = start(&root, arch, 16);
    let www = root.path().display().to_string();

    // The Python dump: RFC 3875 §4.1's variables, HTTP_* fields, httpoxy.
    let mut conn = Conn::open(server.addr());
    let client_port = conn.stream().local_addr().unwrap().port().to_string();
    conn.send(
        "GET /cgi-bin/env.py/extra/path?a=1&b=2 HTTP/1.1\r\nHost: test\r\nProxy: evil\r\n\
         X-Custom: one\r\nX-Custom: two\r\nUser-Agent: cgi-test\r\n\r\n",
    );
    let env = conn.read_proxied("GET");
    assert_eq!(env.status, 200, "{env:?}\n{}", server.stderr());
    assert_eq!(env.header("x-cgi"), Some("python"), "{env:?}");
    assert_eq!(env.header("server"), Some("ampd"), "{env:?}");
    assert!(env.header("content-type").is_some_and(|value| value.starts_with("text/plain")));
    let dump = env.body_text();
    let dump_first = dump.clone();
    let port = server.addr().port().to_string();
    let script = format!("{www}/cgi-bin/env.py");
    let translated = format!("{www}/extra/path");
    let cwd = format!("{www}/cgi-bin");
    for (name, value) in [
        ("GATEWAY_INTERFACE", "CGI/1.1"),
        ("SERVER_PROTOCOL", "HTTP/1.1"),
        ("REQUEST_METHOD", "GET"),
        ("QUERY_STRING", "a=1&b=2"),
        ("REQUEST_URI", "/cgi-bin/env.py/extra/path?a=1&b=2"),
        ("SCRIPT_NAME", "/cgi-bin/env.py"),
        ("PATH_INFO", "/extra/path"),
        ("SCRIPT_FILENAME", script.as_str()),
        ("PATH_TRANSLATED", translated.as_str()),
        ("DOCUMENT_ROOT", www.as_str()),
        ("REMOTE_ADDR", "127.0.0.1"),
        ("REMOTE_PORT", client_port.as_str()),
        ("SERVER_ADDR", "127.0.0.1"),
        ("SERVER_NAME", "test"),
        ("HTTP_HOST", "test"),
        ("HTTP_USER_AGENT", "cgi-test"),
        ("HTTP_X_CUSTOM", "one, two"),
        ("REDIRECT_STATUS", "200"),
        ("CWD", cwd.as_str()),
        ("BODY_LEN", "0"),
    ] {
        assert_eq!(dump_value(&dump, name), Some(value), "{name} in:\n{dump}");
    }
    assert!(dump_value(&dump, "SERVER_SOFTWARE").is_some_and(|value| value.starts_with("ampd/")), "{dump}");
    // httpoxy: a client's `Proxy` field must never become the script's proxy setting.
    assert_eq!(dump_value(&dump, "HTTP_PROXY"), None, "{dump}");
    assert_eq!(dump_value(&dump, "CONTENT_LENGTH"), None, "no body, no CONTENT_LENGTH:\n{dump}");
    // The environment is the request's, not ampd's (cargo's variables are in ampd's).
    assert!(!dump.lines().any(|line| line.starts_with("CARGO")), "{dump}");

    // A body: CONTENT_LENGTH and CONTENT_TYPE, never as HTTP_* fields; the script reads it all.
    conn.send(
        "POST /cgi-bin/env.py HTTP/1.1\r\nHost: test\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\nx=1&y=2",
    );
    let posted = conn.read_proxied("POST");
    assert_eq!(posted.status, 200, "{posted:?}");
    let dump = posted.body_text();
    assert_eq!(dump_value(&dump, "CONTENT_LENGTH"), Some("7"), "{dump}");
    assert_eq!(dump_value(&dump, "CONTENT_TYPE"), Some("application/x-www-form-urlencoded"), "{dump}");
    assert_eq!(dump_value(&dump, "BODY_LEN"), Some("7"), "{dump}");
    assert_eq!(dump_value(&dump, "REQUEST_METHOD"), Some("POST"), "{dump}");
    assert_eq!(dump_value(&dump, "QUERY_STRING"), Some(""), "QUERY_STRING is set, empty:\n{dump}");
    assert_eq!(dump_value(&dump, "PATH_INFO"), None, "{dump}");
    assert_eq!(dump_value(&dump, "HTTP_CONTENT_LENGTH"), None, "{dump}");
    assert_eq!(dump_value(&dump, "HTTP_CONTENT_TYPE"), None, "{dump}");

    // Perl: the script's own fields reach the client.
    conn.send(build_request("GET", "/cgi-bin/env.pl", &[]));
    let perl = conn.read_proxied("GET");
    assert_eq!(perl.status, 200, "{perl:?}");
    assert_eq!(perl.header("x-cgi"), Some("perl"), "{perl:?}");
    assert_eq!(perl.header("cache-control"), Some("no-store"), "{perl:?}");
    assert_eq!(dump_value(&perl.body_text(), "GATEWAY_INTERFACE"), Some("CGI/1.1"));


    // The port the server listens on, as bound (the configuration says port 0).
    assert_eq!(dump_value(&dump_first, "SERVER_PORT"), Some(port.as_str()), "{dump_first}");
});

default_arch!(fn cgi_status_and_redirects(arch) {
    let root = build_root();
    let server = start(&root, arch, 16);

    // Status wins, even beside a local Location.
    let teapot = fetch(server.addr(), "GET", "/cgi-bin/status.py", &[]);
    assert_eq!(teapot.status, 418, "{teapot:?}");
    assert_eq!(teapot.body_text(), "teapot\n");

    // A local redirect is served inside ampd: the client sees the target, never a Location.
    let local = fetch(server.addr(), "GET", "/cgi-bin/redirect_local.py", &[]);
    assert_eq!(local.status, 200, "{local:?}");
    assert_eq!(local.body_text(), "the local redirect's target\n");
    assert!(!local.has_header("location"), "{local:?}");

    // A client redirect: 302 and the Location.
    let moved = fetch(server.addr(), "GET", "/cgi-bin/redirect_client.pl", &[]);
    assert_eq!(moved.status, 302, "{moved:?}");
    assert_eq!(moved.header("location"), Some("http://elsewhere.example/landing?from=cgi"));

    // X-Accel-Redirect hands the answer to the static path (an internal location).
    let accel = fetch(server.addr(), "GET", "/cgi-bin/accel.py", &[]);
    assert_eq!(accel.status, 200, "{accel:?}");
    assert_eq!(accel.body_text(), "the protected report\n");
    assert!(!accel.has_header("x-accel-redirect"), "{accel:?}");
    assert_eq!(fetch(server.addr(), "GET", "/protected/report.txt", &[]).status, 404, "internal: not for clients");

    // No such script: 404; a file that is not executable: 403.
    assert_eq!(fetch(server.addr(), "GET", "/cgi-bin/none.py", &[]).status, 404);
    assert_eq!(fetch(server.addr(), "GET", "/cgi-bin/readme.txt", &[]).status, 403);
});

default_arch!(fn cgi_extension_location(arch) {
    let root = build_root();
    let server = start_with(&root, arch, 16, "[[site.location]]\nextension = \".cgi\"\nhandler = \"cgi\"\n");
    let www = root.path().display().to_string();

    // An extension location: the segment ending in .cgi is the script, the rest PATH_INFO.
    let mapped = fetch(server.addr(), "GET", "/scripts/hello.cgi/more/info", &[]);
    assert_eq!(mapped.status, 200, "{mapped:?}");
    let text = mapped.body_text();
    assert_eq!(dump_value(&text, "SCRIPT_NAME"), Some("/scripts/hello.cgi"), "{text}");
    assert_eq!(dump_value(&text, "PATH_INFO"), Some("/more/info"), "{text}");
    let translated = format!("{www}/more/info");
    assert_eq!(dump_value(&text, "PATH_TRANSLATED"), Some(translated.as_str()), "{text}");

    // Paths without a .cgi segment are not the extension location's: static files stay static.
    let plain = fetch(server.addr(), "GET", "/hello.txt", &[]);
    assert_eq!(plain.status, 200, "{plain:?}");
    assert_eq!(plain.body_text(), "hello world\n");
    let local = fetch(server.addr(), "GET", "/cgi-bin/redirect_local.py", &[]);
    assert_eq!(local.status, 200, "{local:?}");
    assert_eq!(local.body_text(), "the local redirect's target\n");
});

default_arch!(fn cgi_script_lookup(arch) {
    let root = build_root();
    // Scripts outside the document root, reached through an alias.
    let outside = root.outside_dir().join("scripts");
    std::fs::create_dir_all(&outside).unwrap();
    for name in ["env.py", "marker.py"] {
        std::fs::copy(root.path().join("cgi-bin").join(name), outside.join(name)).unwrap();
    }
    // A link in cgi-bin to a script outside it: never run.
    root.symlink(outside.join("marker.py"), "cgi-bin/escape.py");
    let server = start_with(&root, arch, 16, &format!(
        "[[site.location]]\npath = \"/alias-bin/\"\nalias = \"{}/\"\nhandler = \"cgi\"\n",
        outside.display()
    ));

    let aliased = fetch(server.addr(), "GET", "/alias-bin/env.py/x", &[]);
    assert_eq!(aliased.status, 200, "{aliased:?}");
    let dump = aliased.body_text();
    let filename = outside.join("env.py").display().to_string();
    assert_eq!(dump_value(&dump, "SCRIPT_NAME"), Some("/alias-bin/env.py"), "{dump}");
    assert_eq!(dump_value(&dump, "SCRIPT_FILENAME"), Some(filename.as_str()), "{dump}");
    assert_eq!(dump_value(&dump, "PATH_INFO"), Some("/x"), "{dump}");

    let escape = fetch(server.addr(), "GET", "/cgi-bin/escape.py", &[]);
    assert_eq!(escape.status, 404, "{escape:?}");
    assert!(!outside.join("marker.txt").exists(), "a script outside cgi-bin ran through a link");

    // HEAD runs the script but sends no body.
    let mut conn = Conn::open(server.addr());
    conn.send(build_request("HEAD", "/cgi-bin/env.py", &[]));
    let head = conn.read_proxied("HEAD");
    assert_eq!(head.status, 200, "{head:?}");
    assert_eq!(head.header("x-cgi"), Some("python"));
    conn.send(build_request("GET", "/hello.txt", &[]));
    let next = conn.read_proxied("GET");
    assert_eq!(next.body_text(), "hello world\n", "no body bytes were left after the HEAD answer");
});

/// Reads from `stream` into `buffer` until `needle` is in it (each read bounded by the socket's
/// timeout, the whole by `within`).
fn read_until(stream: &mut impl Read, buffer: &mut Vec<u8>, needle: &[u8], within: Duration) {
    let deadline = Instant::now() + within;
    let mut chunk = [0u8; 16 << 10];
    while find(buffer, needle).is_none() {
        assert!(
            Instant::now() < deadline,
            "no {needle:?} within {within:?} in {:?}",
            String::from_utf8_lossy(buffer)
        );
        let n = support::read_some(&mut *stream, &mut chunk).expect("read the streamed response");
        assert!(
            n > 0,
            "closed before {needle:?}: {:?}",
            String::from_utf8_lossy(buffer)
        );
        buffer.extend_from_slice(&chunk[..n]);
    }
}

for_each_arch!(fn cgi_streams_and_request_bodies(arch) {
    let root = build_root();
    let server = start(&root, arch, 16);

    // No length from the script: chunked to an HTTP/1.1 client, and streamed: the first part
    // arrives while the script still waits for stream.go.
    let mut stream = std::net::TcpStream::connect(server.addr()).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.write_all(b"GET /cgi-bin/stream.py HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    let mut received = Vec::new();
    read_until(&mut stream, &mut received, b"part one\n", WAIT);
    let head_end = find(&received, b"\r\n\r\n").expect("a head before the body");
    let head = String::from_utf8_lossy(&received[..head_end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    std::fs::write(root.path().join("cgi-bin/stream.go"), "go").unwrap();
    read_until(&mut stream, &mut received, b"\r\n0\r\n\r\n", WAIT);
    let body = dechunk(&received[head_end + 4..]);
    assert_eq!(body, b"part one\npart two\npart three\npart four\n");

    // The connection stays usable after a chunked answer (stream.go exists now: no wait).
    let mut conn = Conn::open(server.addr());
    for _ in 0..2 {
        conn.send(build_request("GET", "/cgi-bin/stream.py", &[]));
        let again = conn.read_proxied("GET");
        assert_eq!(again.status, 200, "{again:?}");
        assert_eq!(again.header("transfer-encoding"), Some("chunked"), "{again:?}");
        assert_eq!(again.body_text(), "part one\npart two\npart three\npart four\n");
    }

    // HTTP/1.0 has no chunked coding: the body ends where the connection does.
    let mut old = Conn::open(server.addr());
    old.send("GET /cgi-bin/stream.py HTTP/1.0\r\nHost: test\r\n\r\n");
    let old = old.read_response("GET");
    assert_eq!(old.status, 200, "{old:?}");
    assert!(!old.has_header("transfer-encoding") && !old.has_header("content-length"), "{old:?}");
    assert_eq!(old.body_text(), "part one\npart two\npart three\npart four\n");

    // 10 MiB on a Perl script's stdin, echoed whole.
    let big = post_pattern(server.addr(), "/cgi-bin/echo.pl", 10 * MIB, Framing::Length,
        &[("Content-Type", "application/octet-stream")]);
    assert_eq!(big.status, 200, "{}", big.status);
    assert_eq!(big.header("x-cgi"), Some("perl"));
    assert_eq!(big.body.len() as u64, 10 * MIB);
    assert_eq!(sha256(&big.body), pattern_sha256(10 * MIB), "the 10 MiB echo differs");

    // A chunked request body reaches the script whole, with an exact CONTENT_LENGTH: Perl
    // reads CONTENT_LENGTH bytes, Python reads to the end of its stdin.
    let chunked = post_pattern(server.addr(), "/cgi-bin/echo.pl", MIB, Framing::Chunked(16 << 10),
        &[("Content-Type", "application/octet-stream")]);
    assert_eq!(chunked.status, 200, "{}", chunked.status);
    assert_eq!(sha256(&chunked.body), pattern_sha256(MIB), "the chunked echo differs");
    let streamed = post_pattern(server.addr(), "/cgi-bin/echo.py", MIB, Framing::Chunked(10_000), &[]);
    assert_eq!(streamed.status, 200, "{}", streamed.status);
    assert_eq!(streamed.header("x-content-length"), Some("1048576"));
    assert_eq!(sha256(&streamed.body), pattern_sha256(MIB), "the Python echo differs");

    // Over the location's max_body: 413, and the script never started (no marker), whether
    // the length is declared or the chunks run past it.
    let marker = root.path().join("small-bin/marker.txt");
    let declared = parse_all(&send_raw(server.addr(), format!(
        "POST /small-bin/marker.py HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n",
        100_000
    )), "POST");
    assert_eq!(declared.first().map(|response| response.status), Some(413), "{declared:?}");
    let mut over = b"POST /small-bin/marker.py HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    support::bulk::write_pattern_chunked(&mut over, 100_000, 8192).unwrap();
    let chunked_over = parse_all(&send_raw(server.addr(), over), "POST");
    assert_eq!(chunked_over.first().map(|response| response.status), Some(413), "{chunked_over:?}");
    assert!(!marker.exists(), "a refused request started the script");
    // Within the limit the same script runs (and leaves its marker).
    let small = fetch(server.addr(), "POST", "/small-bin/marker.py", &[("Content-Length", "0")]);
    assert_eq!(small.status, 200, "{small:?}");
    assert!(marker.exists(), "the script ran but left no marker");
});

/// De-chunks a complete chunked body (RFC 9112 §7.1), trailers ignored.
fn dechunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = find(bytes, b"\r\n").expect("chunk size line");
        let size_text = String::from_utf8_lossy(&bytes[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size_text:?}"));
        bytes = &bytes[line_end + 2..];
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&bytes[..size]);
        assert_eq!(
            &bytes[size..size + 2],
            b"\r\n",
            "chunk data not followed by CRLF"
        );
        bytes = &bytes[size + 2..];
    }
}

for_each_arch!(fn cgi_faults_are_contained(arch) {
    let root = build_root();
    let server = start(&root, arch, 16);

    // A malformed head is never passed on: 502, and the error log names the script.
    for case in ["lf", "ctl", "cr", "status", "noblank"] {
        let bad = fetch(server.addr(), "GET", &format!("/cgi-bin/bad_header.py?{case}"), &[]);
        assert_eq!(bad.status, 502, "{case}: {bad:?}");
        assert!(!bad.has_header("x-bad") && !bad.body_text().contains("never sent"), "{case}: {bad:?}");
    }
    assert!(
        server.wait_for_stderr("bad_header.py", WAIT),
        "no error-log line names the script:\n{}",
        server.stderr()
    );

    // stderr lines go to the error log, with the script's name; the answer is unaffected.
    let noisy = fetch(server.addr(), "GET", "/cgi-bin/stderr.pl", &[]);
    assert_eq!(noisy.status, 200, "{noisy:?}");
    assert_eq!(noisy.body_text(), "answered\n");
    assert!(server.wait_for_stderr("stderr line two from perl", WAIT), "{}", server.stderr());
    let log = server.stderr();
    for text in ["stderr line one from perl", "stderr line two from perl"] {
        assert!(
            log.lines().any(|line| line.contains(text) && line.contains("stderr.pl")),
            "no line with {text:?} and the script's name:\n{log}"
        );
    }

    // Past cgi_timeout (1 s here): 504, and the script and its child are gone (the whole
    // process group was killed).
    let started = Instant::now();
    let mut conn = Conn::open(server.addr());
    conn.set_read_timeout(Duration::from_secs(8));
    conn.send(build_request("GET", "/slow-bin/sleep.py", &[]));
    let late = conn
        .try_read_proxied("GET")
        .unwrap_or_else(|error| panic!("no answer 8 s into a 1 s cgi_timeout: {error}\n{}", server.stderr()));
    assert_eq!(late.status, 504, "{late:?}");
    assert!(started.elapsed() < Duration::from_secs(8), "504 after {:?}", started.elapsed());
    let script = wait_pid_file(&root.path().join("slow-bin/sleep.pid"), WAIT);
    let child = wait_pid_file(&root.path().join("slow-bin/sleep-child.pid"), WAIT);
    assert!(wait_gone(script, WAIT), "the timed-out script {script} still runs");
    assert!(wait_gone(child, WAIT), "the timed-out script's child {child} still runs");

    // A script that exits leaving children behind: the response ends with the script although
    // one child holds its stdout (cgi_timeout is 60 s here), and the children go with it, so
    // `max_scripts` bounds processes, not only scripts.
    let started = Instant::now();
    let orphans = fetch(server.addr(), "GET", "/cgi-bin/orphans.sh", &[]);
    assert_eq!((orphans.status, orphans.body_text().as_str()), (200, "left two children\n"), "{orphans:?}");
    assert!(started.elapsed() < Duration::from_secs(8), "the response ended after {:?}", started.elapsed());
    let cgi_bin = root.path().join("cgi-bin");
    let group = wait_pid_file(&cgi_bin.join("orphans.pid"), WAIT);
    for name in ["orphan-holding.pid", "orphan-quiet.pid"] {
        let child = wait_pid_file(&cgi_bin.join(name), WAIT);
        assert!(wait_gone(child, WAIT), "the script's child {child} ({name}) outlived it");
    }
    let deadline = Instant::now() + WAIT;
    while !group_members(group).is_empty() {
        assert!(Instant::now() < deadline, "left in the script's group: {:?}", group_members(group));
        thread::sleep(Duration::from_millis(20));
    }

    // A client that leaves while its script runs (20 s, cgi_timeout 60 s) ends the exchange:
    // the script's group gets SIGTERM (Python's default action ends both it and its child).
    let mut conn = Conn::open(server.addr());
    conn.send(build_request("GET", "/cgi-bin/sleep.py", &[]));
    let script = wait_pid_file(&cgi_bin.join("sleep.pid"), WAIT);
    let child = wait_pid_file(&cgi_bin.join("sleep-child.pid"), WAIT);
    drop(conn);
    assert!(wait_gone(script, WAIT), "the script {script} outlived its client");
    assert!(wait_gone(child, WAIT), "the script's child {child} outlived its client");

    // Everyone else is still served.
    let fine = fetch(server.addr(), "GET", "/cgi-bin/env.py", &[]);
    assert_eq!(fine.status, 200, "{fine:?}");
});

/// A script's standard error within its budget (not engine-specific: one engine): a 1 MiB line
/// is cut to 4 KiB, and of 200,001 lines about a hundred reach the error log, then one line says
/// how many were left out (all of them were written before, 16 MB for one request).
#[test]
fn cgi_stderr_has_a_budget_and_a_line_length_cap() {
    let root = build_root();
    let server = start(&root, "reactor", 16);
    let answer = fetch(server.addr(), "GET", "/cgi-bin/noisy.pl", &[]);
    assert_eq!(
        (answer.status, answer.body_text().as_str()),
        (200, "answered\n"),
        "{answer:?}"
    );
    assert!(
        server.wait_for_stderr("lines of output left out", WAIT),
        "no count of what was left out"
    );
    let log = server.stderr();
    let lines: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("noisy.pl"))
        .collect();
    let mut written = 0u64;
    let mut left_out = 0u64;
    for line in &lines {
        assert!(line.len() < 4096 + 200, "a line of {} bytes", line.len());
        match line.split_once(": (") {
            Some((_, count)) => {
                left_out += count
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("{line}"))
            }
            None => written += 1,
        }
    }
    assert!(
        lines[0].ends_with("x [line cut at 4096 bytes]"),
        "{}",
        &lines[0][..200.min(lines[0].len())]
    );
    assert_eq!(
        written + left_out,
        200_001,
        "{written} written, {left_out} left out"
    );
    // 100 per 5 s: a slow machine may spread the flood over a second interval or two.
    assert!(written <= 300, "{written} lines written");
}

/// The processes (zombies aside) in process group `group`, from /proc.
fn group_members(group: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after the last ')'.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        if fields[0] != "Z" && fields[2] == group.to_string() {
            members.push(pid);
        }
    }
    members
}

for_each_arch!(fn cgi_scripts_end_with_the_server(arch) {
    let root = build_root();
    let config = write_config(&root, arch, &format!("grace_period = \"1s\"\n{LOCATIONS}"));
    let mut server = Server::start(Options::config_file(&config));
    // A script that would run for 20 s (cgi_timeout is 60 s here) while ampd is stopped.
    let waiting = {
        let addr = server.addr();
        thread::spawn(move || {
            let mut conn = Conn::open(addr);
            conn.send(build_request("GET", "/cgi-bin/sleep.py", &[]));
            let _cut_off = conn.try_read_proxied("GET");
        })
    };
    let script = wait_pid_file(&root.path().join("cgi-bin/sleep.pid"), WAIT);
    let child = wait_pid_file(&root.path().join("cgi-bin/sleep-child.pid"), WAIT);
    server.signal("TERM");
    assert!(server.wait_exit(WAIT).is_some(), "ampd did not stop within {WAIT:?}");
    waiting.join().expect("the waiting client");
    assert!(wait_gone(script, WAIT), "the script {script} outlived ampd");
    assert!(wait_gone(child, WAIT), "the script's child {child} outlived ampd");
});

/// The effective user and group ids of this test process.
fn own_ids() -> (String, String) {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|ids| ids.split_whitespace().nth(1))
            .expect("an id line")
            .to_string()
    };
    (field("Uid:"), field("Gid:"))
}

for_each_arch!(fn cgi_scripts_run_as_the_configured_user(arch) {
    let root = build_root();
    // As root (CI), ampd drops to `nobody` and its scripts run as nobody; otherwise they run as
    // ampd's own user.
    let (head, uid, gid) = if is_root_user() {
        ("user = \"nobody\"\n".to_string(), "65534".to_string(), "65534".to_string())
    } else {
        let (uid, gid) = own_ids();
        (String::new(), uid, gid)
    };
    let config = write_config(&root, arch, &format!("{head}{LOCATIONS}"));
    let server = Server::start(Options::config_file(&config));
    let env = fetch(server.addr(), "GET", "/cgi-bin/env.py", &[]);
    assert_eq!(env.status, 200, "{env:?}\n{}", server.stderr());
    let dump = env.body_text();
    assert_eq!(dump_value(&dump, "UID"), Some(uid.as_str()), "{dump}");
    assert_eq!(dump_value(&dump, "GID"), Some(gid.as_str()), "{dump}");
});

for_each_arch!(fn cgi_max_scripts_cap_answers_503(arch) {
    let root = build_root();
    let server = start(&root, arch, 1);
    // `mp` serves one connection at a time per process, so its per-process cap of one script
    // is not exceeded while its four processes hold four scripts: the other connections wait
    // for a process. Every other engine runs one script and refuses the rest.
    let mp = arch.starts_with("mp");
    const HOLDS: usize = 6;
    const MP_PROCESSES: usize = 4;
    let (results_tx, results_rx) = mpsc::channel();
    let mut readers = Vec::new();
    for _ in 0..HOLDS {
        let mut conn = Conn::open(server.addr());
        conn.send(build_request("GET", "/cgi-bin/hold.py", &[]));
        let results_tx = results_tx.clone();
        readers.push(thread::spawn(move || {
            conn.set_read_timeout(Duration::from_secs(30));
            let response = conn.read_proxied("GET");
            results_tx.send(response).expect("send the result");
        }));
    }
    // The refusals come at once; the held scripts say they started.
    let cgi_bin = root.path().join("cgi-bin");
    let started = || {
        std::fs::read_dir(&cgi_bin)
            .map(|entries| entries.flatten().filter(|entry| entry.file_name().to_string_lossy().ends_with(".started")).count())
            .unwrap_or(0)
    };
    let settled = |refused: usize| if mp { started() == MP_PROCESSES } else { refused + started() == HOLDS };
    let mut refused = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !settled(refused.len()) {
        assert!(Instant::now() < deadline, "{} refused, {} started of {HOLDS}", refused.len(), started());
        if let Ok(response) = results_rx.recv_timeout(Duration::from_millis(20)) {
            refused.push(response);
        }
    }
    let running = started();
    std::fs::write(cgi_bin.join("hold.go"), "go").unwrap();
    for reader in readers {
        reader.join().expect("reader thread");
    }
    drop(results_tx);
    let answers: Vec<_> = refused.into_iter().chain(results_rx.iter()).collect();
    let held = answers.iter().filter(|response| response.status == 200).count();
    let over = answers.iter().filter(|response| response.status == 503).collect::<Vec<_>>();
    assert_eq!(held + over.len(), HOLDS, "{answers:?}");
    for response in &over {
        assert!(response.has_header("retry-after"), "{response:?}");
    }
    if mp {
        assert_eq!(running, MP_PROCESSES, "one script per process at once");
        // A waiting connection may reach a process whose script ended but is not reaped yet
        // (its slot is freed then): that one is refused like any over the cap.
        assert!(held >= MP_PROCESSES, "the held scripts answered: {answers:?}");
    } else {
        assert_eq!(running, 1, "max_scripts = 1");
        assert_eq!(held, 1, "one script at a time in one process: {answers:?}");
    }
    // Slots come back once the scripts are reaped (the launcher does that a moment after
    // their output ends): the next script runs.
    let deadline = Instant::now() + WAIT;
    let after = loop {
        let response = fetch(server.addr(), "GET", "/cgi-bin/hold.py", &[]);
        if response.status != 503 || Instant::now() >= deadline {
            break response;
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(after.status, 200, "{after:?}");
    assert_eq!(after.body_text(), "held\n");
});

/// Issue 35, item 25, on the default engine (the meta-variables are the engines' common
/// work): an absolute-form target's authority replaces `Host` (RFC 9112 §3.2.2); ampd routes
/// by it and the script's `HTTP_HOST` is it too, as `SERVER_NAME` is (nginx passes the same).
#[test]
fn an_absolute_form_targets_authority_is_the_scripts_http_host() {
    let root = build_root();
    let server = start(&root, "reactor", 16);
    let mut conn = Conn::open(server.addr());
    conn.send("GET http://b.test/cgi-bin/env.py HTTP/1.1\r\nHost: a.test\r\n\r\n");
    let env = conn.read_proxied("GET");
    assert_eq!(env.status, 200, "{env:?}\n{}", server.stderr());
    let dump = env.body_text();
    assert_eq!(dump_value(&dump, "SERVER_NAME"), Some("b.test"), "{dump}");
    assert_eq!(dump_value(&dump, "HTTP_HOST"), Some("b.test"), "{dump}");
    assert_eq!(
        dump_value(&dump, "REQUEST_URI"),
        Some("/cgi-bin/env.py"),
        "{dump}"
    );
}
