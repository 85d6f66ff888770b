//! Checks the harness itself (ready-line parsing, response splitting, multipart parsing) without
//! a server, so a harness bug is not mistaken for a server bug.

use crate::support;

use support::http::{boundary_of, parse_all, parse_multipart};

#[test]
fn pipelined_responses_split_exactly() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
    let responses = parse_all(wire, "GET");
    let statuses: Vec<u16> = responses.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![200, 304, 404]);
    assert_eq!(responses[0].body, b"abc");
}

#[test]
fn multipart_parts_are_extracted() {
    let body = b"\r\n--XYZ\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\nab\r\n--XYZ\r\nContent-Range: bytes 5-7/10\r\n\r\nfgh\r\n--XYZ--\r\n";
    let boundary = boundary_of("multipart/byteranges; boundary=XYZ").unwrap();
    let parts = parse_multipart(body, &boundary);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].1, "bytes 0-1/10");
    assert_eq!(parts[0].2, b"ab");
    assert_eq!(parts[1].2, b"fgh");
}
