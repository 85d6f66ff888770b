//! Conditional requests (RFC 9110 §13): If-Match, If-Unmodified-Since, If-None-Match,
//! If-Modified-Since and If-Range, evaluated in §13.2.2's order.

use crate::support;

use support::http::build_request;
use support::*;

const PAST: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
const FUTURE: &str = "Fri, 01 Jan 2100 00:00:00 GMT";

/// Placeholders in the matrix: `E` = the file's ETag, `W/E` = its weak form, `LM` = its
/// Last-Modified; anything else is sent verbatim.
const MATRIX: &[(&[(&str, &str)], u16)] = &[
    (&[("If-None-Match", "E")], 304),
    (&[("If-None-Match", "W/E")], 304),
    (&[("If-None-Match", "\"other\"")], 200),
    (&[("If-None-Match", "\"other\", E")], 304),
    (&[("If-None-Match", "*")], 304),
    (&[("If-Modified-Since", "LM")], 304),
    (&[("If-Modified-Since", PAST)], 200),
    (&[("If-Modified-Since", "not a date")], 200),
    (
        &[("If-None-Match", "\"other\""), ("If-Modified-Since", "LM")],
        200,
    ),
    (&[("If-None-Match", "E"), ("If-Modified-Since", PAST)], 304),
    (&[("If-Match", "E")], 200),
    (&[("If-Match", "\"other\"")], 412),
    (&[("If-Match", "\"other\", E")], 200),
    (&[("If-Match", "*")], 200),
    (&[("If-Match", "W/E")], 412),
    (&[("If-Unmodified-Since", PAST)], 412),
    (&[("If-Unmodified-Since", "LM")], 200),
    (&[("If-Unmodified-Since", FUTURE)], 200),
    (&[("If-Match", "E"), ("If-Unmodified-Since", PAST)], 200),
    (&[("If-Match", "\"other\""), ("If-None-Match", "E")], 412),
    (
        &[("If-Unmodified-Since", PAST), ("If-None-Match", "E")],
        412,
    ),
    (&[("If-Match", "E"), ("If-None-Match", "E")], 304),
    (&[("If-None-Match", "E"), ("Range", "bytes=0-9")], 304),
    (&[("If-Range", "E"), ("Range", "bytes=0-9")], 206),
    (&[("If-Range", "\"other\""), ("Range", "bytes=0-9")], 200),
    (&[("If-Range", "W/E"), ("Range", "bytes=0-9")], 200),
    (&[("If-Range", "LM"), ("Range", "bytes=0-9")], 206),
    (&[("If-Range", PAST), ("Range", "bytes=0-9")], 200),
    (&[("If-Range", "E")], 200),
];

const BODY: &str = "conditional body, long enough for ranges";

default_arch!(fn conditional_matrix(arch) {
    let root = TempRoot::new();
    root.file("page.html", BODY);
    root.set_mtime("page.html", std::time::SystemTime::now() - std::time::Duration::from_secs(3600));
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    let plain = conn.get("/page.html", &[]);
    let etag = plain.header("etag").expect("ETag").to_string();
    let last_modified = plain.header("last-modified").expect("Last-Modified").to_string();
    let weak = format!("W/{etag}");
    for method in ["GET", "HEAD"] {
        for (fields, status) in MATRIX {
            let concrete: Vec<(&str, String)> = fields
                .iter()
                .map(|(name, value)| {
                    let value = value
                        .replace("W/E", &weak)
                        .replace("LM", &last_modified);
                    let value = if value == "E" { etag.clone() } else { value.replace(", E", &format!(", {etag}")) };
                    (*name, value)
                })
                .collect();
            let borrowed: Vec<(&str, &str)> = concrete.iter().map(|(name, value)| (*name, value.as_str())).collect();
            conn.send(build_request(method, "/page.html", &borrowed));
            let response = conn.read_response(method);
            assert_eq!(response.status, *status, "{method} {borrowed:?}: {response:?}");
            response.assert_common_headers();
            match response.status {
                304 => {
                    assert_eq!(response.header("etag"), Some(etag.as_str()), "304 carries ETag");
                    assert_eq!(response.header("last-modified"), Some(last_modified.as_str()));
                }
                200 if method == "GET" => assert_eq!(response.body, BODY.as_bytes(), "{borrowed:?}"),
                206 if method == "GET" => {
                    assert_eq!(response.body, &BODY.as_bytes()[..10]);
                    assert_eq!(response.header("content-range"), Some(format!("bytes 0-9/{}", BODY.len()).as_str()));
                }
                _ => {}
            }
        }
    }
    // After all those (including 304s without bodies) the connection is still in sync.
    assert_eq!(conn.get("/page.html", &[]).body, BODY.as_bytes());
});

default_arch!(fn etag_changes_when_file_changes(arch) {
    let root = TempRoot::new();
    root.file("page.html", "version one");
    let server = Server::start(Options::new(root.path(), arch));
    let first = get(server.addr(), "/page.html");
    let etag = first.header("etag").unwrap().to_string();
    root.file("page.html", "version two, longer");
    let response = request(server.addr(), "GET", "/page.html", &[("If-None-Match", etag.as_str())]);
    assert_eq!(response.status, 200, "old ETag must not validate new content");
    assert_eq!(response.body, b"version two, longer");
    assert_ne!(response.header("etag"), Some(etag.as_str()));
});
