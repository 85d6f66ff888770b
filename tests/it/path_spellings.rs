//! One resource, one set of rules: every spelling of a path (a trailing `/`, `//`, `/.`, dot
//! segments, percent-encoding, `%2f`, case, `;params`, trailing dots) reaches the location the
//! normalised path names, with its `deny`, `allow` and `basic_auth`, or no file at all. The
//! table runs under every engine over HTTP/1.1 and, on the same server, over HTTP/2 (h2c, one
//! connection for the whole table), once without credentials and once with them.

use crate::support;

use serde_json::{json, Value};

use support::h2::{field, h2_client_ok};
use support::http::basic_authorization;
use support::tls::{listeners, write_tls_config};
use support::*;

/// A plain listener, then an h2c one (the ready line names them in this order).
const PLAIN_AND_H2C: &str = "[\"127.0.0.1:0\", \"127.0.0.1:0 h2c\"]";

/// The files, each with a body no other response may carry.
const FILES: &[(&str, &str)] = &[
    ("secret.txt", "SECRET-BODY"),
    ("admin.txt", "ADMIN-BODY"),
    ("open.txt", "OPEN-BODY"),
    ("private/p.txt", "PRIVATE-BODY"),
    ("local/l.txt", "LOCAL-BODY"),
    ("docs/index.html", "DOCS-INDEX-BODY"),
];

/// `/secret.txt` and `/docs/index.html` (an index file) exact with `deny = ["all"]`;
/// `/admin.txt` exact and `/private/` with `basic_auth`; `/local/` allowing only an address
/// the test never has.
const LOCATIONS: &str = r#"
  [[site.location]]
  path = "/secret.txt"
  exact = true
  deny = ["all"]

  [[site.location]]
  path = "/admin.txt"
  exact = true
  basic_auth = { users = { alice = "HASH" } }

  [[site.location]]
  path = "/private/"
  basic_auth = { users = { alice = "HASH" } }

  [[site.location]]
  path = "/local/"
  allow = ["10.0.0.0/8"]

  [[site.location]]
  path = "/docs/index.html"
  exact = true
  deny = ["all"]
"#;

/// (request target, status without credentials, status with alice's, the file a `200` carries
/// or where a `301` points).
const SPELLINGS: &[(&str, u16, u16, &str)] = &[
    // The exact `deny` location: every spelling of its path is refused.
    ("/secret.txt", 403, 403, ""),
    ("/secret.txt/", 403, 403, ""),
    ("/secret.txt//", 403, 403, ""),
    ("/secret.txt/.", 403, 403, ""),
    ("/secret.txt/./", 403, 403, ""),
    ("/secret.txt/x/..", 403, 403, ""),
    ("//secret.txt", 403, 403, ""),
    ("/./secret.txt", 403, 403, ""),
    ("/open/../secret.txt", 403, 403, ""),
    ("/%73ecret.txt", 403, 403, ""),
    ("/secret%2Etxt", 403, 403, ""),
    ("/secret.txt?a=1", 403, 403, ""),
    ("http://test/secret.txt/", 403, 403, ""),
    // Other names on a case-sensitive file system, or no name at all: never the file.
    ("/Secret.txt", 404, 404, ""),
    ("/SECRET.TXT", 404, 404, ""),
    ("/secret.txt;x", 404, 404, ""),
    ("/secret.txt;", 404, 404, ""),
    ("/secret.txt.", 404, 404, ""),
    ("/secret.txt%20", 404, 404, ""),
    ("/secret.txt%3Fa", 404, 404, ""),
    ("/%2fsecret.txt", 400, 400, ""),
    ("/open%2f..%2fsecret.txt", 400, 400, ""),
    ("/secret.txt%2f", 400, 400, ""),
    ("/secret.txt%5c", 400, 400, ""),
    ("/secret.txt%00", 400, 400, ""),
    // The exact `basic_auth` location: a file with a trailing slash is no file.
    ("/admin.txt", 401, 200, "admin.txt"),
    ("/admin.txt/", 401, 404, ""),
    ("//admin.txt/.", 401, 404, ""),
    ("/%61dmin.txt", 401, 200, "admin.txt"),
    // The `basic_auth` prefix.
    ("/private/p.txt", 401, 200, "private/p.txt"),
    ("/private/p.txt/", 401, 404, ""),
    ("/private//p.txt", 401, 200, "private/p.txt"),
    ("//private/p.txt", 401, 200, "private/p.txt"),
    ("/open/../private/p.txt", 401, 200, "private/p.txt"),
    ("/%70rivate/p.txt", 401, 200, "private/p.txt"),
    ("/private/./p.txt/.", 401, 404, ""),
    ("/private", 301, 301, "/private/"),
    ("//private", 301, 301, "/private/"),
    ("/PRIVATE/p.txt", 404, 404, ""),
    ("/private;x/p.txt", 404, 404, ""),
    ("/private./p.txt", 404, 404, ""),
    // The `allow` prefix.
    ("/local/l.txt", 403, 403, ""),
    ("/local//l.txt", 403, 403, ""),
    ("/local/l.txt/", 403, 403, ""),
    ("/%6cocal/l.txt", 403, 403, ""),
    ("/private/../local/l.txt", 403, 403, ""),
    // A directory's index is the file its own path names, under that path's rules.
    ("/docs/", 403, 403, ""),
    ("/docs//", 403, 403, ""),
    ("/docs/.", 403, 403, ""),
    ("/docs/index.html", 403, 403, ""),
    ("/docs", 301, 301, "/docs/"),
    ("/%64ocs?x", 301, 301, "/docs/?x"),
    // No rule: the file, and no file under a trailing slash.
    ("/open.txt", 200, 200, "open.txt"),
    ("/open.txt/", 404, 404, ""),
    ("/open.txt//", 404, 404, ""),
    ("/open.txt/.", 404, 404, ""),
];

