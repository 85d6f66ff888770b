//! The FastCGI exchange, sans-I/O: the records ampd writes, and what it makes of an
//! application's.

use ampd_http::fastcgi::{
    self, EndRequest, Event, ProtocolStatus, RecordHeader, RecordReader, RecordType,
};

use std::io::ErrorKind;

use crate::conn::harness::Harness;
use crate::conn::upstream::LinkId;
use crate::conn::{Need, Release};

/// What ampd sent: `(type, request id, content)` per record.
fn records(mut bytes: &[u8]) -> Vec<(RecordType, u16, Vec<u8>)> {
    let mut records = Vec::new();
    while let Some(header) = RecordHeader::parse(bytes) {
        let start = fastcgi::HEADER_LEN;
        let end = start + usize::from(header.content_length);
        records.push((
            header.record_type,
            header.request_id,
            bytes[start..end].to_vec(),
        ));
        bytes = &bytes[end + usize::from(header.padding_length)..];
    }
    assert!(bytes.is_empty(), "whole records only");
    records
}

fn params(records: &[(RecordType, u16, Vec<u8>)]) -> Vec<(String, String)> {
    let content: Vec<u8> = records
        .iter()
        .filter(|(kind, ..)| *kind == RecordType::Params)
        .flat_map(|(_, _, content)| content.clone())
        .collect();
    fastcgi::decode_name_values(&content)
        .unwrap()
        .into_iter()
        .map(|(name, value)| {
            (
                String::from_utf8(name).unwrap(),
                String::from_utf8(value).unwrap(),
            )
        })
        .collect()
}

fn param<'p>(params: &'p [(String, String)], name: &str) -> Option<&'p str> {
    params
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

fn stdin(records: &[(RecordType, u16, Vec<u8>)]) -> (Vec<u8>, bool) {
    let stream: Vec<&Vec<u8>> = records
        .iter()
        .filter(|(kind, ..)| *kind == RecordType::Stdin)
        .map(|(_, _, content)| content)
        .collect();
    let ended = stream.last().is_some_and(|content| content.is_empty());
    (stream.into_iter().flatten().copied().collect(), ended)
}

/// An application's answer: standard output, then the end of the request.
fn answer(stdout: &[u8], status: ProtocolStatus) -> Vec<u8> {
    let mut out = Vec::new();
    fastcgi::write_stream(&mut out, RecordType::Stdout, 1, stdout);
    fastcgi::write_stream(&mut out, RecordType::Stdout, 1, &[]);
    fastcgi::write_end_request(
        &mut out,
        1,
        EndRequest {
            app_status: 0,
            protocol_status: status,
        },
    );
    out
}

