//! FastCGI to an external server under every engine: Debian's php8.2-fpm (a static pool of four
//! workers on a unix socket, started by the test): hello, the request line PHP sees, a form POST
//! decoded into `$_POST`, a session cookie round trip, front controllers (`/index.php/a/b`, a
//! `fallback` location for routes without a file, a `script` location with `params` through a
//! pool with `keepalive`, a directory's index script), `X-Accel-Redirect` and `X-Sendfile`
//! handing a file to the static path, 10 MiB uploads (raw and multipart, checked by sha256 in
//! PHP) and a chunked one, PHP's messages on FastCGI's stderr stream in the error log, a body
//! over `max_body` refused (413), a script that is not there answered `404` by ampd (an upload
//! with a `.php` segment after it included) unless `fastcgi_check_script = false`, and 502
//! once php-fpm is gone.

use crate::support;

use support::bulk::pattern_sha256;
use support::gateway::{dump_value, fetch, post_pattern, post_wrapped_pattern, Framing};
use support::http::{build_request, parse_all, send_raw, Conn};
use support::phpfpm::PhpFpm;
use support::scripts::install_php;
use support::*;

const MIB: u64 = 1 << 20;
const SECRET: &str = "outside the sendfile root";
const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A root with the PHP scripts (at its top, in `php/` and as `shop/index.php`), a static file
/// under `/app/` and an internal file; php-fpm beside it.
fn build(root: &TempRoot) -> PhpFpm {
    install_php(root, "");
    install_php(root, "php");
    install_php(root, "shop");
    root.file("app/style.css", "body { color: teal }\n");
    root.file("protected/report.txt", "the protected report\n");
    root.file("uploads/x.jpg", "<?php echo 'the upload ran'; ?>\n");
    root.outside_file("files/doc.txt", "a document from the sendfile root\n");
    root.outside_file("secret.txt", SECRET);
    PhpFpm::start(&root.outside_dir().join("fpm"))
}

/// `.php` anywhere through the socket, each script looked up first (`/unchecked/` passes any
/// `.php` path on); `/app/` static with the front controller as fallback;
/// `/shop/` running one script through pool `php` (kept connections, FCGI_KEEP_CONN).
fn start(root: &TempRoot, arch: &str, fpm: &PhpFpm) -> Server {
    let socket = fpm.address();
    let files = root.outside_dir().join("files").display().to_string();
    let config = write_config(
        root,
        arch,
        &format!(
            r#"
[upstream.php]
servers = ["{socket}"]
keepalive = 2

[[site]]
root = "www"
index = ["index.php", "index.html"]

[[site.location]]
path = "/unchecked/"
extension = ".php"
fastcgi_pass = "{socket}"
fastcgi_check_script = false

[[site.location]]
extension = ".php"
fastcgi_pass = "{socket}"
max_body = "20MiB"
x_sendfile_root = "{files}"

[[site.location]]
path = "/app/"
fallback = "/index.php"

[[site.location]]
path = "/shop/"
fastcgi_pass = "php"
script = "/shop/index.php"
params = {{ APP_ENV = "test" }}

[[site.location]]
path = "/protected/"
internal = true
"#
        ),
    );
    Server::start(Options::config_file(&config))
}

