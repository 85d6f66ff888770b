//! Content negotiation (`multiviews`, Apache `MultiViews`): a path that names no file is
//! answered with the best of its variants beside it (`doc.en.html`, `doc.fr.html`, …) by
//! `Accept` and `Accept-Language` with q-values, then its coding by `Accept-Encoding`; `Vary`
//! lists what was consulted; `406` only under `negotiation = "strict"`, the server's default
//! variant otherwise. Over HTTP/1.1 and HTTP/2 (h2c) on one server, on the default engine (the
//! choice is `Conn`'s) and once through helper processes (the variants cross a process
//! boundary).

use crate::support;

use serde_json::{json, Value};
use support::h2::{field, h2_client_ok};
use support::tls::{listeners, write_tls_config};
use support::*;

const GZIP: &[u8] = b"\x1f\x8b pretend gzip of the French page";

/// A plain listener, then an h2c one (the ready line names them in this order).
const PLAIN_AND_H2C: &str = "[\"127.0.0.1:0\", \"127.0.0.1:0 h2c\"]";

const CONFIG: &str = r#"
[[site]]
root = "www"

  [[site.location]]
  path = "/nego/"
  multiviews = true

  # Its scripts are never variants: `/nego/doc` must not send `doc.pl`'s source.
  [[site.location]]
  extension = ".pl"
  handler = "cgi"

  [[site.location]]
  path = "/strict/"
  multiviews = true
  negotiation = "strict"
"#;

fn start(arch: &str) -> (TempRoot, Server) {
    let root = TempRoot::new();
    for (name, body) in [
        ("nego/doc.html", "generic"),
        ("nego/doc.en.html", "english"),
        ("nego/doc.fr.html", "french"),
        ("nego/doc.bak", "a backup, never a variant"),
        (
            "nego/doc.pl",
            "#!/usr/bin/perl\n# a script's source, never a variant",
        ),
        ("nego/data.html", "<p>data</p>"),
        ("nego/data.json", "{\"data\": 1}"),
        ("nego/exact", "the file itself"),
        ("nego/exact.html", "a variant of it"),
        ("strict/doc.en.html", "strict english"),
        ("strict/doc.fr.html", "strict french"),
        ("off/doc.en.html", "not negotiated"),
        ("nego/dir/index.html.en", "english index"),
        ("nego/dir/index.html.fr", "french index"),
    ] {
        root.file(name, body);
    }
    root.file("nego/doc.fr.html.gz", GZIP);
    let config = write_tls_config(&root, arch, PLAIN_AND_H2C, CONFIG);
    let server = Server::start(Options::config_file(&config));
    (root, server)
}

/// (path, request fields, status, body, `Vary`, `Content-Language`, `Content-Encoding`).
type Row = (
    &'static str,
    &'static [(&'static str, &'static str)],
    u16,
    &'static [u8],
    Option<&'static str>,
    Option<&'static str>,
    Option<&'static str>,
);

const ALL_VARY: Option<&str> = Some("Accept-Language");
const FRENCH_VARY: Option<&str> = Some("Accept-Language, Accept-Encoding");
const TABLE: &[Row] = &[
    // No preference: the server's default variant (the shortest name).
    ("/nego/doc", &[], 200, b"generic", ALL_VARY, None, None),
    // The French page has a gzip sibling: its responses vary by coding too.
    (
        "/nego/doc",
        &[("Accept-Language", "fr;q=0.9, en;q=0.8")],
        200,
        b"french",
        FRENCH_VARY,
        Some("fr"),
        None,
    ),
    (
        "/nego/doc",
        &[("Accept-Language", "en-US, fr;q=0.5")],
        200,
        b"english",
        ALL_VARY,
        Some("en"),
        None,
    ),
    // q=0 excludes French; English is the one left the client named.
    (
        "/nego/doc",
        &[("Accept-Language", "fr;q=0, en;q=0.1")],
        200,
        b"english",
        ALL_VARY,
        Some("en"),
        None,
    ),
    // A language no file has: the generic variant.
    (
        "/nego/doc",
        &[("Accept-Language", "de")],
        200,
        b"generic",
        ALL_VARY,
        None,
        None,
    ),
    // Encoding after the variant: the French page's gzip sibling.
    (
        "/nego/doc",
        &[("Accept-Language", "fr"), ("Accept-Encoding", "gzip")],
        200,
        GZIP,
        FRENCH_VARY,
        Some("fr"),
        Some("gzip"),
    ),
    (
        "/nego/doc",
        &[("Accept-Language", "fr"), ("Accept-Encoding", "gzip;q=0")],
        200,
        b"french",
        FRENCH_VARY,
        Some("fr"),
        None,
    ),
    // By type.
    (
        "/nego/data",
        &[("Accept", "application/json")],
        200,
        b"{\"data\": 1}",
        Some("Accept"),
        None,
        None,
    ),
    (
        "/nego/data",
        &[("Accept", "text/html, application/json;q=0.5")],
        200,
        b"<p>data</p>",
        Some("Accept"),
        None,
        None,
    ),
    (
        "/nego/data",
        &[("Accept", "text/html;q=0, */*")],
        200,
        b"{\"data\": 1}",
        Some("Accept"),
        None,
        None,
    ),
    // Nothing acceptable, lenient: the default variant.
    (
        "/nego/data",
        &[("Accept", "image/png")],
        200,
        b"<p>data</p>",
        Some("Accept"),
        None,
        None,
    ),
    // A file that exists is served as it is, never negotiated.
    (
        "/nego/exact",
        &[("Accept", "text/html")],
        200,
        b"the file itself",
        None,
        None,
        None,
    ),
    // Strict: 406 when nothing is acceptable, the variant otherwise.
    (
        "/strict/doc",
        &[("Accept-Language", "de")],
        406,
        b"",
        Some("Accept, Accept-Language"),
        None,
        None,
    ),
    (
        "/strict/doc",
        &[("Accept-Language", "de, fr;q=0.2")],
        200,
        b"strict french",
        Some("Accept, Accept-Language"),
        Some("fr"),
        None,
    ),
    // Off by default: no variant is looked for.
    (
        "/off/doc",
        &[("Accept-Language", "en")],
        404,
        b"",
        None,
        None,
        None,
    ),
    // A directory's index by its variants.
    (
        "/nego/dir/",
        &[("Accept-Language", "fr, en;q=0.5")],
        200,
        b"french index",
        ALL_VARY,
        Some("fr"),
        None,
    ),
    (
        "/nego/dir/",
        &[],
        200,
        b"english index",
        ALL_VARY,
        Some("en"),
        None,
    ),
    // Multiviews on, but nothing of that name.
    ("/nego/nothing", &[], 404, b"", None, None, None),
];

