//! Range requests (RFC 9110 §14): single ranges, suffixes, open ends, multipart/byteranges with
//! every part checked, merging of overlapping/adjacent ranges, 416, and ignored Range headers.
//! The matrix uses RFC 9110 §14.1.2's examples on a 10,000-byte representation.

use crate::support;

use support::http::{boundary_of, build_request, parse_content_range, parse_multipart};
use support::root::pattern_bytes;
use support::*;

const LEN: usize = 10_000;

#[derive(Debug)]
enum Expect {
    /// 200 with the whole file (Range ignored).
    Full,
    /// 206 with one part: inclusive (first, last).
    Single(u64, u64),
    /// 206 multipart/byteranges with these parts (sorted by first byte).
    Multi(&'static [(u64, u64)]),
    /// 416 with `Content-Range: bytes */LEN`.
    Unsatisfiable,
}

const MATRIX: &[(&str, Expect)] = &[
    ("bytes=0-499", Expect::Single(0, 499)),
    ("bytes=500-999", Expect::Single(500, 999)),
    ("bytes=-500", Expect::Single(9500, 9999)),
    ("bytes=9500-", Expect::Single(9500, 9999)),
    ("bytes=0-", Expect::Single(0, 9999)),
    ("bytes=0-0", Expect::Single(0, 0)),
    ("bytes=9999-", Expect::Single(9999, 9999)),
    ("bytes=0-99999", Expect::Single(0, 9999)),
    ("bytes=-99999", Expect::Single(0, 9999)),
    ("bytes=0-0,-1", Expect::Multi(&[(0, 0), (9999, 9999)])),
    ("bytes=500-600,601-999", Expect::Single(500, 999)),
    ("bytes=500-700,601-999", Expect::Single(500, 999)),
    ("bytes=0-10,5-20", Expect::Single(0, 20)),
    (
        "bytes=0-1,3-4,8-9",
        Expect::Multi(&[(0, 1), (3, 4), (8, 9)]),
    ),
    ("bytes= 0-1 , 3-4", Expect::Multi(&[(0, 1), (3, 4)])),
    ("bytes=0-1,20000-30000", Expect::Single(0, 1)),
    ("bytes=10000-", Expect::Unsatisfiable),
    ("bytes=20000-30000", Expect::Unsatisfiable),
    ("bytes=-0", Expect::Unsatisfiable),
    ("bytes=10000-10001,20000-", Expect::Unsatisfiable),
    ("bytes=5-1", Expect::Full),
    ("items=0-5", Expect::Full),
    ("bytes=abc", Expect::Full),
    ("bytes 0-5", Expect::Full),
    ("bytes=", Expect::Full),
    ("bytes=-", Expect::Full),
    ("bytes=1-2-3", Expect::Full),
    ("bytes=0x1-5", Expect::Full),
];

fn check(response: &Response, expect: &Expect, data: &[u8], header: &str) {
    match expect {
        Expect::Full => {
            assert_eq!(response.status, 200, "{header}: {response:?}");
            assert!(!response.has_header("content-range"), "{header}");
            assert_eq!(response.body, data, "{header}");
        }
        Expect::Single(first, last) => {
            assert_eq!(response.status, 206, "{header}: {:?}", response.headers);
            let expected_range = format!("bytes {first}-{last}/{LEN}");
            assert_eq!(
                response.header("content-range"),
                Some(expected_range.as_str()),
                "{header}"
            );
            assert_eq!(
                response.body,
                &data[*first as usize..=*last as usize],
                "{header}"
            );
            assert_eq!(
                response.header("content-type"),
                Some("application/octet-stream"),
                "{header}"
            );
        }
        Expect::Multi(ranges) => {
            assert_eq!(response.status, 206, "{header}: {:?}", response.headers);
            assert!(
                !response.has_header("content-range"),
                "{header}: multipart has no top Content-Range"
            );
            let content_type = response.header("content-type").expect("Content-Type");
            assert!(
                content_type.starts_with("multipart/byteranges"),
                "{header}: {content_type}"
            );
            let boundary = boundary_of(content_type).expect("boundary");
            let mut parts = parse_multipart(&response.body, &boundary);
            parts.sort_by_key(|part| parse_content_range(&part.1).map(|range| range.0));
            assert_eq!(parts.len(), ranges.len(), "{header}");
            for ((part_type, part_range, bytes), (first, last)) in parts.iter().zip(ranges.iter()) {
                assert_eq!(
                    part_range,
                    &format!("bytes {first}-{last}/{LEN}"),
                    "{header}"
                );
                assert_eq!(
                    bytes.as_slice(),
                    &data[*first as usize..=*last as usize],
                    "{header}"
                );
                assert_eq!(
                    part_type.as_deref(),
                    Some("application/octet-stream"),
                    "{header}"
                );
            }
            assert_eq!(
                response.header("content-length"),
                Some(response.body.len().to_string().as_str()),
                "{header}"
            );
        }
        Expect::Unsatisfiable => {
            assert_eq!(response.status, 416, "{header}: {response:?}");
            let expected_range = format!("bytes */{LEN}");
            assert_eq!(
                response.header("content-range"),
                Some(expected_range.as_str()),
                "{header}"
            );
        }
    }
}

default_arch!(fn range_matrix(arch) {
    let data = pattern_bytes(LEN, 7);
    let root = TempRoot::new();
    root.file("data.bin", &data);
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    for (header, expect) in MATRIX {
        let response = conn.get("/data.bin", &[("Range", header)]);
        response.assert_common_headers();
        check(&response, expect, &data, header);
        // HEAD gives the same status and headers.
        conn.send(build_request("HEAD", "/data.bin", &[("Range", header)]));
        let head = conn.read_response("HEAD");
        assert_eq!(head.status, response.status, "HEAD {header}");
        if !matches!(expect, Expect::Multi(_)) {
            assert_eq!(head.headers_without_date(), response.headers_without_date(), "HEAD {header}");
        }
    }
});

default_arch!(fn hundred_ranges_served_hundred_one_ignored(arch) {
    let data = pattern_bytes(LEN, 11);
    let root = TempRoot::new();
    root.file("data.bin", &data);
    let server = Server::start(Options::new(root.path(), arch));
    let spec = |count: u64| -> String {
        let ranges: Vec<String> = (0..count).map(|index| format!("{}-{}", index * 3, index * 3)).collect();
        format!("bytes={}", ranges.join(","))
    };
    let hundred = spec(100);
    let response = request(server.addr(), "GET", "/data.bin", &[("Range", hundred.as_str())]);
    assert_eq!(response.status, 206);
    let boundary = boundary_of(response.header("content-type").unwrap()).unwrap();
    let parts = parse_multipart(&response.body, &boundary);
    assert_eq!(parts.len(), 100);
    for (index, (_, _, bytes)) in parts.iter().enumerate() {
        assert_eq!(bytes.as_slice(), &data[index * 3..=index * 3]);
    }
    let too_many = spec(101);
    let response = request(server.addr(), "GET", "/data.bin", &[("Range", too_many.as_str())]);
    assert_eq!(response.status, 200, "more than 100 ranges: header ignored");
    assert_eq!(response.body, data);
});

default_arch!(fn range_on_empty_file(arch) {
    let root = TempRoot::new();
    root.file("empty.txt", "");
    let server = Server::start(Options::new(root.path(), arch));
    let response = request(server.addr(), "GET", "/empty.txt", &[("Range", "bytes=0-0")]);
    assert_eq!(response.status, 416);
    assert_eq!(response.header("content-range"), Some("bytes */0"));
    let response = get(server.addr(), "/empty.txt");
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-length"), Some("0"));
});
