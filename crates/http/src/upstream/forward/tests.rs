//! Tests of the upstream request writer: exact bytes, the trust rule, framing, tunnels,
//! unsafe input, and a property that whatever the client sent, the upstream reads exactly one
//! request framed as ampd says.

use std::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;

use super::*;
use crate::request::{HeadParser, Limits, Parse, RequestHead};

fn fields(pairs: &[(&str, &str)]) -> Vec<Header> {
    pairs
        .iter()
        .map(|(name, value)| Header {
            name: (*name).into(),
            value: value.as_bytes().into(),
        })
        .collect()
}

fn request<'a>(method: &'a Method, headers: &'a [Header]) -> ForwardRequest<'a> {
    ForwardRequest {
        method,
        target: "/v1/items?x=1",
        host: "app.internal:9001",
        client_headers: headers,
        body: ForwardBody::None,
        client: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)),
        proto: "http",
        client_host: Some("example.com"),
        trust_incoming: false,
        upgrade: None,
        underscores: false,
        keep_alive: true,
    }
}

fn written(request: &ForwardRequest<'_>) -> String {
    let mut out = Vec::new();
    write_request(request, &mut out);
    String::from_utf8(out).expect("ASCII head")
}

/// The fields a client may send that must not reach the upstream as sent.
fn a_busy_client() -> Vec<Header> {
    fields(&[
        ("Host", "example.com"),
        ("User-Agent", "curl/8"),
        ("Connection", "keep-alive, X-Remove"),
        ("X-Remove", "1"),
        ("Keep-Alive", "300"),
        ("TE", "trailers"),
        ("Upgrade", "websocket"),
        ("Proxy-Authorization", "Basic eDp5"),
        ("Proxy-Connection", "keep-alive"),
        ("HTTP2-Settings", "AAMAAABkAAQAAP__"),
        ("Trailer", "X-Sum"),
        ("Expect", "100-continue"),
        ("Content-Length", "5"),
        ("Transfer-Encoding", "chunked"),
        ("X-Forwarded-For", "6.6.6.6, 7.7.7.7"),
        ("Forwarded", "for=6.6.6.6"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "front.example"),
        ("Accept", "*/*"),
        ("Cookie", "a=b"),
    ])
}

#[test]
fn an_untrusted_client_gets_a_clean_head() {
    let headers = a_busy_client();
    let mut forward = request(&Method::Post, &headers);
    forward.body = ForwardBody::Length(5);
    assert_eq!(
        written(&forward),
        "POST /v1/items?x=1 HTTP/1.1\r\n\
         Host: app.internal:9001\r\n\
         User-Agent: curl/8\r\n\
         Accept: */*\r\n\
         Cookie: a=b\r\n\
         X-Forwarded-For: 192.0.2.7\r\n\
         X-Forwarded-Proto: http\r\n\
         X-Forwarded-Host: example.com\r\n\
         Forwarded: for=192.0.2.7;proto=http;host=example.com\r\n\
         Content-Length: 5\r\n\
         Connection: keep-alive\r\n\
         \r\n"
    );
}

#[test]
fn a_trusted_proxy_chain_is_appended_to() {
    let headers = a_busy_client();
    let mut forward = request(&Method::Get, &headers);
    forward.trust_incoming = true;
    forward.keep_alive = false;
    forward.client_host = Some("example.com:8080");
    assert_eq!(
        written(&forward),
        "GET /v1/items?x=1 HTTP/1.1\r\n\
         Host: app.internal:9001\r\n\
         User-Agent: curl/8\r\n\
         Accept: */*\r\n\
         Cookie: a=b\r\n\
         X-Forwarded-For: 6.6.6.6, 7.7.7.7, 192.0.2.7\r\n\
         X-Forwarded-Proto: https\r\n\
         X-Forwarded-Host: front.example\r\n\
         Forwarded: for=6.6.6.6, for=192.0.2.7;proto=http;host=\"example.com:8080\"\r\n\
         Connection: close\r\n\
         \r\n"
    );
}

