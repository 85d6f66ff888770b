//! The proxy exchange through the sans-I/O harness, the test playing the upstream: what goes
//! upstream byte for byte, what the client gets, retries, errors and the pooling decision.

use std::io::ErrorKind;

use crate::conn::harness::Harness;
use crate::conn::upstream::{LinkId, Release};
use crate::conn::{Ending, Need};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn find(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

#[test]
fn a_get_goes_upstream_re_serialised_and_its_answer_comes_back() {
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(
        b"GET /app/x?q=1 HTTP/1.1\r\nHost: a.test\r\nConnection: keep-alive, x-drop\r\nX-Drop: 1\r\nKeep-Alive: 5\r\nAccept: */*\r\n\r\n",
    );
    let connect = harness.connect(&need);
    assert_eq!(connect.address.to_string(), "127.0.0.1:9001");
    assert!(connect.reuse);
    let (sent, need) = harness.upstream_take();
    let sent = text(&sent);
    assert!(
        sent.starts_with("GET /app/x?q=1 HTTP/1.1\r\nHost: a.test\r\n"),
        "{sent}"
    );
    assert!(
        sent.contains("Accept: */*\r\n") || sent.contains("accept: */*\r\n"),
        "{sent}"
    );
    assert!(sent.contains("X-Forwarded-For: 127.0.0.1\r\n"), "{sent}");
    for dropped in ["X-Drop", "x-drop:", "Keep-Alive"] {
        assert!(!sent.contains(dropped), "{dropped} forwarded: {sent}");
    }
    assert!(matches!(need, Need::Read), "{need:?}");
    assert!(harness.conn.upstream_wants_input(LinkId::FIRST));
    let need = harness.upstream_reply(
        b"HTTP/1.1 200 OK\r\nServer: app\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
    );
    assert!(matches!(need, Need::Read), "{need:?}");
    let responses = harness.take();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].status, 200);
    assert_eq!(responses[0].body, b"hello");
    assert_eq!(responses[0].header("server"), Some("ampd"));
    assert_eq!(responses[0].header("content-type"), Some("text/plain"));
    assert!(matches!(harness.release(), Some(Release::Keep { .. })));
    assert!(!harness.conn.has_upstream());
}