/// A response's header by its name, as either protocol's client reports it.
type HeaderOf<'a> = &'a dyn Fn(&str) -> Option<String>;

fn check_row(
    over: &str,
    row: &Row,
    (status, body, headers): (u16, &[u8], HeaderOf<'_>),
    failures: &mut Vec<String>,
) {
    let (path, fields, want_status, want_body, vary, language, encoding) = row;
    let mut wrong = Vec::new();
    if status != *want_status {
        wrong.push(format!("status {status}"));
    }
    if *want_status != 404 && *want_status != 406 && body != *want_body {
        wrong.push(format!("body {:?}", String::from_utf8_lossy(body)));
    }
    for (name, want) in [
        ("vary", vary),
        ("content-language", language),
        ("content-encoding", encoding),
    ] {
        let got = headers(name);
        if got.as_deref() != *want {
            wrong.push(format!("{name} {got:?} (want {want:?})"));
        }
    }
    if !wrong.is_empty() {
        failures.push(format!("{over} {path} {fields:?}: {}", wrong.join(", ")));
    }
}

fn check_table(server: &Server) {
    let all = listeners(server.ready_line());
    let (plain, h2c) = (all[0].1, all[1].1);
    let mut failures = Vec::new();
    for row in TABLE {
        let response = request(plain, "GET", row.0, row.1);
        let headers = |name: &str| response.header(name).map(str::to_owned);
        check_row(
            "HTTP/1.1",
            row,
            (response.status, &response.body, &headers),
            &mut failures,
        );
    }
    let requests: Vec<Value> = TABLE
        .iter()
        .map(|(path, fields, ..)| {
            let headers: Vec<Value> = fields
                .iter()
                .map(|(name, value)| json!([name.to_ascii_lowercase(), value]))
                .collect();
            json!({"path": path, "headers": headers})
        })
        .collect();
    let answer = h2_client_ok(json!({"port": h2c.port(), "requests": requests}));
    for (row, response) in TABLE.iter().zip(answer["responses"].as_array().unwrap()) {
        let status = u16::try_from(response["status"].as_u64().unwrap_or(0)).unwrap_or(0);
        // The gzip body is not text: its length stands for it.
        let body = if row.6.is_some() {
            let length = response["body_len"].as_u64().unwrap_or(0);
            if length == GZIP.len() as u64 {
                GZIP.to_vec()
            } else {
                Vec::new()
            }
        } else {
            response["body"].as_str().unwrap_or("").as_bytes().to_vec()
        };
        let headers = |name: &str| field(response, name).map(str::to_owned);
        check_row("HTTP/2", row, (status, &body, &headers), &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

default_arch!(fn negotiation_table_over_http1_and_http2(arch) {
    let (_root, server) = start(arch);
    check_table(&server);
    // Again from the path cache: the same answers.
    check_table(&server);
});

#[test]
fn variants_cross_from_helper_processes() {
    let (_root, server) = start("amped --helpers-mode process");
    check_table(&server);
}

default_arch!(fn range_head_and_304_are_of_the_chosen_variant(arch) {
    let (_root, server) = start(arch);
    let plain = listeners(server.ready_line())[0].1;
    let mut conn = Conn::open(plain);
    let french: &[(&str, &str)] = &[("Accept-Language", "fr")];
    let full = conn.get("/nego/doc", french);
    assert_eq!(full.body, b"french");
    let etag = full.header("etag").expect("ETag").to_owned();
    let english = conn.get("/nego/doc", &[("Accept-Language", "en")]);
    assert_ne!(english.header("etag"), Some(etag.as_str()), "each variant its own ETag");

    let ranged = conn.get("/nego/doc", &[("Accept-Language", "fr"), ("Range", "bytes=1-3")]);
    assert_eq!(ranged.status, 206);
    assert_eq!(ranged.body, b"ren");
    assert_eq!(ranged.header("content-range"), Some("bytes 1-3/6"));
    assert_eq!(ranged.header("vary"), FRENCH_VARY);

    conn.send(support::http::build_request("HEAD", "/nego/doc", french));
    let head = conn.read_response("HEAD");
    assert_eq!(head.headers_without_date(), full.headers_without_date());

    let revalidated = conn.get(
        "/nego/doc",
        &[("Accept-Language", "fr"), ("If-None-Match", etag.as_str())],
    );
    assert_eq!(revalidated.status, 304);
    assert_eq!(revalidated.header("vary"), FRENCH_VARY);
    // The French ETag does not match what an English reader gets.
    let other = conn.get(
        "/nego/doc",
        &[("Accept-Language", "en"), ("If-None-Match", etag.as_str())],
    );
    assert_eq!(other.status, 200);
    assert_eq!(other.body, b"english");
});

default_arch!(fn every_spelling_of_the_path_is_negotiated_alike(arch) {
    let (_root, server) = start(arch);
    let plain = listeners(server.ready_line())[0].1;
    // An encoded slash is refused before any lookup, as for every path.
    let refused = request(plain, "GET", "/nego%2fdoc", &[("Accept-Language", "fr")]);
    assert_eq!(refused.status, 400);
    for target in ["/nego/doc", "//nego//doc", "/nego/./doc", "/off/../nego/doc", "/nego/%64oc", "/nego/x/../doc"] {
        let response = request(plain, "GET", target, &[("Accept-Language", "fr;q=0.9, en;q=0.8")]);
        assert_eq!(response.status, 200, "{target}");
        assert_eq!(response.body, b"french", "{target}");
        assert_eq!(response.header("vary"), FRENCH_VARY, "{target}");
    }
});

default_arch!(fn a_variant_added_later_is_found(arch) {
    let (root, server) = start(arch);
    let plain = listeners(server.ready_line())[0].1;
    let before = request(plain, "GET", "/nego/doc", &[("Accept-Language", "de")]);
    assert_eq!(before.body, b"generic");
    root.file("nego/doc.de.html", "deutsch");
    // The directory's watch drops the cached set; bounded by revalidation otherwise.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let after = request(plain, "GET", "/nego/doc", &[("Accept-Language", "de")]);
        if after.body == b"deutsch" {
            assert_eq!(after.header("content-language"), Some("de"));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the new variant was never chosen");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
});

#[test]
fn an_unknown_negotiation_is_a_config_error() {
    let root = TempRoot::new();
    let file = root.outside_dir().join("bad.toml");
    let text = "[[site]]\nroot = \"/tmp\"\nmultiviews = true\nnegotiation = \"loose\"\n";
    std::fs::write(&file, text).unwrap();
    let (code, _, stderr) = run_to_exit(&["check", file.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(".toml:4:"), "names the line: {stderr}");
    assert!(
        stderr.contains("site.negotiation: "),
        "names the key: {stderr}"
    );
}

/// The sample `name` of the status page's text (`ampd_cache_hits_total{cache="path"} 5`).
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

default_arch!(fn the_variant_set_is_cached_with_the_path(arch) {
    let root = TempRoot::new();
    root.file("nego/doc.en.html", "english");
    root.file("nego/doc.fr.html", "french");
    let config = write_config(
        &root,
        arch,
        "[[site]]\nroot = \"www\"\n\n  [[site.location]]\n  path = \"/nego/\"\n  multiviews = true\n\n  [[site.location]]\n  path = \"/status\"\n  exact = true\n  handler = \"status\"\n",
    );
    let server = Server::start(Options::config_file(&config));
    // One connection: every request meets the same loop's cache.
    let mut conn = Conn::open(server.addr());
    for language in ["fr", "en", "fr", "en", "fr", "en"] {
        let response = conn.get("/nego/doc", &[("Accept-Language", language)]);
        assert_eq!(response.header("content-language"), Some(language));
    }
    // Counters are published by the loop a few times a second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let (hits, misses) = loop {
        let text = get(server.addr(), "/status").body_text();
        let hits = sample(&text, "ampd_cache_hits_total{cache=\"path\"}");
        let misses = sample(&text, "ampd_cache_misses_total{cache=\"path\"}");
        if hits >= 5.0 || std::time::Instant::now() > deadline {
            break (hits, misses);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // One translation (one directory read) answered all six; a set that was not cached would
    // miss every time.
    assert!(hits >= 5.0, "hits {hits}, misses {misses}");
    assert!(misses <= 2.0, "hits {hits}, misses {misses}");
});