#[test]
fn a_trusted_chain_spread_over_lines_keeps_its_order() {
    let headers = fields(&[
        ("X-Forwarded-For", "1.1.1.1"),
        ("x-forwarded-for", " 2.2.2.2 ,, "),
        ("Forwarded", "for=1.1.1.1"),
        ("forwarded", "for=2.2.2.2;proto=https"),
        // Not a scheme, not an authority: this hop's own values are used.
        ("X-Forwarded-Proto", "ht tp"),
        ("X-Forwarded-Host", "a/b"),
    ]);
    let mut forward = request(&Method::Get, &headers);
    forward.trust_incoming = true;
    let head = written(&forward);
    assert!(
        head.contains("\r\nX-Forwarded-For: 1.1.1.1, 2.2.2.2, 192.0.2.7\r\n"),
        "{head}"
    );
    assert!(
        head.contains(
            "\r\nForwarded: for=1.1.1.1, for=2.2.2.2;proto=https, for=192.0.2.7;proto=http;host=example.com\r\n"
        ),
        "{head}"
    );
    assert!(head.contains("\r\nX-Forwarded-Proto: http\r\n"), "{head}");
    assert!(
        head.contains("\r\nX-Forwarded-Host: example.com\r\n"),
        "{head}"
    );
}

/// A field the client's `Connection` names is hop-by-hop even from a trusted proxy: it is
/// neither forwarded nor added to the chain.
#[test]
fn a_connection_named_forwarding_field_is_not_trusted() {
    let headers = fields(&[
        ("Connection", "X-Forwarded-For"),
        ("X-Forwarded-For", "6.6.6.6"),
        ("Forwarded", "for=6.6.6.6"),
    ]);
    let mut forward = request(&Method::Get, &headers);
    forward.trust_incoming = true;
    let head = written(&forward);
    assert!(
        head.contains("\r\nX-Forwarded-For: 192.0.2.7\r\n"),
        "{head}"
    );
    assert!(
        head.contains("\r\nForwarded: for=6.6.6.6, for=192.0.2.7;proto=http;host=example.com\r\n"),
        "{head}"
    );
}

/// A name with `_` reaches a CGI-style gateway as the `-` one it aliases (WSGI's
/// `HTTP_X_FORWARDED_FOR` for `X_Forwarded_For`): dropped (nginx's `underscores_in_headers
/// off`), and with `underscores` on still dropped where the `-` name would be. `X-Real-IP`,
/// `X-Forwarded-Port` and `X-Forwarded-Prefix` are a trusted proxy's to pass on only.
#[test]
fn underscored_names_and_forwarding_claims() {
    let headers = fields(&[
        ("X_Forwarded_For", "6.6.6.6"),
        ("x_forwarded_host", "evil"),
        ("Keep_Alive", "1"),
        ("X_Api_Key", "k"),
        ("X-Real-IP", "6.6.6.6"),
        ("X-Forwarded-Port", "1"),
        ("X-Forwarded-Prefix", "/evil"),
        ("Connection", "X_Named"),
        ("X_Named", "1"),
        ("X-Kept", "yes"),
    ]);
    let mut forward = request(&Method::Get, &headers);
    forward.client_host = None;
    let end = "X-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: http\r\n\
               Forwarded: for=192.0.2.7;proto=http\r\nConnection: keep-alive\r\n\r\n";
    assert_eq!(
        written(&forward),
        format!("GET /v1/items?x=1 HTTP/1.1\r\nHost: app.internal:9001\r\nX-Kept: yes\r\n{end}")
    );
    forward.underscores = true;
    assert_eq!(
        written(&forward),
        format!(
            "GET /v1/items?x=1 HTTP/1.1\r\nHost: app.internal:9001\r\nX_Api_Key: k\r\n\
             X-Kept: yes\r\n{end}"
        )
    );
    forward.trust_incoming = true;
    let head = written(&forward);
    for kept in [
        "\r\nX_Api_Key: k\r\n",
        "\r\nX-Real-IP: 6.6.6.6\r\n",
        "\r\nX-Forwarded-Port: 1\r\n",
        "\r\nX-Forwarded-Prefix: /evil\r\n",
    ] {
        assert!(head.contains(kept), "{kept:?} dropped: {head}");
    }
    for dropped in [
        "X_Forwarded_For",
        "x_forwarded_host",
        "Keep_Alive",
        "X_Named",
    ] {
        assert!(!head.contains(dropped), "{dropped} forwarded: {head}");
    }
}