#[test]
fn a_get_goes_out_as_records_with_its_meta_variables_and_the_answer_comes_back_chunked() {
    let mut harness = Harness::fastcgi(|_| {});
    let need = harness.feed(b"GET /shop/index.php/cart/1?q=a%20b HTTP/1.1\r\nHost: a.test\r\nProxy: http://evil\r\n\r\n");
    harness.connect(&need);
    let (sent, _) = harness.upstream_take();
    let sent = records(&sent);
    assert_eq!(sent[0].0, RecordType::BeginRequest);
    assert_eq!(
        sent[0].2,
        [0, 1, 0, 0, 0, 0, 0, 0],
        "responder, no FCGI_KEEP_CONN"
    );
    let params = params(&sent);
    assert_eq!(param(&params, "SCRIPT_NAME"), Some("/shop/index.php"));
    assert_eq!(param(&params, "PATH_INFO"), Some("/cart/1"));
    assert_eq!(
        param(&params, "SCRIPT_FILENAME"),
        Some("/srv/www/shop/index.php")
    );
    assert_eq!(param(&params, "QUERY_STRING"), Some("q=a%20b"));
    assert_eq!(param(&params, "REQUEST_METHOD"), Some("GET"));
    assert_eq!(param(&params, "HTTP_HOST"), Some("a.test"));
    assert_eq!(param(&params, "HTTP_PROXY"), None);
    assert_eq!(
        stdin(&sent),
        (Vec::new(), true),
        "an empty, ended FCGI_STDIN"
    );
    harness.upstream_reply(&answer(
        b"Status: 201 Created\r\nContent-Type: text/plain\r\nX-Powered-By: PHP\r\n\r\nhello",
        ProtocolStatus::RequestComplete,
    ));
    let raw = String::from_utf8(harness.take_raw()).unwrap();
    assert!(raw.starts_with("HTTP/1.1 201 Created\r\n"), "{raw}");
    assert!(raw.contains("\r\nTransfer-Encoding: chunked\r\n"), "{raw}");
    assert!(raw.contains("\r\nX-Powered-By: PHP\r\n"), "{raw}");
    assert!(raw.ends_with("\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), "{raw}");
    assert_eq!(harness.release(), Some(Release::Close));
}

#[test]
fn a_chunked_body_is_read_whole_so_that_content_length_is_known() {
    let mut harness = Harness::fastcgi(|_| {});
    let need = harness.feed(
        b"POST /form.php HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n5\r\nhello\r\n",
    );
    assert!(
        matches!(need, crate::conn::Need::Read),
        "nothing goes out before the body is whole: {need:?}"
    );
    let need = harness.feed(b"6\r\n world\r\n0\r\n\r\n");
    harness.connect(&need);
    let (sent, _) = harness.upstream_take();
    let sent = records(&sent);
    let params = params(&sent);
    assert_eq!(param(&params, "CONTENT_LENGTH"), Some("11"));
    assert_eq!(param(&params, "CONTENT_TYPE"), Some("text/plain"));
    assert_eq!(stdin(&sent), (b"hello world".to_vec(), true));
    harness.upstream_reply(&answer(
        b"Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
        ProtocolStatus::RequestComplete,
    ));
    let responses = harness.take();
    assert_eq!(
        (responses[0].status, &responses[0].body[..]),
        (200, &b"ok"[..])
    );
}

#[test]
fn a_kept_connection_is_pooled_only_after_the_end_of_the_request() {
    let mut harness = Harness::fastcgi(|config| config.upstreams[0].keepalive = 4);
    let need = harness.feed(b"GET /a.php HTTP/1.1\r\nHost: a\r\n\r\n");
    harness.connect(&need);
    let (sent, _) = harness.upstream_take();
    assert_eq!(records(&sent)[0].2[2], 1, "FCGI_KEEP_CONN");
    let reply = answer(
        b"Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
        ProtocolStatus::RequestComplete,
    );
    // Everything but the end of the request: the body is complete, the connection not free.
    let (body, end) = reply.split_at(reply.len() - 16);
    harness.upstream_reply(body);
    assert_eq!(harness.release(), None);
    harness.upstream_reply(end);
    assert_eq!(harness.statuses(), vec![200]);
    assert!(matches!(harness.release(), Some(Release::Keep { .. })));
}

#[test]
fn an_overloaded_application_is_a_503_and_a_broken_answer_a_502() {
    let mut harness = Harness::fastcgi(|_| {});
    let need = harness.feed(b"GET /a.php HTTP/1.1\r\nHost: a\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    harness.upstream_reply(&answer(b"", ProtocolStatus::Overloaded));
    let responses = harness.take();
    assert_eq!(responses[0].status, 503);
    assert_eq!(
        responses[0].header("retry-after"),
        Some("1"),
        "a passing overload (RFC 9110 §15.6.4)"
    );

    for broken in [
        &b"Content-Type: text/plain\r\nX-Bad: a\rb\r\n\r\nbody"[..],
        b"Status: 2000\r\n\r\n",
        b"Content-Type: text/plain\r\nX-Nul: \0\r\n\r\n",
        b"Content-Type: text/plain\r\n",
    ] {
        let mut harness = Harness::fastcgi(|_| {});
        let need = harness.feed(b"GET /a.php HTTP/1.1\r\nHost: a\r\n\r\n");
        harness.connect(&need);
        harness.upstream_take();
        harness.upstream_reply(&answer(broken, ProtocolStatus::RequestComplete));
        assert_eq!(
            harness.statuses(),
            vec![502],
            "{}",
            String::from_utf8_lossy(broken)
        );
    }
}

#[test]
fn an_application_that_dies_before_answering_is_a_502_and_after_its_head_a_cut_response() {
    let mut harness = Harness::fastcgi(|_| {});
    let need = harness.feed(b"POST /a.php HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi");
    harness.connect(&need);
    harness.upstream_take();
    harness.upstream_close();
    assert_eq!(harness.statuses(), vec![502]);

    let mut harness = Harness::fastcgi(|_| {});
    let need = harness.feed(b"GET /a.php HTTP/1.1\r\nHost: a\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    let mut stdout = Vec::new();
    fastcgi::write_stream(
        &mut stdout,
        RecordType::Stdout,
        1,
        b"Content-Type: text/plain\r\n\r\npart",
    );
    harness.upstream_reply(&stdout);
    harness.upstream_close();
    let raw = String::from_utf8(harness.take_raw()).unwrap();
    assert!(raw.starts_with("HTTP/1.1 200 OK\r\n"), "{raw}");
    assert!(raw.ends_with("4\r\npart\r\n"), "no last chunk: {raw}");
}

/// An application killed after writing its head with the request not all read resets the
/// connection, and the reset often comes in the same wake-up as the bytes before it: they are
/// used first, so the head reaches the client and the response is cut short (the client sees
/// the close), instead of a `502` on a connection kept open.
#[test]
fn a_reset_read_with_the_head_before_it_cuts_the_response_short() {
    let mut harness = Harness::fastcgi(|_| {});
    let need = harness.feed(b"GET /a.php HTTP/1.1\r\nHost: a\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    let mut stdout = Vec::new();
    fastcgi::write_stream(
        &mut stdout,
        RecordType::Stdout,
        1,
        b"Content-Type: text/plain\r\nContent-Length: 1000\r\n\r\npartial\n",
    );
    harness.conn.upstream_receive(LinkId::FIRST, &stdout);
    let need = harness.upstream_fail(ErrorKind::ConnectionReset);
    assert!(matches!(need, Need::Close(_)), "{need:?}");
    let raw = String::from_utf8(harness.take_raw()).unwrap();
    assert!(raw.starts_with("HTTP/1.1 200 OK\r\n"), "{raw}");
    assert!(raw.ends_with("\r\n\r\npartial\n"), "{raw}");
    assert_eq!(harness.release(), Some(Release::Close));

    // Only part of a head before the reset: nothing went to the client, so a `502`.
    let mut harness = Harness::fastcgi(|_| {});
    let need = harness.feed(b"GET /a.php HTTP/1.1\r\nHost: a\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    let mut stdout = Vec::new();
    fastcgi::write_stream(&mut stdout, RecordType::Stdout, 1, b"Content-Type: te");
    harness.conn.upstream_receive(LinkId::FIRST, &stdout);
    harness.upstream_fail(ErrorKind::ConnectionReset);
    assert_eq!(harness.statuses(), vec![502]);
}

#[test]
fn a_local_location_is_served_inside_and_an_absolute_one_is_a_302() {
    let mut harness = Harness::fastcgi(|_| {});
    let need = harness.feed(b"GET /a.php HTTP/1.1\r\nHost: a\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    let need = harness.upstream_reply(&answer(
        b"Location: /b.php?x=1\r\n\r\n",
        ProtocolStatus::RequestComplete,
    ));
    // Routed again: the `.php` location asks the application for /b.php.
    harness.connect(&need);
    let (sent, _) = harness.upstream_take();
    let params = params(&records(&sent));
    assert_eq!(param(&params, "SCRIPT_NAME"), Some("/b.php"));
    assert_eq!(param(&params, "QUERY_STRING"), Some("x=1"));
    harness.upstream_reply(&answer(
        b"Location: http://example.com/\r\n\r\n",
        ProtocolStatus::RequestComplete,
    ));
    let raw = String::from_utf8(harness.take_raw()).unwrap();
    assert!(raw.starts_with("HTTP/1.1 302 Found\r\n"), "{raw}");
    assert!(
        raw.contains("\r\nLocation: http://example.com/\r\n"),
        "{raw}"
    );
}

#[test]
fn the_records_read_back_as_written() {
    // The reader the harness's applications are checked with reads what ampd's tests write.
    let reply = answer(b"x", ProtocolStatus::RequestComplete);
    let mut reader = RecordReader::new(1);
    let (event, _) = reader.next(&reply).unwrap();
    assert_eq!(event, Some(Event::Stdout(b"x")));
}

#[test]
fn a_request_over_tls_tells_the_application_so() {
    let mut harness = Harness::fastcgi(|_| {});
    harness
        .conn
        .set_listener("127.0.0.1:8443".parse().unwrap(), true);
    harness.conn.set_tls(crate::tls::TlsInfo {
        protocol: "TLSv1.2",
        cipher: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        server_name: Some("a.test".into()),
        alpn: None,
        resumed: true,
        client: None,
    });
    let need = harness.feed(b"GET /index.php HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    let params = params(&records(&harness.upstream_take().0));
    for (name, value) in [
        ("HTTPS", "on"),
        ("REQUEST_SCHEME", "https"),
        ("SERVER_PORT", "8443"),
        ("SSL_PROTOCOL", "TLSv1.2"),
        ("SSL_CIPHER", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
        ("SSL_TLS_SNI", "a.test"),
        ("SSL_SESSION_RESUMED", "Resumed"),
        ("SSL_CLIENT_VERIFY", "NONE"),
    ] {
        assert_eq!(param(&params, name), Some(value), "{name}");
    }
    assert_eq!(param(&params, "SSL_CLIENT_S_DN"), None);
}

/// Issue 35, item 25: an absolute-form target's authority replaces `Host` (RFC 9112 §3.2.2):
/// the program's `HTTP_HOST` is the host ampd routed by, as `SERVER_NAME` is.
#[test]
fn an_absolute_form_target_s_authority_is_the_programs_http_host() {
    let mut harness = Harness::fastcgi(|_| {});
    let need = harness.feed(b"GET http://b.test:8080/index.php HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    let params = params(&records(&harness.upstream_take().0));
    assert_eq!(param(&params, "SERVER_NAME"), Some("b.test"));
    assert_eq!(param(&params, "HTTP_HOST"), Some("b.test:8080"));
    assert_eq!(param(&params, "REQUEST_URI"), Some("/index.php"));
}

/// Issue 35, items 20 and 21: a program's `X-Sendfile` where the location has no
/// `x_sendfile_root` stays behind; a `204` loses its `Content-Length`; a 1xx `Status` cannot be
/// a final response (the client would wait for another), so it is an invalid answer.
#[test]
fn a_programs_fields_are_cleaned_like_an_upstreams() {
    let answered = |stdout: &[u8]| {
        let mut harness = Harness::fastcgi(|_| {});
        let need = harness.feed(b"GET /a.php HTTP/1.1\r\nHost: a\r\n\r\n");
        harness.connect(&need);
        harness.upstream_take();
        harness.upstream_reply(&answer(stdout, ProtocolStatus::RequestComplete));
        String::from_utf8(harness.take_raw()).unwrap()
    };
    let raw = answered(b"Content-Type: text/plain\r\nX-Sendfile: /etc/passwd\r\n\r\nbody");
    assert!(raw.starts_with("HTTP/1.1 200 "), "{raw}");
    assert!(!raw.to_ascii_lowercase().contains("x-sendfile"), "{raw}");
    assert!(!raw.contains("/etc/passwd"), "{raw}");

    let raw = answered(b"Status: 204 No Content\r\nContent-Length: 3\r\n\r\n");
    assert!(raw.starts_with("HTTP/1.1 204 "), "{raw}");
    assert!(
        !raw.to_ascii_lowercase().contains("content-length"),
        "{raw}"
    );

    let raw = answered(b"Status: 103 Early Hints\r\nContent-Length: 3\r\n\r\nabc");
    assert!(raw.starts_with("HTTP/1.1 502 "), "{raw}");
}

/// Issue 35, item 6: with `fastcgi_check_script` a script is looked up below the root (through
/// the path cache, by a translation job) before the application hears of it: a missing one,
/// and an upload with a `.php` segment after it (`cgi.fix_pathinfo` would walk back to the
/// upload), are answered `404` by ampd, with no connection to the application.
#[test]
fn a_missing_script_is_a_404_without_asking_the_application() {
    let dir = std::env::temp_dir().join(format!("ampd-script-check-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("up")).unwrap();
    std::fs::write(dir.join("x.php"), "<?php echo 1;").unwrap();
    std::fs::write(dir.join("up/x.jpg"), "<?php echo 'ran';").unwrap();
    let root = dir.clone();
    let mut harness = Harness::fastcgi(move |config| {
        config.serve_location().static_files.root = root;
        crate::conn::harness::fastcgi_settings(config).check_script = Some(true);
    });
    for _ in 0..2 {
        // The second time from the path cache.
        for path in ["/missing.php", "/up/x.jpg/a.php", "/up/missing.php/x"] {
            let need = harness.feed(format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes());
            assert!(
                !matches!(need, crate::conn::Need::Connect(..)),
                "{path}: {need:?}"
            );
            assert_eq!(harness.statuses(), vec![404], "{path}");
        }
        let need = harness.feed(b"GET /x.php/a/b HTTP/1.1\r\nHost: a\r\n\r\n");
        harness.connect(&need);
        let params = params(&records(&harness.upstream_take().0));
        assert_eq!(param(&params, "SCRIPT_NAME"), Some("/x.php"));
        harness.upstream_reply(&answer(
            b"Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
            ProtocolStatus::RequestComplete,
        ));
        assert_eq!(harness.statuses(), vec![200]);
        assert_eq!(harness.release(), Some(Release::Close));
    }
    // A body the missing script would have had: answered, and the connection ends.
    let need = harness.feed(b"POST /missing.php HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n");
    assert!(matches!(need, crate::conn::Need::Close(_)), "{need:?}");
    assert_eq!(harness.statuses(), vec![404]);
    std::fs::remove_dir_all(&dir).unwrap();
}
