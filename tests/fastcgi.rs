//! FastCGI to an external server under every engine: Debian's php8.2-fpm (a static pool of four
//! workers on a unix socket, started by the test): hello, the request line PHP sees, a form POST
//! decoded into `$_POST`, a session cookie round trip, a front controller (`/index.php/a/b`, a
//! `fallback` location for routes without a file, a `script` location with `params` through a
//! pool with `keepalive`), `X-Accel-Redirect` handing a file to the static path, and 10 MiB
//! uploads (raw and multipart, checked by sha256 in PHP) and a chunked one; PHP's messages on
//! FastCGI's stderr stream reach the error log.

mod support;

use support::bulk::pattern_sha256;
use support::gateway::{dump_value, fetch, post_pattern, post_wrapped_pattern, Framing};
use support::http::{build_request, Conn};
use support::phpfpm::PhpFpm;
use support::scripts::install_php;
use support::*;

const MIB: u64 = 1 << 20;
const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A root with the PHP scripts (at its top, in `php/` and as `shop/index.php`), a static file
/// under `/app/` and an internal file; php-fpm beside it.
fn build(root: &TempRoot) -> PhpFpm {
    install_php(root, "");
    install_php(root, "php");
    install_php(root, "shop");
    root.file("app/style.css", "body { color: teal }\n");
    root.file("protected/report.txt", "the protected report\n");
    PhpFpm::start(&root.outside_dir().join("fpm"))
}

/// `.php` anywhere through the socket; `/app/` static with the front controller as fallback;
/// `/shop/` running one script through pool `php` (kept connections, FCGI_KEEP_CONN).
fn start(root: &TempRoot, arch: &str, fpm: &PhpFpm) -> Server {
    let socket = fpm.address();
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

[[site.location]]
extension = ".php"
fastcgi_pass = "{socket}"
max_body = "20MiB"

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

for_each_arch!(fn php_fpm_answers(arch) {
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

    // PHP's messages arrive on FastCGI's stderr stream: they go to the error log.
    let logged = fetch(server.addr(), "GET", "/stderr.php", &[]);
    assert_eq!(logged.status, 200, "{logged:?}");
    assert_eq!(logged.body_text(), "logged\n");
    assert!(
        server.wait_for_stderr("php stderr line for the error log", WAIT),
        "PHP's stderr is not in the error log:\n{}",
        server.stderr()
    );

    // No such script: php-fpm's 404 reaches the client.
    assert_eq!(fetch(server.addr(), "GET", "/missing.php", &[]).status, 404);
});

for_each_arch!(fn php_front_controllers(arch) {
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
});
