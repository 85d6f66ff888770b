//! Precompressed siblings (`f.css.gz`, `f.css.br`) chosen by Accept-Encoding (RFC 9110 §12.5.3):
//! q-values honoured, q=0 excludes, ties prefer br; Vary on every response for such a file.

use crate::support;

use support::*;

const IDENTITY: &str = "body { color: red; } /* identity */";
const GZIP: &[u8] = b"\x1f\x8b pretend gzip bytes";
const BROTLI: &[u8] = b"pretend brotli bytes, longer than gzip";

/// (Accept-Encoding or None, expected Content-Encoding or None for identity).
const MATRIX: &[(Option<&str>, Option<&str>)] = &[
    (None, None),
    (Some("gzip"), Some("gzip")),
    (Some("br"), Some("br")),
    (Some("gzip, br"), Some("br")),
    (Some("br, gzip"), Some("br")),
    (Some("br;q=0.5, gzip"), Some("gzip")),
    (Some("gzip;q=0.9, br;q=0.8"), Some("gzip")),
    (Some("gzip;q=1.0, br;q=1"), Some("br")),
    (Some("br;q=0, gzip;q=0"), None),
    (Some("br;q=0"), None),
    (Some("identity"), None),
    (Some("deflate"), None),
    (Some("*"), Some("br")),
    (Some("gzip;q=0, *"), Some("br")),
    (Some("br;q=0, *;q=0.5"), Some("gzip")),
    (Some("BR"), Some("br")),
    (Some("GZip"), Some("gzip")),
    (Some(""), None),
];

fn build_root() -> TempRoot {
    let root = TempRoot::new();
    root.file("f.css", IDENTITY);
    root.file("f.css.gz", GZIP);
    root.file("f.css.br", BROTLI);
    root.file("only.js", "let only = 1;");
    root.file("only.js.gz", GZIP);
    root.file("plain.css", "p {}");
    root
}

default_arch!(fn accept_encoding_matrix(arch) {
    let root = build_root();
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    let mut etags = std::collections::HashMap::new();
    for (accept, encoding) in MATRIX {
        let headers: Vec<(&str, &str)> = accept.iter().map(|value| ("Accept-Encoding", *value)).collect();
        let response = conn.get("/f.css", &headers);
        assert_eq!(response.status, 200, "{accept:?}");
        assert_eq!(response.header("content-encoding"), *encoding, "{accept:?}: {:?}", response.headers);
        assert_eq!(response.header("content-type"), Some("text/css; charset=utf-8"), "{accept:?}");
        let vary = response.header("vary").unwrap_or_default().to_ascii_lowercase();
        assert!(vary.contains("accept-encoding"), "{accept:?}: Vary missing: {:?}", response.headers);
        let expected: &[u8] = match encoding {
            None => IDENTITY.as_bytes(),
            Some("gzip") => GZIP,
            Some(_) => BROTLI,
        };
        assert_eq!(response.body, expected, "{accept:?}");
        assert_eq!(response.header("content-length"), Some(expected.len().to_string().as_str()));
        let etag = response.header("etag").expect("ETag").to_string();
        let previous = etags.insert(encoding.unwrap_or("identity"), etag.clone());
        if let Some(previous) = previous {
            assert_eq!(previous, etag, "same variant, same ETag");
        }
    }
    let distinct: std::collections::HashSet<&String> = etags.values().collect();
    assert_eq!(distinct.len(), 3, "each variant has its own ETag: {etags:?}");
});

default_arch!(fn gzip_only_and_no_siblings(arch) {
    let root = build_root();
    let server = Server::start(Options::new(root.path(), arch));
    let response = request(server.addr(), "GET", "/only.js", &[("Accept-Encoding", "br, gzip")]);
    assert_eq!(response.header("content-encoding"), Some("gzip"));
    assert_eq!(response.header("content-type"), Some("application/javascript; charset=utf-8"));
    assert_eq!(response.body, GZIP);
    let response = request(server.addr(), "GET", "/plain.css", &[("Accept-Encoding", "br, gzip")]);
    assert_eq!(response.header("content-encoding"), None);
    assert_eq!(response.body, b"p {}");
});

default_arch!(fn variants_with_range_head_and_conditionals(arch) {
    let root = build_root();
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    let gzip = conn.get("/f.css", &[("Accept-Encoding", "gzip")]);
    let gzip_etag = gzip.header("etag").unwrap().to_string();
    let identity = conn.get("/f.css", &[]);
    let identity_etag = identity.header("etag").unwrap().to_string();
    // Range applies to the selected representation's bytes.
    let ranged = conn.get("/f.css", &[("Accept-Encoding", "gzip"), ("Range", "bytes=0-3")]);
    assert_eq!(ranged.status, 206);
    assert_eq!(ranged.body, &GZIP[..4]);
    assert_eq!(ranged.header("content-range"), Some(format!("bytes 0-3/{}", GZIP.len()).as_str()));
    // HEAD mirrors GET for the variant.
    conn.send(support::http::build_request("HEAD", "/f.css", &[("Accept-Encoding", "gzip")]));
    let head = conn.read_response("HEAD");
    assert_eq!(head.headers_without_date(), gzip.headers_without_date());
    // Validators are per variant.
    let hit = conn.get("/f.css", &[("Accept-Encoding", "gzip"), ("If-None-Match", gzip_etag.as_str())]);
    assert_eq!(hit.status, 304);
    let vary = hit.header("vary").unwrap_or_default().to_ascii_lowercase();
    assert!(vary.contains("accept-encoding"), "304 keeps Vary");
    let miss = conn.get("/f.css", &[("Accept-Encoding", "gzip"), ("If-None-Match", identity_etag.as_str())]);
    assert_eq!(miss.status, 200);
    assert_eq!(miss.body, GZIP);
});