default_arch!(fn php_fpm_answers(arch) {
    let root = TempRoot::new();
    let fpm = build(&root);
    let server = start(&root, arch, &fpm);

    let hello = fetch(server.addr(), "GET", "/hello.php", &[]);
    assert_eq!(hello.status, 200, "{hello:?}\n{}\n{}", server.stderr(), fpm.log());
    assert!(hello.body_text().starts_with("Hello from PHP 8.2"), "{hello:?}");
    assert_eq!(hello.header("x-fcgi"), Some("php-fpm"));
    assert!(hello.header("content-type").is_some_and(|value| value.starts_with("text/html")), "{hello:?}");
    assert_eq!(hello.header("server"), Some("ampd"));
    assert!(!hello.has_header("status"), "CGI's Status field is not an HTTP field: {hello:?}");

    // The request as PHP sees it (clients_real.sh's info.php).
    let info = fetch(server.addr(), "GET", "/php/info.php?x=y", &[]);
    assert_eq!(info.status, 200, "{info:?}");
    assert_eq!(info.body_text(), "GET /php/info.php?x=y x=y\n");

    // A form POST: PHP decodes it into $_POST.
    let mut conn = Conn::open(server.addr());
    let form = "name=Ada+Lovelace&lang=en&tags%5B%5D=a&tags%5B%5D=b";
    conn.send(format!(
        "POST /form.php HTTP/1.1\r\nHost: test\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\n\r\n{form}",
        form.len()
    ));
    let posted = conn.read_proxied("POST");
    assert_eq!(posted.status, 200, "{posted:?}");
    assert_eq!(
        posted.body_text(),
        "lang=en\nname=Ada Lovelace\ntags=a,b\nCONTENT_TYPE=application/x-www-form-urlencoded\n"
    );

    // A session: the cookie PHP sets brings the same session (and its counter) back.
    let first = fetch(server.addr(), "GET", "/session.php", &[]);
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(dump_value(&first.body_text(), "count"), Some("1"), "{first:?}");
    let cookie = first
        .header("set-cookie")
        .and_then(|value| value.split(';').next())
        .filter(|pair| pair.starts_with("PHPSESSID="))
        .unwrap_or_else(|| panic!("no PHPSESSID cookie: {first:?}"))
        .to_string();
    let id = cookie.trim_start_matches("PHPSESSID=").to_string();
    for count in ["2", "3"] {
        let again = fetch(server.addr(), "GET", "/session.php", &[("Cookie", &cookie)]);
        assert_eq!(again.status, 200, "{again:?}");
        assert_eq!(dump_value(&again.body_text(), "count"), Some(count), "{again:?}");
        assert_eq!(dump_value(&again.body_text(), "id"), Some(id.as_str()));
    }
    let fresh = fetch(server.addr(), "GET", "/session.php", &[]);
    assert_eq!(dump_value(&fresh.body_text(), "count"), Some("1"), "a new client, a new session");

    // X-Accel-Redirect from PHP: the static path serves the internal file.
    let accel = fetch(server.addr(), "GET", "/accel.php", &[]);
    assert_eq!(accel.status, 200, "{accel:?}");
    assert_eq!(accel.body_text(), "the protected report\n");
    assert!(!accel.has_header("x-accel-redirect"), "{accel:?}");

    // X-Sendfile: a file below x_sendfile_root is served; nothing outside it.
    let base = root.outside_dir().display().to_string();
    let sent = fetch(server.addr(), "GET", &format!("/sendfile.php?file={base}/files/doc.txt"), &[]);
    assert_eq!(sent.status, 200, "{sent:?}");
    assert_eq!(sent.body_text(), "a document from the sendfile root\n");
    assert!(!sent.has_header("x-sendfile"), "{sent:?}");
    for file in [format!("{base}/secret.txt"), format!("{base}/files/../secret.txt")] {
        let refused = fetch(server.addr(), "GET", &format!("/sendfile.php?file={file}"), &[]);
        assert!(refused.status >= 400, "{file}: {refused:?}");
        assert!(!refused.body_text().contains(SECRET), "{file}: {refused:?}");
    }

    // PHP's messages arrive on FastCGI's stderr stream: they go to the error log.
    let logged = fetch(server.addr(), "GET", "/stderr.php", &[]);
    assert_eq!(logged.status, 200, "{logged:?}");
    assert_eq!(logged.body_text(), "logged\n");
    assert!(
        server.wait_for_stderr("php stderr line for the error log", WAIT),
        "PHP's stderr is not in the error log:\n{}",
        server.stderr()
    );

    // No such script: ampd answers 404 itself (nginx's `try_files $fastcgi_script_name =404`)
    // and php-fpm never hears of it (no "Primary script unknown" on its stderr stream). An
    // upload with a `.php` segment after it never reaches php-fpm either, whose
    // `cgi.fix_pathinfo` would walk back to the upload.
    for path in ["/missing.php", "/uploads/x.jpg/a.php", "/php/missing.php/x"] {
        let missing = fetch(server.addr(), "GET", path, &[]);
        assert_eq!(missing.status, 404, "{path}: {missing:?}");
        let body = missing.body_text();
        for php in ["File not found.", "Access denied.", "the upload ran"] {
            assert!(!body.contains(php), "{path} reached php-fpm: {missing:?}");
        }
    }
    assert!(
        !server.stderr().contains("Primary script unknown"),
        "a missing script reached php-fpm:\n{}",
        server.stderr()
    );
    // Where scripts are not checked (php-fpm on another machine), php-fpm answers.
    let unchecked = fetch(server.addr(), "GET", "/unchecked/missing.php", &[]);
    assert_eq!(unchecked.status, 404, "{unchecked:?}");
    assert!(unchecked.body_text().contains("File not found."), "{unchecked:?}");

    // php-fpm gone: 502, and ampd keeps serving its own files.
    drop(fpm);
    let down = fetch(server.addr(), "GET", "/hello.php", &[]);
    assert_eq!(down.status, 502, "{down:?}");
    assert_eq!(fetch(server.addr(), "GET", "/app/style.css", &[]).status, 200);
});