#[test]
fn ipv6_clients_are_bracketed_and_quoted_in_forwarded() {
    for (client, xff, node) in [
        ("::1", "::1", "\"[::1]\""),
        ("2001:db8::17", "2001:db8::17", "\"[2001:db8::17]\""),
        // An IPv4 client accepted on a dual-stack socket is written as IPv4.
        ("::ffff:10.0.0.1", "10.0.0.1", "10.0.0.1"),
    ] {
        let mut forward = request(&Method::Get, &[]);
        forward.client = client.parse().unwrap();
        forward.client_host = None;
        let head = written(&forward);
        assert!(
            head.contains(&format!("\r\nX-Forwarded-For: {xff}\r\n")),
            "{head}"
        );
        assert!(
            head.contains(&format!("\r\nForwarded: for={node};proto=http\r\n")),
            "{head}"
        );
        assert!(!head.contains("X-Forwarded-Host"), "{head}");
    }
}

#[test]
fn exactly_one_framing_field_from_the_body() {
    let headers = fields(&[("Host", "h"), ("Content-Length", "10")]);
    for (body, framing) in [
        (ForwardBody::None, None),
        (ForwardBody::Length(0), Some("Content-Length: 0\r\n")),
        (
            ForwardBody::Length(u64::MAX),
            Some("Content-Length: 18446744073709551615\r\n"),
        ),
        (ForwardBody::Chunked, Some("Transfer-Encoding: chunked\r\n")),
    ] {
        let mut forward = request(&Method::Put, &headers);
        forward.body = body;
        let head = written(&forward);
        let framing_lines: Vec<&str> = head
            .split("\r\n")
            .filter(|line| {
                line.starts_with("Content-Length") || line.starts_with("Transfer-Encoding")
            })
            .collect();
        match framing {
            None => assert!(framing_lines.is_empty(), "{head}"),
            Some(line) => {
                assert_eq!(framing_lines, vec![line.trim_end()], "{head}");
                assert!(head.ends_with(&format!("{line}Connection: keep-alive\r\n\r\n")));
            }
        }
    }
    assert_eq!(
        ForwardBody::from(crate::request::BodyFraming::Length(3)),
        ForwardBody::Length(3)
    );
    assert_eq!(
        ForwardBody::from(crate::request::BodyFraming::Chunked),
        ForwardBody::Chunked
    );
}

#[test]
fn a_tunnel_asks_for_the_upgrade() {
    let headers = fields(&[
        ("Host", "example.com"),
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ]);
    let mut forward = request(&Method::Get, &headers);
    forward.target = "/chat";
    forward.upgrade = Some("websocket");
    forward.client_host = None;
    assert_eq!(
        written(&forward),
        "GET /chat HTTP/1.1\r\n\
         Host: app.internal:9001\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\
         X-Forwarded-For: 192.0.2.7\r\n\
         X-Forwarded-Proto: http\r\n\
         Forwarded: for=192.0.2.7;proto=http\r\n\
         Connection: upgrade\r\n\
         Upgrade: websocket\r\n\
         \r\n"
    );
}

/// A caller that builds a value by hand cannot split the head: a value with CR, LF or NUL is
/// left out, and bytes a request-target may not hold are percent-encoded.
#[test]
fn unsafe_values_never_reach_the_wire() {
    let headers = fields(&[
        ("X-Injected", "a\r\nContent-Length: 0"),
        ("X-Nul", "a\0b"),
        ("X-Fine", "ok"),
    ]);
    let mut forward = request(&Method::Get, &headers);
    forward.target = "/a b#c\r\n\u{e9}";
    forward.host = "h\r\nX: y";
    forward.client_host = Some("bad\nhost");
    forward.upgrade = Some("web\rsocket");
    let head = written(&forward);
    assert!(
        head.starts_with("GET /a%20b%23c%0D%0A%C3%A9 HTTP/1.1\r\nX-Fine: ok\r\n"),
        "{head}"
    );
    assert!(
        !head.contains("Injected") && !head.contains("X-Nul"),
        "{head}"
    );
    assert!(
        !head.contains("X-Forwarded-Host") && !head.contains("Upgrade"),
        "{head}"
    );
    assert!(
        head.contains("\r\nForwarded: for=192.0.2.7;proto=http\r\n"),
        "{head}"
    );
    assert!(head.ends_with("Connection: keep-alive\r\n\r\n"), "{head}");

    let mut forward = request(&Method::Get, &[]);
    forward.target = "";
    assert!(written(&forward).starts_with("GET / HTTP/1.1\r\n"));
}

fn parse_request(bytes: &[u8]) -> (RequestHead, usize) {
    match HeadParser::new(Limits::default()).parse(bytes) {
        Ok(Parse::Complete { head, len }) => (head, len),
        other => panic!("{}: {other:?}", bytes.escape_ascii()),
    }
}

