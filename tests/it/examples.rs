//! The examples show their features: `ampd serve examples/www --autoindex` lists a directory
//! that has no index file, and `examples/ampd.toml` (run as it is, only its port changed to 0)
//! lists `/downloads/` and serves `/private/` to its example user and to no one else;
//! `examples/proxy.toml` passes `/api/` to its application servers (the backup once the primary
//! is gone), their text compressed on the fly, and serves the rest itself; every shipped `examples/*.toml` (`php-fpm.toml` and
//! `cgi.toml` too) passes `ampd check` as it is (`tls.toml` and `http2.toml` once the
//! certificates their comments have the reader make exist); `examples/http2.toml` has a TLS
//! listener offering `h2` and an `h2c` one, with the `[http2]` keys it shows;
//! `examples/types.toml` sends its `[types]`, `types_file`, `default_type` and `charset`;
//! `examples/routing.toml` rewrites and redirects with a regex's captures, answers a `return`,
//! falls back through `try_files` and answers a `404` with its error page.
//! `examples/negotiation.toml` answers `/welcome/hello` in the reader's language;
//! `examples/compression.toml` compresses its page on the fly and leaves its downloads plain.

use crate::support;

use std::path::{Path, PathBuf};
use support::certificates::{write_ca, write_self_signed};
use support::pyupstream::PyUpstream;
use support::*;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// `admin:example`, the example configuration's user, as Basic credentials (RFC 7617).
const EXAMPLE_USER: &str = "Basic YWRtaW46ZXhhbXBsZQ==";

#[test]
fn every_shipped_example_passes_ampd_check() {
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|extension| extension != "toml") {
            continue;
        }
        // The TLS examples name certificates their reader makes first: checked as a copy
        // beside certificates made for them.
        let dir = TempRoot::new();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let path = if NEED_CERTIFICATES.contains(&name.as_str()) {
            certificate_example_copy(&dir, &name)
        } else {
            path
        };
        let (code, stdout, stderr) = run_to_exit(&["check", &path.display().to_string()]);
        assert_eq!(code, Some(0), "{}: {stderr}", path.display());
        assert!(stdout.contains("configuration OK"), "{stdout}");
        assert!(!stderr.contains("warning"), "{}: {stderr}", path.display());
        checked.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    checked.sort();
    assert_eq!(
        checked,
        [
            "ampd.toml",
            "cgi.toml",
            "compression.toml",
            "http2.toml",
            "negotiation.toml",
            "php-fpm.toml",
            "proxy.toml",
            "routing.toml",
            "tls.toml",
            "types.toml"
        ],
        "every example is checked: a new one belongs in this list"
    );
}

/// The examples whose certificates (`certs/`) the reader makes first, as their comments say.
const NEED_CERTIFICATES: [&str; 2] = ["http2.toml", "tls.toml"];

/// `examples/tls.toml` as `certificate_example_copy` makes it.
fn tls_example_copy(dir: &TempRoot) -> PathBuf {
    certificate_example_copy(dir, "tls.toml")
}

/// `examples/NAME` as shipped, its `www` paths made absolute, in `dir` beside the certificates
/// its opening comment tells the reader to make (`certs/`).
fn certificate_example_copy(dir: &TempRoot, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(examples().join(name)).unwrap();
    let www = examples().join("www").display().to_string();
    let text = text.replace("= \"www", &format!("= \"{www}"));
    let certs = dir.outside_dir().join("certs");
    write_self_signed(&certs, "localhost", &["localhost", "admin.localhost"]);
    write_ca(&certs, "clients-ca");
    let file = dir.outside_dir().join(name);
    std::fs::write(&file, text).unwrap();
    file
}