default_arch!(fn php_front_controllers(arch) {
    let root = TempRoot::new();
    let fpm = build(&root);
    let server = start(&root, arch, &fpm);
    let www = root.path().display().to_string();

    // A front controller URL: the .php segment is the script, the rest PATH_INFO.
    let routed = fetch(server.addr(), "GET", "/index.php/a/b?q=1", &[]);
    assert_eq!(routed.status, 200, "{routed:?}");
    let text = routed.body_text();
    let filename = format!("{www}/index.php");
    for (name, value) in [
        ("SCRIPT_NAME", "/index.php"),
        ("PATH_INFO", "/a/b"),
        ("REQUEST_URI", "/index.php/a/b?q=1"),
        ("QUERY_STRING", "q=1"),
        ("SCRIPT_FILENAME", filename.as_str()),
        ("REQUEST_METHOD", "GET"),
    ] {
        assert_eq!(dump_value(&text, name), Some(value), "{name} in:\n{text}");
    }

    // A directory whose first index file is a script runs it.
    for (path, script) in [("/php/", "/php/index.php"), ("/", "/index.php")] {
        let index = fetch(server.addr(), "GET", path, &[]);
        assert_eq!(index.status, 200, "{path}: {index:?}\n{}", server.stderr());
        let text = index.body_text();
        assert_eq!(dump_value(&text, "SCRIPT_NAME"), Some(script), "{path}: {text}");
        assert_eq!(dump_value(&text, "REQUEST_URI"), Some(path), "{path}: {text}");
    }

    // `script` through a pool with kept connections: every path runs it, PATH_INFO is the
    // rest, `params` are added; several requests on one client connection.
    let mut conn = Conn::open(server.addr());
    for item in ["/cart/42", "/cart/43", "/list"] {
        conn.send(build_request("GET", &format!("/shop{item}"), &[]));
        let shop = conn.read_proxied("GET");
        assert_eq!(shop.status, 200, "{shop:?}");
        let text = shop.body_text();
        assert_eq!(dump_value(&text, "SCRIPT_NAME"), Some("/shop/index.php"), "{text}");
        assert_eq!(dump_value(&text, "PATH_INFO"), Some(item), "{text}");
        assert_eq!(dump_value(&text, "APP_ENV"), Some("test"), "{text}");
    }

    // `fallback`: a route with no file runs the front controller (REQUEST_URI and query are
    // the client's); a file that exists is served as it is.
    let fallback = fetch(server.addr(), "GET", "/app/some/route?x=2", &[]);
    assert_eq!(fallback.status, 200, "{fallback:?}");
    let text = fallback.body_text();
    assert_eq!(dump_value(&text, "SCRIPT_NAME"), Some("/index.php"), "{text}");
    assert_eq!(dump_value(&text, "REQUEST_URI"), Some("/app/some/route?x=2"), "{text}");
    assert_eq!(dump_value(&text, "QUERY_STRING"), Some("x=2"), "{text}");
    let css = fetch(server.addr(), "GET", "/app/style.css", &[]);
    assert_eq!(css.status, 200, "{css:?}");
    assert_eq!(css.body_text(), "body { color: teal }\n");
});