/// What a response is checked against: its row and whether it came with credentials.
fn check(
    (target, expected): (&str, &str),
    want: u16,
    status: u16,
    body: &str,
    location: Option<&str>,
    over: &str,
    failures: &mut Vec<String>,
) {
    if status != want {
        failures.push(format!("{over} {target:?}: {status}, want {want}"));
        return;
    }
    for (name, secret) in FILES {
        if body.contains(secret) && (status != 200 || expected != *name) {
            failures.push(format!("{over} {target:?}: {status} carried {name}"));
        }
    }
    let expected_body = FILES
        .iter()
        .find(|(name, _)| *name == expected)
        .map(|(_, body)| *body);
    if status == 200 && expected_body != Some(body) {
        failures.push(format!(
            "{over} {target:?}: 200 with {body:?}, not {expected}"
        ));
    }
    if status == 301 && location != Some(expected) {
        failures.push(format!("{over} {target:?}: 301 to {location:?}"));
    }
}

fn h2_requests(authorization: Option<&str>) -> Value {
    let headers: Vec<Value> = authorization
        .map(|value| vec![json!(["authorization", value])])
        .unwrap_or_default();
    SPELLINGS
        .iter()
        .filter(|(target, ..)| target.starts_with('/'))
        .map(|(target, ..)| json!({"path": target, "headers": headers}))
        .collect()
}

default_arch!(fn every_spelling_reaches_the_same_location_and_checks(arch) {
    let root = TempRoot::new();
    for (name, body) in FILES {
        root.file(name, body);
    }
    let hash = bcrypt::hash("pw", 4).unwrap();
    let body = format!("[[site]]\nroot = \"www\"\n{}", LOCATIONS.replace("HASH", &hash));
    let config = write_tls_config(&root, arch, PLAIN_AND_H2C, &body);
    let server = Server::start(Options::config_file(&config));
    let all = listeners(server.ready_line());
    let (plain, h2c) = (all[0].1, all[1].1);
    let good = basic_authorization("alice", "pw");
    let mut failures = Vec::new();
    for (authorization, column) in [(None, 1), (Some(good.as_str()), 2)] {
        let extra: Vec<(&str, &str)> =
            authorization.map(|value| ("Authorization", value)).into_iter().collect();
        let want = |row: &(&str, u16, u16, &str)| if column == 1 { row.1 } else { row.2 };
        for row in SPELLINGS {
            let response = request(plain, "GET", row.0, &extra);
            check(
                (row.0, row.3),
                want(row),
                response.status,
                &response.body_text(),
                response.header("location"),
                &format!("HTTP/1.1 (column {column})"),
                &mut failures,
            );
        }
        let answer = h2_client_ok(json!({"port": h2c.port(), "requests": h2_requests(authorization)}));
        let rows = SPELLINGS.iter().filter(|(target, ..)| target.starts_with('/'));
        for (row, response) in rows.zip(answer["responses"].as_array().unwrap()) {
            let status = u16::try_from(response["status"].as_u64().unwrap_or(0)).unwrap_or(0);
            check(
                (row.0, row.3),
                want(row),
                status,
                response["body"].as_str().unwrap_or(""),
                field(response, "location"),
                &format!("HTTP/2 (column {column})"),
                &mut failures,
            );
        }
    }
    assert!(failures.is_empty(), "{} wrong:\n{}", failures.len(), failures.join("\n"));
});