#[test]
fn a_chunked_response_is_re_chunked_and_a_close_delimited_one_too() {
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    harness.upstream_reply(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    harness.upstream_reply(b"0\r\n\r\n");
    let raw = text(&harness.take_raw());
    assert!(raw.contains("Transfer-Encoding: chunked\r\n"), "{raw}");
    assert!(raw.ends_with("\r\n\r\n3\r\nabc\r\n0\r\n\r\n"), "{raw}");
    assert!(matches!(harness.release(), Some(Release::Keep { .. })));

    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    harness.upstream_reply(b"HTTP/1.0 200 OK\r\n\r\nuntil the end");
    let need = harness.upstream_close();
    assert!(matches!(need, Need::Read), "{need:?}");
    let raw = text(&harness.take_raw());
    assert!(raw.ends_with("d\r\nuntil the end\r\n0\r\n\r\n"), "{raw}");
    assert_eq!(harness.release(), Some(Release::Close));
}

#[test]
fn an_http10_client_gets_a_body_without_length_ended_by_the_close() {
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(b"GET / HTTP/1.0\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    harness.upstream_reply(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
    let need = harness.upstream_reply(b"0\r\n\r\n");
    assert!(
        matches!(need, Need::Close(_)),
        "the client's connection ends the body: {need:?}"
    );
    let raw = text(&harness.take_raw());
    assert!(raw.contains("Connection: close\r\n"), "{raw}");
    assert!(!raw.contains("chunked"), "{raw}");
    assert!(raw.ends_with("\r\n\r\nabc"), "{raw}");
}

#[test]
fn request_bodies_stream_with_one_framing() {
    // Content-Length in, Content-Length out.
    let mut harness = Harness::proxying(1, |_| {});
    let need =
        harness.feed(b"POST /in HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n\r\n01234");
    harness.connect(&need);
    let (sent, _) = harness.upstream_take();
    harness.feed(b"56789");
    let (rest, _) = harness.upstream_take();
    let sent = text(&[sent, rest].concat());
    assert!(sent.starts_with("POST /in HTTP/1.1\r\n"), "{sent}");
    assert!(sent.contains("Content-Length: 10\r\n"), "{sent}");
    assert!(
        !sent.to_ascii_lowercase().contains("transfer-encoding"),
        "{sent}"
    );
    assert!(sent.ends_with("\r\n\r\n0123456789"), "{sent}");

    // Chunked in, chunked out, whatever the cuts.
    for bytewise in [false, true] {
        let mut harness = Harness::proxying(1, |_| {});
        let need =
            harness.feed(b"PUT /in HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n");
        harness.connect(&need);
        let (mut sent, _) = harness.upstream_take();
        harness.feed_split(b"4\r\nabcd\r\n2\r\nef\r\n0\r\n\r\n", bytewise);
        sent.extend(harness.upstream_take().0);
        let sent = text(&sent);
        assert!(sent.contains("Transfer-Encoding: chunked\r\n"), "{sent}");
        assert!(!sent.contains("Content-Length"), "{sent}");
        let body = &sent[sent.find("\r\n\r\n").unwrap() + 4..];
        // The chunks may be cut differently; the data and the end are the same.
        assert!(body.ends_with("0\r\n\r\n"), "{body:?}");
        let data: String = body
            .split("\r\n")
            .enumerate()
            .filter(|(index, _)| index % 2 == 1)
            .map(|(_, part)| part)
            .collect();
        assert_eq!(data, "abcdef", "bytewise {bytewise}: {body:?}");
    }
}

#[test]
fn expect_continue_is_answered_by_ampd_before_the_body_and_the_upstreams_100_is_not_passed_on() {
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(
        b"POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
    );
    assert_eq!(harness.statuses(), vec![100]);
    harness.connect(&need);
    let (sent, _) = harness.upstream_take();
    assert!(
        !text(&sent).to_ascii_lowercase().contains("expect"),
        "{}",
        text(&sent)
    );
    harness.feed(b"ok");
    harness.upstream_take();
    harness.upstream_reply(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(harness.statuses(), vec![201]);
}

#[test]
fn a_refused_connection_is_retried_on_the_next_server_for_a_get_but_not_for_a_post() {
    let mut harness = Harness::proxying(2, |_| {});
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    let first = harness.connect(&need);
    let need = harness.upstream_fail(ErrorKind::ConnectionRefused);
    assert_eq!(harness.release(), Some(Release::Close));
    let second = harness.connect(&need);
    assert_ne!(first.address, second.address);
    harness.upstream_take();
    harness.upstream_reply(b"HTTP/1.1 204 No Content\r\n\r\n");
    assert_eq!(harness.statuses(), vec![204]);

    let mut harness = Harness::proxying(2, |_| {});
    let need = harness.feed(b"POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n\r\nx");
    harness.connect(&need);
    harness.upstream_fail(ErrorKind::ConnectionRefused);
    assert_eq!(harness.statuses(), vec![502]);
}

#[test]
fn no_socket_at_all_is_a_502_and_a_timeout_a_504() {
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert!(matches!(need, Need::Connect(LinkId::FIRST, _)));
    // The engine could not even make a socket (descriptors exhausted).
    harness
        .conn
        .upstream_failed(LinkId::FIRST, &std::io::Error::from(ErrorKind::OutOfMemory));
    harness.run();
    assert_eq!(harness.statuses(), vec![502]);
    assert_eq!(harness.release(), None);

    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    assert!(harness.conn.upstream_deadline().is_some());
    harness.upstream_time_out();
    assert_eq!(harness.statuses(), vec![504]);
    assert_eq!(harness.release(), Some(Release::Close));
}

#[test]
fn an_invalid_response_is_a_502_never_passed_on() {
    for response in [
        &b"HTTP/1.1 2000 OK\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nX-Bad: a\0b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
        b"garbage\r\n\r\n",
    ] {
        let mut harness = Harness::proxying(1, |_| {});
        let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
        harness.connect(&need);
        harness.upstream_take();
        harness.upstream_reply(response);
        assert_eq!(harness.statuses(), vec![502], "{}", text(response));
        assert_eq!(harness.release(), Some(Release::Close));
    }
}

#[test]
fn an_upstream_that_closes_mid_body_ends_the_clients_connection() {
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    harness.upstream_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf");
    let need = harness.upstream_close();
    assert_eq!(
        match need {
            Need::Close(ending) => Some(ending),
            _ => None,
        },
        Some(Ending::Close)
    );
    let raw = harness.take_raw();
    assert!(raw.ends_with(b"\r\n\r\nhalf"), "{}", text(&raw));
    assert_eq!(harness.release(), Some(Release::Close));
}

#[test]
fn a_slow_client_stops_the_reading_of_the_upstream() {
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    harness.conn.upstream_receive(
        LinkId::FIRST,
        b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n",
    );
    let chunk = vec![b'x'; 32 << 10];
    // Nothing is sent to the client here: the connection's output fills up.
    let mut fed = 0;
    while harness.conn.upstream_wants_input(LinkId::FIRST) && fed < 1_000_000 {
        harness.conn.upstream_receive(LinkId::FIRST, &chunk);
        harness.feed_unread(b"");
        fed += chunk.len();
    }
    assert!(!harness.conn.upstream_wants_input(LinkId::FIRST));
    assert!(
        fed < 512 << 10,
        "read {fed} bytes past a client that reads nothing"
    );
}

#[test]
fn a_post_to_a_static_location_is_still_405_while_a_proxy_location_passes_it() {
    let mut harness = Harness::new(|_| {});
    harness.feed(b"POST /index.html HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n\r\nx");
    assert_eq!(harness.statuses(), vec![405]);

    let mut harness = Harness::proxying(1, |_| {});
    for method in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PROPFIND"] {
        let need = harness.feed(format!("{method} / HTTP/1.1\r\nHost: a.test\r\n\r\n").as_bytes());
        harness.connect(&need);
        let (sent, _) = harness.upstream_take();
        assert!(find(&sent, format!("{method} / HTTP/1.1\r\n").as_bytes()));
        harness.upstream_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(harness.statuses(), vec![200], "{method}");
        harness.release();
    }
    harness.feed(b"TRACE / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert_eq!(harness.statuses(), vec![405]);
}

#[test]
fn an_untrusted_forwarded_for_chain_is_replaced_and_a_trusted_one_appended_to() {
    let request = b"GET / HTTP/1.1\r\nHost: a.test\r\nX-Forwarded-For: 10.9.9.9\r\n\r\n";
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(request);
    harness.connect(&need);
    let sent = text(&harness.upstream_take().0);
    assert!(sent.contains("X-Forwarded-For: 127.0.0.1\r\n"), "{sent}");
    assert!(!sent.contains("10.9.9.9"), "{sent}");

    let mut harness = Harness::proxying(1, |config| {
        let proxy = crate::conn::harness::proxy_settings(config);
        proxy.forwarded_trust = vec![crate::config::AddressRange {
            network: std::net::IpAddr::from([127, 0, 0, 0]),
            prefix: 8,
        }];
    });
    let need = harness.feed(request);
    harness.connect(&need);
    let sent = text(&harness.upstream_take().0);
    assert!(
        sent.contains("X-Forwarded-For: 10.9.9.9, 127.0.0.1\r\n"),
        "{sent}"
    );
}

#[test]
fn a_request_over_tls_goes_upstream_as_https() {
    let request = b"GET / HTTP/1.1\r\nHost: a.test\r\nX-Forwarded-Proto: gopher\r\n\r\n";
    let mut harness = Harness::proxying(1, |_| {});
    harness
        .conn
        .set_listener("127.0.0.1:8443".parse().unwrap(), true);
    harness.conn.set_tls(crate::tls::TlsInfo {
        protocol: "TLSv1.3",
        cipher: "TLS13_AES_128_GCM_SHA256",
        ..crate::tls::TlsInfo::default()
    });
    let need = harness.feed(request);
    harness.connect(&need);
    let sent = text(&harness.upstream_take().0);
    assert!(sent.contains("X-Forwarded-Proto: https\r\n"), "{sent}");
    assert!(
        sent.contains("Forwarded: for=127.0.0.1;proto=https;host=a.test\r\n"),
        "{sent}"
    );
    assert!(!sent.contains("gopher"), "{sent}");

    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(request);
    harness.connect(&need);
    let sent = text(&harness.upstream_take().0);
    assert!(sent.contains("X-Forwarded-Proto: http\r\n"), "{sent}");
}

#[test]
fn a_client_that_closes_while_the_upstream_thinks_abandons_the_exchange() {
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(b"GET /slow HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    // The client is read while the response is awaited, so that its going is noticed.
    assert!(harness.conn.wants_input());
    let need = harness.finish();
    assert!(matches!(need, Need::Close(_)), "{need:?}");
    assert_eq!(harness.release(), Some(Release::Close));
    assert!(harness.take_raw().is_empty(), "nothing is answered");

    // A client that pipelined its next request before closing its side still gets both.
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness
        .feed(b"GET /a HTTP/1.1\r\nHost: a.test\r\n\r\nGET /b HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    harness.finish();
    assert!(harness.release().is_none(), "the exchange goes on");
    harness.upstream_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
    assert_eq!(harness.statuses(), vec![200]);
}

/// Issue 35, item 16: a field whose name has `_` would pass, in a WSGI or CGI-like upstream, for
/// the `-` field it aliases (`X_Forwarded_For` reads as `HTTP_X_FORWARDED_FOR`); and the
/// forwarding fields ampd does not remake (`X-Real-IP`, `X-Forwarded-Port`,
/// `X-Forwarded-Prefix`) are a client's claims as much as `X-Forwarded-For` is.
#[test]
fn underscored_names_and_untrusted_forwarding_claims_stay_behind() {
    let request = b"GET / HTTP/1.1\r\nHost: a.test\r\nX_Forwarded_For: 6.6.6.6\r\nX_Custom: 1\r\n\
        X-Real-IP: 6.6.6.6\r\nX-Forwarded-Port: 1\r\nX-Forwarded-Prefix: /evil\r\nX-Kept: yes\r\n\r\n";
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(request);
    harness.connect(&need);
    let sent = text(&harness.upstream_take().0);
    assert!(sent.contains("X-Kept: yes\r\n"), "{sent}");
    assert!(sent.contains("X-Forwarded-For: 127.0.0.1\r\n"), "{sent}");
    for dropped in [
        "X_Forwarded_For",
        "X_Custom",
        "X-Real-IP",
        "X-Forwarded-Port",
        "X-Forwarded-Prefix",
        "6.6.6.6",
    ] {
        assert!(!sent.contains(dropped), "{dropped} forwarded: {sent}");
    }

    // From a trusted proxy, its view of the client is passed on.
    let mut harness = Harness::proxying(1, |config| {
        let proxy = crate::conn::harness::proxy_settings(config);
        proxy.forwarded_trust = vec![crate::config::AddressRange {
            network: std::net::IpAddr::from([127, 0, 0, 0]),
            prefix: 8,
        }];
    });
    let need = harness.feed(request);
    harness.connect(&need);
    let sent = text(&harness.upstream_take().0);
    for kept in [
        "X-Real-IP: 6.6.6.6\r\n",
        "X-Forwarded-Port: 1\r\n",
        "X-Forwarded-Prefix: /evil\r\n",
    ] {
        assert!(sent.contains(kept), "{kept} dropped: {sent}");
    }
    assert!(!sent.contains("X_"), "{sent}");
}

/// Issue 35, item 20: where the location does not act on them, an upstream's `X-Sendfile` (a
/// path on the server's disk) and `X-Accel-*` instructions never reach the client.
#[test]
fn x_sendfile_and_x_accel_fields_never_reach_the_client() {
    let mut harness = Harness::proxying(1, |config| {
        crate::conn::harness::proxy_settings(config).x_accel_redirect = false;
    });
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    harness.upstream_reply(
        b"HTTP/1.1 200 OK\r\nX-Sendfile: /etc/passwd\r\nX-Sendfile2: /etc/shadow 0-\r\n\
          X-Lighttpd-Send-File: /etc/group\r\nX-Accel-Redirect: /internal\r\n\
          X-Accel-Buffering: no\r\nX-Kept: 1\r\nContent-Length: 2\r\n\r\nok",
    );
    let raw = text(&harness.take_raw());
    assert!(raw.contains("X-Kept: 1\r\n"), "{raw}");
    let lower = raw.to_ascii_lowercase();
    for name in ["x-sendfile", "x-lighttpd-send-file", "x-accel-", "/etc/"] {
        assert!(!lower.contains(name), "{name} reached the client: {raw}");
    }
}

/// Issue 35, item 21: RFC 9110 §8.6 forbids `Content-Length` on a 204 (and a 1xx); a 304 may
/// carry one only in answer to a conditional GET or HEAD, where it is the length of the
/// representation the client holds.
#[test]
fn a_204_loses_its_framing_and_a_304_keeps_its_length_only_for_a_conditional_request() {
    let exchange = |request: &[u8], reply: &[u8]| {
        let mut harness = Harness::proxying(1, |_| {});
        let need = harness.feed(request);
        harness.connect(&need);
        harness.upstream_take();
        harness.upstream_reply(reply);
        text(&harness.take_raw())
    };
    let get = b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
    let raw = exchange(
        get,
        b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nX-Kept: 1\r\n\r\n",
    );
    assert!(raw.starts_with("HTTP/1.1 204 "), "{raw}");
    assert!(raw.contains("X-Kept: 1\r\n"), "{raw}");
    assert!(
        !raw.to_ascii_lowercase().contains("content-length"),
        "{raw}"
    );
    assert!(
        !raw.to_ascii_lowercase().contains("transfer-encoding"),
        "{raw}"
    );

    let not_modified = b"HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\nContent-Length: 5\r\n\r\n";
    let raw = exchange(get, not_modified);
    assert!(raw.starts_with("HTTP/1.1 304 "), "{raw}");
    assert!(
        !raw.contains("Content-Length"),
        "a 304 to an unconditional GET: {raw}"
    );
    let raw = exchange(
        b"GET / HTTP/1.1\r\nHost: a.test\r\nIf-None-Match: \"a\"\r\n\r\n",
        not_modified,
    );
    assert!(raw.contains("Content-Length: 5\r\n"), "{raw}");
}

/// Issue 35, item 19: no descriptor left for the upstream socket is the server's passing
/// state, not the upstream's fault: `503` with `Retry-After`, and no other server is tried
/// (it would fail the same way) nor blamed.
#[test]
fn no_descriptor_for_the_upstream_socket_is_a_503_with_retry_after() {
    let mut harness = Harness::proxying(2, |_| {});
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert!(matches!(need, Need::Connect(..)));
    harness.conn.upstream_failed(
        LinkId::FIRST,
        &std::io::Error::from_raw_os_error(ampd_sys::errno::EMFILE),
    );
    let need = harness.run();
    assert!(!matches!(need, Need::Connect(..)), "another server tried");
    let responses = harness.take();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].status, 503);
    assert!(
        responses[0].header("retry-after").is_some(),
        "{responses:?}"
    );
}

/// Issue 35, item 18: interim responses neither extend `read_timeout` (it runs from the end
/// of the request to the final head) nor go on for ever (past a cap, the response is invalid).
#[test]
fn interim_responses_neither_extend_the_read_timeout_nor_go_on_for_ever() {
    let mut harness = Harness::proxying(1, |_| {});
    let need = harness.feed(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
    harness.connect(&need);
    harness.upstream_take();
    let deadline = harness
        .conn
        .upstream_deadline()
        .expect("the head is awaited");
    let later = std::time::Instant::now() + std::time::Duration::from_millis(2);
    while std::time::Instant::now() < later {
        std::hint::spin_loop();
    }
    harness.upstream_reply(b"HTTP/1.1 102 Processing\r\n\r\n");
    assert_eq!(
        harness.conn.upstream_deadline(),
        Some(deadline),
        "an interim response moved the deadline"
    );
    let mut interim = 1;
    while harness.release().is_none() && interim < 10_000 {
        harness.upstream_reply(b"HTTP/1.1 102 Processing\r\n\r\n");
        interim += 1;
    }
    assert!(interim < 10_000, "interim responses are not capped");
    assert_eq!(harness.statuses(), vec![502]);
}