/// Before the reader has run the `openssl` commands at its top, `ampd check` on a TLS example
/// names the missing file and says to run those commands.
#[test]
fn a_tls_example_before_its_certificates_says_to_make_them() {
    let dir = TempRoot::new();
    let text = std::fs::read_to_string(examples().join("tls.toml")).unwrap();
    let www = examples().join("www").display().to_string();
    let file = dir.outside_dir().join("tls.toml");
    std::fs::write(&file, text.replace("= \"www", &format!("= \"{www}"))).unwrap();
    let (code, _, stderr) = run_to_exit(&["check", &file.display().to_string()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let missing = dir.outside_dir().join("certs/localhost.pem");
    assert!(
        stderr.contains(&format!(
            "tls: {}: No such file or directory",
            missing.display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("hint: run the openssl commands at the top of"),
        "{stderr}"
    );
}

#[test]
fn the_http2_example_offers_h2_by_alpn_and_h2c_in_cleartext() {
    let dir = TempRoot::new();
    let file = certificate_example_copy(&dir, "http2.toml");
    let config = ampd::config::load_file(&file).unwrap();
    let kinds: Vec<(bool, bool)> = config
        .listen
        .iter()
        .map(|listen| (listen.tls, listen.h2c))
        .collect();
    assert!(kinds.contains(&(true, false)), "a TLS listener: {kinds:?}");
    assert!(kinds.contains(&(false, true)), "an h2c listener: {kinds:?}");
    assert!(config.http2.enabled);
    let defaults = ampd::config::http2::Http2::default().limits;
    assert_ne!(
        config.http2.limits, defaults,
        "it shows some [http2] keys set"
    );
    let context = ampd::tls::TlsContext::build(&config).unwrap();
    assert!(context.is_some(), "the certificate it names is usable");
}

#[test]
fn the_tls_example_has_two_sites_by_name_with_their_certificates() {
    let dir = TempRoot::new();
    let file = tls_example_copy(&dir);
    let config = ampd::config::load_file(&file).unwrap();
    assert!(config.listen.iter().any(|listen| listen.tls));
    assert!(config.listen.iter().any(|listen| !listen.tls));
    let [main, admin] = &config.sites[..] else {
        panic!("two sites")
    };
    assert!(main.tls.redirect_https && main.tls.hsts.is_some());
    assert!(matches!(
        admin.tls.client_certificates,
        ampd::config::ClientCertificates::Required { .. }
    ));
    let context = ampd::tls::TlsContext::build(&config).unwrap();
    assert!(context.is_some(), "the certificates it names are usable");
}

/// Run as shipped (ports 0), the admin site, which requires client certificates, does not
/// answer its page over the plain listener by any name: it sends the request to HTTPS.
#[test]
fn the_tls_examples_admin_site_is_not_served_over_plain_http() {
    let dir = TempRoot::new();
    let file = tls_example_copy(&dir);
    let text = std::fs::read_to_string(&file).unwrap();
    let text = text
        .replace("\"127.0.0.1:8080\"", "\"127.0.0.1:0\"")
        .replace("\"127.0.0.1:8443 tls\"", "\"127.0.0.1:0 tls\"");
    std::fs::write(&file, text).unwrap();
    let server = Server::start(Options::config_file(&file));
    let ready = server.ready_line();
    let plain = support::tls::plain_addr(ready);
    assert!(ready.contains("https://"), "{ready}");
    for request in [
        "GET / HTTP/1.1\r\nHost: admin.localhost\r\n\r\n",
        "GET http://admin.localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ] {
        let mut conn = Conn::open(plain);
        conn.send(request);
        let response = conn.read_response("GET");
        assert_eq!(response.status, 301, "{request}: {response:?}");
        let location = response.header("location").unwrap_or_default();
        assert!(
            location.starts_with("https://admin.localhost:"),
            "{location}"
        );
    }
}

#[test]
fn serve_autoindex_lists_the_downloads_directory() {
    let server = Server::start(Options::new(&examples().join("www"), "reactor").arg("--autoindex"));
    let home = get(server.addr(), "/");
    assert_eq!(home.status, 200);
    let html = home.body_text();
    for link in ["/docs/", "/downloads/", "/private/", "/hello.txt"] {
        assert!(
            html.contains(&format!("href=\"{link}\"")),
            "{link} in {html}"
        );
    }
    let listing = get(server.addr(), "/downloads/");
    assert_eq!(listing.status, 200, "{listing:?}");
    let page = listing.body_text();
    assert!(page.contains("Index of /downloads/"), "{page}");
    assert!(page.contains(">images/</a>"), "{page}");
    assert!(page.contains(">release-notes.txt</a>"), "{page}");
    // Without --autoindex the same directory is refused, as documented.
    drop(server);
    let server = Server::start(Options::new(&examples().join("www"), "reactor"));
    assert_eq!(get(server.addr(), "/downloads/").status, 403);
}

/// The example configuration with its `listen` on port 0 and its relative paths made absolute
/// (the copy lives in a temporary directory); every other line as shipped.
fn example_config(dir: &TempRoot) -> PathBuf {
    example_copy(dir, "ampd.toml", &[])
}

/// `examples/NAME` as `example_config` copies it, with each (from, to) of `replace` applied too.
fn example_copy(dir: &TempRoot, name: &str, replace: &[(String, String)]) -> PathBuf {
    let mut text = std::fs::read_to_string(examples().join(name)).unwrap();
    for (from, to) in replace {
        assert!(text.contains(from.as_str()), "{name} has {from}");
        text = text.replace(from.as_str(), to);
    }
    let www = examples().join("www").display().to_string();
    let mut changed = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|line| {
            if line.starts_with("listen = ") {
                changed += 1;
                return "listen = \"127.0.0.1:0\"".to_owned();
            }
            line.replace("= \"www", &format!("= \"{www}"))
        })
        .collect();
    assert_eq!(changed, 1, "one listen line");
    let file = dir.outside_dir().join(name);
    std::fs::write(&file, lines.join("\n")).unwrap();
    file
}

#[test]
fn the_example_configuration_shows_a_listing_and_a_private_page() {
    let dir = TempRoot::new();
    let server = Server::start(Options::config_file(&example_config(&dir)));
    let addr = server.addr();
    let listing = get(addr, "/downloads/");
    assert_eq!(listing.status, 200, "{listing:?}");
    assert!(listing.body_text().contains(">release-notes.txt</a>"));
    // The location's header rules: `Server` removed, `Cache-Control` set.
    assert!(!listing.has_header("server"), "{listing:?}");
    assert_eq!(
        listing.header("cache-control"),
        Some("no-cache"),
        "{listing:?}"
    );
    let json = get(addr, "/downloads/?format=json");
    assert_eq!(
        json.header("content-type"),
        Some("application/json; charset=utf-8")
    );

    let anonymous = get(addr, "/private/");
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    assert!(anonymous.header("www-authenticate").is_some());
    let wrong = request(
        addr,
        "GET",
        "/private/",
        &[("Authorization", "Basic YWRtaW46bm9wZQ==")],
    );
    assert_eq!(wrong.status, 401);
    let page = request(addr, "GET", "/private/", &[("Authorization", EXAMPLE_USER)]);
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.body_text().contains("signed in"),
        "{}",
        page.body_text()
    );
    assert_eq!(get(addr, "/hello.txt").status, 200);
}

#[test]
fn the_types_example_sends_its_types() {
    let dir = TempRoot::new();
    let mime_types = examples().join("mime.types").display().to_string();
    let config = example_copy(
        &dir,
        "types.toml",
        &[("\"mime.types\"".into(), format!("\"{mime_types}\""))],
    );
    let server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    for (path, expected) in [
        ("/hello.txt", "text/plain; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
        ("/docs/", "text/html; charset=iso-8859-1"),
    ] {
        let response = get(addr, path);
        assert_eq!(response.status, 200, "{path}");
        assert_eq!(response.header("content-type"), Some(expected), "{path}");
    }
}

#[test]
fn the_routing_example_rewrites_returns_falls_back_and_has_an_error_page() {
    let dir = TempRoot::new();
    let server = Server::start(Options::config_file(&example_copy(
        &dir,
        "routing.toml",
        &[],
    )));
    let addr = server.addr();
    let hello = std::fs::read(examples().join("www/hello.txt")).unwrap();
    let note = get(addr, "/notes/hello");
    assert_eq!((note.status, &note.body), (200, &hello));
    let moved = get(addr, "/blog/2024/news");
    assert_eq!(moved.status, 301);
    assert_eq!(
        moved.header("location"),
        Some("https://blog.example.com/2024/news")
    );
    let gone = get(addr, "/beta/");
    assert_eq!(gone.status, 410);
    assert_eq!(gone.body_text(), "The beta has ended: see /.\n");
    let index = std::fs::read(examples().join("www/index.html")).unwrap();
    let page = get(addr, "/app/any/route");
    assert_eq!((page.status, &page.body), (200, &index));
    let error_page = std::fs::read(examples().join("www/errors/404.html")).unwrap();
    let missing = get(addr, "/nothing");
    assert_eq!((missing.status, &missing.body), (404, &error_page));
}

#[test]
fn the_compression_example_compresses_its_page_and_not_its_downloads() {
    let dir = TempRoot::new();
    let config = example_copy(&dir, "compression.toml", &[]);
    let server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let index = std::fs::read(examples().join("www/index.html")).unwrap();
    for _ in 0..2 {
        let page = request(addr, "GET", "/index.html", &[("Accept-Encoding", "gzip")]);
        assert_eq!(
            page.header("content-encoding"),
            Some("gzip"),
            "{:?}",
            page.headers
        );
        assert_eq!(page.header("vary"), Some("Accept-Encoding"));
        assert!(page.body.starts_with(b"\x1f\x8b") && page.body.len() < index.len());
        let length = page
            .header("content-length")
            .unwrap()
            .parse::<usize>()
            .unwrap();
        assert_eq!(length, page.body.len());
    }
    let sibling = request(addr, "GET", "/style.css", &[("Accept-Encoding", "gzip")]);
    let gz = std::fs::read(examples().join("www/style.css.gz")).unwrap();
    assert_eq!(sibling.body, gz, "the precompressed sibling");
    let download = request(
        addr,
        "GET",
        "/downloads/sample-data.txt",
        &[("Accept-Encoding", "gzip")],
    );
    assert_eq!(download.header("content-encoding"), None);
    let data = std::fs::read(examples().join("www/downloads/sample-data.txt")).unwrap();
    assert_eq!(download.body, data);
}

#[test]
fn the_negotiation_example_answers_in_the_readers_language() {
    let dir = TempRoot::new();
    let config = example_copy(&dir, "negotiation.toml", &[]);
    let server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    for (path, fields, status, language) in [
        ("/welcome/hello", &[][..], 200, None),
        (
            "/welcome/hello",
            &[("Accept-Language", "fr-CA, en;q=0.5")][..],
            200,
            Some("fr"),
        ),
        (
            "/welcome/hello",
            &[("Accept-Language", "de")][..],
            200,
            Some("de"),
        ),
        (
            "/strict/hello",
            &[("Accept", "application/json")][..],
            406,
            None,
        ),
    ] {
        let response = request(addr, "GET", path, fields);
        assert_eq!(response.status, status, "{path} {fields:?}");
        assert_eq!(
            response.header("content-language"),
            language,
            "{path} {fields:?}"
        );
        assert!(response
            .header("vary")
            .is_some_and(|vary| vary.contains("Accept-Language")));
    }
}

#[test]
fn the_proxy_example_passes_api_to_its_pool_and_serves_files() {
    let mut primary = PyUpstream::start("primary");
    let backup = PyUpstream::start("backup");
    let dir = TempRoot::new();
    let config = example_copy(
        &dir,
        "proxy.toml",
        &[
            ("127.0.0.1:9001".into(), primary.addr().to_string()),
            ("127.0.0.1:9002".into(), backup.addr().to_string()),
        ],
    );
    let server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let api = get(addr, "/api/hello?x=1");
    assert_eq!(api.status, 200, "{api:?}");
    assert_eq!(
        api.body_text(),
        "primary GET /hello?x=1\n",
        "the prefix is replaced"
    );
    // `compress = true`: the application's text comes compressed to a client that asks.
    let mut conn = support::http::Conn::open(addr);
    conn.send(support::http::build_request(
        "GET",
        "/api/text/4096",
        &[("Accept-Encoding", "gzip")],
    ));
    let text = conn.read_proxied("GET");
    assert_eq!(
        text.header("content-encoding"),
        Some("gzip"),
        "{:?}",
        text.headers
    );
    let mut decoded = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&text.body[..]),
        &mut decoded,
    )
    .unwrap();
    assert_eq!(decoded.len(), 4096);
    assert!(decoded.starts_with("line 0\nline 1\n"), "{decoded}");
    let echo = request(addr, "POST", "/api/echo", &[("Content-Length", "0")]);
    assert_eq!(echo.status, 200, "{echo:?}");
    assert_eq!(
        get(addr, "/hello.txt").status,
        200,
        "static files beside the proxy"
    );

    primary.kill();
    let answers: Vec<String> = (0..4)
        .map(|_| {
            let response = get(addr, "/api/who");
            format!("{} {}", response.status, response.body_text().trim())
        })
        .collect();
    assert_eq!(
        answers.last().unwrap(),
        "200 backup GET /who",
        "{answers:?}"
    );
}