/// Client requests as the request parser accepts them: any order of end-to-end, hop-by-hop,
/// `Connection`-named, forwarding and framing fields.
fn client_request() -> impl Strategy<Value = Vec<u8>> {
    let field = prop_oneof![
        Just("Connection: close, X-Drop".to_string()),
        Just("Connection: keep-alive".to_string()),
        Just("X-Drop: 1".to_string()),
        Just("Keep-Alive: 5".to_string()),
        Just("TE: trailers".to_string()),
        Just("Upgrade: h2c".to_string()),
        Just("Trailer: X".to_string()),
        Just("Expect: 100-continue".to_string()),
        Just("X-Forwarded-For: 10.0.0.1".to_string()),
        Just("Forwarded: for=10.0.0.1".to_string()),
        Just("Proxy-Authorization: Basic x".to_string()),
        "[A-Za-z][A-Za-z0-9-]{0,10}: [ -~]{0,20}".prop_filter(
            "framing and Host are chosen below",
            |line| {
                let name = line
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                !["host", "content-length", "transfer-encoding"].contains(&name.as_str())
            }
        ),
    ];
    let framing = prop_oneof![
        Just(String::new()),
        (0u64..1000).prop_map(|n| format!("Content-Length: {n}\r\n")),
        Just("Transfer-Encoding: chunked\r\n".to_string()),
    ];
    (
        prop::sample::select(&["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"][..]),
        "/[a-z0-9/?=&%]{0,20}",
        prop::collection::vec(field, 0..10),
        framing,
    )
        .prop_map(|(method, target, fields, framing)| {
            let mut bytes = format!("{method} {target} HTTP/1.1\r\nHost: example.com\r\n");
            for field in fields {
                bytes.push_str(&field);
                bytes.push_str("\r\n");
            }
            bytes.push_str(&framing);
            bytes.push_str("\r\n");
            bytes.into_bytes()
        })
}

proptest! {
    /// Whatever the client sent, the upstream parses exactly one request from the head, with
    /// the client's method and target, `Host` first, the framing ampd chose and nothing
    /// hop-by-hop or `Connection`-named from the client.
    #[test]
    fn the_upstream_reads_one_request_framed_as_ampd_says(
        client in client_request(),
        trust_incoming in any::<bool>(),
        keep_alive in any::<bool>(),
        underscores in any::<bool>(),
    ) {
        let (client_head, _) = parse_request(&client);
        let forward = ForwardRequest {
            method: &client_head.method,
            target: &client_head.target,
            host: "upstream:80",
            client_headers: &client_head.headers,
            body: client_head.body.into(),
            client: IpAddr::V4(Ipv4Addr::LOCALHOST),
            proto: "https",
            client_host: client_head.host(),
            trust_incoming,
            upgrade: None,
            underscores,
            keep_alive,
        };
        let mut out = Vec::new();
        write_request(&forward, &mut out);
        let (upstream_head, len) = parse_request(&out);
        prop_assert_eq!(len, out.len());
        prop_assert_eq!(&upstream_head.method, &client_head.method);
        prop_assert_eq!(&upstream_head.target, &client_head.target);
        prop_assert_eq!(upstream_head.body, client_head.body);
        prop_assert_eq!(upstream_head.keep_alive, keep_alive);
        prop_assert_eq!(&*upstream_head.headers[0].name, "Host");
        prop_assert_eq!(&*upstream_head.headers[0].value, b"upstream:80");
        let names: Vec<String> = upstream_head
            .headers
            .iter()
            .map(|header| header.name.to_ascii_lowercase())
            .collect();
        // ampd's own Connection, and its Transfer-Encoding for a chunked body.
        let own = |name: &str| {
            name == "connection"
                || (name == "transfer-encoding" && client_head.body == BodyFraming::Chunked)
        };
        for name in &names {
            prop_assert!(
                own(name) || !is_hop_by_hop(name),
                "{} forwarded",
                name
            );
            prop_assert!(name != "expect", "{} forwarded", name);
            let named = client_head
                .headers_named("connection")
                .any(|value| value.eq_ignore_ascii_case(b"close, X-Drop"));
            prop_assert!(!(named && name == "x-drop"), "{} forwarded", name);
        }
        prop_assert_eq!(names.iter().filter(|name| *name == "host").count(), 1);
        prop_assert_eq!(names.iter().filter(|name| *name == "connection").count(), 1);
    }
}