for_each_arch!(fn php_fpm_takes_uploads(arch) {
    let root = TempRoot::new();
    let fpm = build(&root);
    let server = start(&root, arch, &fpm);
    let expected = pattern_sha256(10 * MIB);

    // 10 MiB raw.
    let raw = post_pattern(server.addr(), "/upload.php", 10 * MIB, Framing::Length,
        &[("Content-Type", "application/octet-stream")]);
    assert_eq!(raw.status, 200, "{raw:?}\n{}", fpm.log());
    let text = raw.body_text();
    assert_eq!(dump_value(&text, "size"), Some("10485760"), "{text}");
    assert_eq!(dump_value(&text, "sha256"), Some(expected.as_str()), "{text}");

    // 10 MiB as a multipart/form-data file beside a field.
    let boundary = "ampdtestboundary7MA4YWxkTrZu0gW";
    let prefix = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"field\"\r\n\r\nvalue\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"data.bin\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    );
    let suffix = format!("\r\n--{boundary}--\r\n");
    let content_type = format!("multipart/form-data; boundary={boundary}");
    let form = post_wrapped_pattern(server.addr(), "/upload.php", prefix.into_bytes(), 10 * MIB,
        suffix.into_bytes(), &[("Content-Type", &content_type)]);
    assert_eq!(form.status, 200, "{form:?}\n{}", fpm.log());
    let text = form.body_text();
    assert_eq!(dump_value(&text, "name"), Some("data.bin"), "{text}");
    assert_eq!(dump_value(&text, "size"), Some("10485760"), "{text}");
    assert_eq!(dump_value(&text, "sha256"), Some(expected.as_str()), "{text}");
    assert_eq!(dump_value(&text, "field"), Some("value"), "{text}");

    // A chunked body: ampd reads it whole and gives PHP its exact length.
    let chunked = post_pattern(server.addr(), "/upload.php", 2 * MIB, Framing::Chunked(50_000),
        &[("Content-Type", "application/octet-stream")]);
    assert_eq!(chunked.status, 200, "{chunked:?}");
    let text = chunked.body_text();
    assert_eq!(dump_value(&text, "size"), Some("2097152"), "{text}");
    assert_eq!(dump_value(&text, "sha256"), Some(pattern_sha256(2 * MIB).as_str()), "{text}");

    // The body back, with PHP's own Content-Length (clients_real.sh's echo vhost).
    let echo = post_pattern(server.addr(), "/echo.php", 100_000, Framing::Length, &[]);
    assert_eq!(echo.status, 200, "{echo:?}");
    assert_eq!(echo.header("content-length"), Some("100000"));
    assert_eq!(support::bulk::sha256(&echo.body), pattern_sha256(100_000));

    // Over the location's max_body (20 MiB): 413 before php-fpm hears of it.
    let refused = parse_all(&send_raw(server.addr(), format!(
        "POST /upload.php HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n\r\n", 30 * MIB
    )), "POST");
    assert_eq!(refused.first().map(|response| response.status), Some(413), "{refused:?}");
});
