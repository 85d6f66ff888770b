//! Requests from HTTP/2 fields (every malformation of RFC 9113 §8.1.1-§8.3 that h2spec's
//! §8.1.2.x cases send), and responses from ampd's HTTP/1 heads.

use super::{MalformedRequest, RequestBuilder, ResponseFields};
use crate::request::{BodyFraming, Header, Method, RequestHead, Version};

const GET: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/a/b?c=d"),
    (":authority", "example.com:8443"),
];

fn build(fields: &[(&str, &str)], end_stream: bool) -> Result<RequestHead, MalformedRequest> {
    let mut builder = RequestBuilder::new();
    for (name, value) in fields {
        builder.field(name.as_bytes(), value.as_bytes());
    }
    builder.finish(end_stream)
}

/// The GET above with `extra` fields after the pseudo-headers.
fn get_with(extra: &[(&str, &str)]) -> Result<RequestHead, MalformedRequest> {
    let mut fields = GET.to_vec();
    fields.extend_from_slice(extra);
    build(&fields, true)
}

fn header(name: &str, value: &str) -> Header {
    Header {
        name: name.into(),
        value: value.as_bytes().into(),
    }
}

#[test]
fn a_request_becomes_the_head_ampd_serves() {
    let head = get_with(&[("user-agent", "h2load"), ("accept", "*/*")]).unwrap();
    assert_eq!(head.method, Method::Get);
    assert_eq!(&*head.target, "/a/b?c=d");
    assert_eq!(head.version, Version::Http2);
    assert!(head.keep_alive);
    assert!(!head.expect_continue);
    assert_eq!(head.body, BodyFraming::None);
    // :authority stands for Host, first as an HTTP/1 client writes it.
    assert_eq!(
        head.headers,
        [
            header("host", "example.com:8443"),
            header("user-agent", "h2load"),
            header("accept", "*/*"),
        ]
    );
    assert_eq!(head.host(), Some("example.com:8443"));
}

#[test]
fn the_body_framing_follows_content_length_and_end_stream() {
    let post = |extra: &[(&str, &str)], end_stream| {
        let mut fields = vec![(":method", "POST"), (":scheme", "http"), (":path", "/cgi")];
        fields.extend_from_slice(extra);
        build(&fields, end_stream).map(|head| head.body)
    };
    assert_eq!(post(&[], false), Ok(BodyFraming::Chunked));
    assert_eq!(post(&[], true), Ok(BodyFraming::None));
    assert_eq!(
        post(&[("content-length", "5")], false),
        Ok(BodyFraming::Length(5))
    );
    assert_eq!(
        post(&[("content-length", "5"), ("content-length", "5")], false),
        Ok(BodyFraming::Length(5))
    );
    assert_eq!(
        post(&[("content-length", "0")], true),
        Ok(BodyFraming::Length(0))
    );
}

#[test]
fn content_length_must_be_digits_repeat_equal_and_match_an_ended_stream() {
    for value in [
        "abc",
        "",
        "+5",
        "-1",
        "5 5",
        "1,1",
        "0x10",
        "18446744073709551616",
    ] {
        assert_eq!(
            get_with(&[("content-length", value)]),
            Err(MalformedRequest::ContentLength),
            "{value:?}"
        );
    }
    assert_eq!(
        get_with(&[("content-length", "5"), ("content-length", "6")]),
        Err(MalformedRequest::ContentLength)
    );
    // HEADERS with END_STREAM carries no DATA: a length other than 0 cannot be right
    // (§8.1.1).
    assert_eq!(
        get_with(&[("content-length", "5")]),
        Err(MalformedRequest::ContentLength)
    );
}

#[test]
fn names_must_be_lower_case_tokens() {
    // h2spec 8.1.2: a field name in upper case.
    for name in ["User-Agent", "x-Custom", "", "a b", "a:b", "x\u{e9}", "a\0"] {
        assert_eq!(
            get_with(&[(name, "v")]),
            Err(MalformedRequest::FieldSyntax),
            "{name:?}"
        );
    }
}

#[test]
fn values_refuse_nul_cr_lf_and_surrounding_whitespace() {
    for value in ["a\0b", "a\rb", "a\nb", " a", "a ", "\ta", "a\t"] {
        assert_eq!(
            get_with(&[("x-v", value)]),
            Err(MalformedRequest::FieldSyntax),
            "{value:?}"
        );
    }
    // Inner whitespace, obs-text and the empty value are fine.
    let head = get_with(&[("x-v", "a b\tc"), ("x-e", ""), ("x-o", "caf\u{e9}")]).unwrap();
    assert_eq!(head.header("x-v"), Some(&b"a b\tc"[..]));
    assert_eq!(head.header("x-e"), Some(&b""[..]));
}

#[test]
fn pseudo_headers_come_first() {
    // h2spec 8.1.2.1 #3: a pseudo-header after a regular field.
    let fields = [
        (":method", "GET"),
        (":scheme", "https"),
        ("user-agent", "x"),
        (":path", "/"),
    ];
    assert_eq!(
        build(&fields, true),
        Err(MalformedRequest::PseudoHeader(":path"))
    );
}

#[test]
fn unknown_and_response_pseudo_headers_are_refused() {
    // h2spec 8.1.2.1 #1 (unknown) and #2 (a response pseudo-header in a request).
    let mut fields = GET.to_vec();
    fields.push((":foo", "bar"));
    assert_eq!(
        build(&fields, true),
        Err(MalformedRequest::PseudoHeader("unknown"))
    );
    let mut fields = GET.to_vec();
    fields.insert(1, (":status", "200"));
    assert_eq!(
        build(&fields, true),
        Err(MalformedRequest::PseudoHeader(":status"))
    );
    // Extended CONNECT's :protocol (RFC 8441) is not enabled: unknown.
    let mut fields = GET.to_vec();
    fields.push((":protocol", "websocket"));
    assert_eq!(
        build(&fields, true),
        Err(MalformedRequest::PseudoHeader("unknown"))
    );
}

#[test]
fn each_pseudo_header_exactly_once() {
    // h2spec 8.1.2.3 #2-#7: missing or duplicated :method, :scheme, :path.
    for (missing, _) in &GET[..3] {
        let fields: Vec<_> = GET.iter().copied().filter(|(n, _)| n != missing).collect();
        assert_eq!(
            build(&fields, true),
            Err(MalformedRequest::PseudoHeader(missing)),
            "without {missing}"
        );
    }
    for (index, (name, _)) in GET.iter().enumerate() {
        let mut fields = GET.to_vec();
        fields.insert(index, GET[index]);
        let expected = if *name == ":authority" {
            // :authority is optional, but still at most once.
            MalformedRequest::PseudoHeader(":authority")
        } else {
            MalformedRequest::PseudoHeader(name)
        };
        assert_eq!(build(&fields, true), Err(expected), "twice {name}");
    }
}

#[test]
fn path_must_be_origin_form_or_asterisk_for_options() {
    // h2spec 8.1.2.3 #1: an empty :path.
    let with_path = |method: &'static str, path: &'static str| {
        build(
            &[(":method", method), (":scheme", "https"), (":path", path)],
            true,
        )
    };
    for path in ["", "a/b", "http://example.com/", "/a b", "/a#f", "/\u{e9}"] {
        assert_eq!(
            with_path("GET", path),
            Err(MalformedRequest::PseudoHeader(":path")),
            "{path:?}"
        );
    }
    assert_eq!(
        with_path("GET", "*"),
        Err(MalformedRequest::PseudoHeader(":path"))
    );
    assert_eq!(&*with_path("OPTIONS", "*").unwrap().target, "*");
    assert_eq!(&*with_path("GET", "/").unwrap().target, "/");
}

#[test]
fn method_and_scheme_must_be_well_formed() {
    let request = |method: &'static str, scheme: &'static str| {
        build(
            &[(":method", method), (":scheme", scheme), (":path", "/")],
            true,
        )
    };
    assert_eq!(
        request("GE T", "https"),
        Err(MalformedRequest::PseudoHeader(":method"))
    );
    assert_eq!(
        request("", "https"),
        Err(MalformedRequest::PseudoHeader(":method"))
    );
    assert_eq!(
        request("GET", ""),
        Err(MalformedRequest::PseudoHeader(":scheme"))
    );
    assert_eq!(
        request("GET", "ht tp"),
        Err(MalformedRequest::PseudoHeader(":scheme"))
    );
    assert_eq!(
        request("PROPFIND", "http").unwrap().method,
        Method::Other("PROPFIND".into())
    );
}

#[test]
fn connection_specific_fields_are_refused() {
    // h2spec 8.1.2.2 #1: connection-specific fields; #2: TE other than "trailers".
    for (name, value) in [
        ("connection", "keep-alive"),
        ("keep-alive", "timeout=5"),
        ("proxy-connection", "keep-alive"),
        ("transfer-encoding", "chunked"),
        ("upgrade", "h2c"),
        ("te", "gzip"),
        ("te", "trailers, deflate"),
    ] {
        assert_eq!(
            get_with(&[(name, value)]),
            Err(MalformedRequest::ConnectionSpecific),
            "{name}: {value}"
        );
    }
    let head = get_with(&[("te", "trailers")]).unwrap();
    assert_eq!(head.header("te"), Some(&b"trailers"[..]));
}

#[test]
fn cookie_crumbs_are_joined() {
    // §8.2.3: one field per crumb on the wire, one `cookie` for HTTP/1.
    let head = get_with(&[
        ("cookie", "a=1"),
        ("accept", "*/*"),
        ("cookie", "b=2"),
        ("cookie", "c=3"),
    ])
    .unwrap();
    let cookies: Vec<_> = head.headers_named("cookie").collect();
    assert_eq!(cookies, [&b"a=1; b=2; c=3"[..]]);
    assert_eq!(head.headers.len(), 3); // host, cookie, accept
    assert_eq!(&*head.headers[1].name, "cookie");
}

#[test]
fn host_and_authority_must_agree() {
    // Both, equal but for case: one host field, the client's.
    let head = get_with(&[("host", "EXAMPLE.com:8443")]).unwrap();
    assert_eq!(
        head.headers_named("host").collect::<Vec<_>>(),
        [&b"EXAMPLE.com:8443"[..]]
    );
    assert_eq!(
        get_with(&[("host", "other.example")]),
        Err(MalformedRequest::Authority)
    );
    // Host alone stands; two are refused; a bad one is refused.
    let without_authority = &GET[..3];
    let mut fields = without_authority.to_vec();
    fields.push(("host", "example.com"));
    assert_eq!(build(&fields, true).unwrap().host(), Some("example.com"));
    fields.push(("host", "example.com"));
    assert_eq!(build(&fields, true), Err(MalformedRequest::Authority));
    let mut fields = without_authority.to_vec();
    fields.push(("host", "a b"));
    assert_eq!(build(&fields, true), Err(MalformedRequest::Authority));
    // Neither: a request without authority information is served by the default site.
    let head = build(without_authority, true).unwrap();
    assert_eq!(head.host(), None);
}

#[test]
fn a_bad_authority_is_refused() {
    // §8.3.1: no userinfo; and the host [":" port] grammar ampd holds Host to.
    for authority in [
        "user@example.com",
        "",
        "exa mple.com",
        "example.com:99999",
        "[::1",
    ] {
        let mut fields = GET[..3].to_vec();
        fields.push((":authority", authority));
        assert_eq!(
            build(&fields, true),
            Err(MalformedRequest::Authority),
            "{authority:?}"
        );
    }
}

#[test]
fn connect_is_reported_for_a_405() {
    let fields = [(":method", "CONNECT"), (":authority", "example.com:443")];
    assert_eq!(build(&fields, false), Err(MalformedRequest::Connect));
}

#[test]
fn expect_100_continue_is_noted() {
    let mut fields = vec![(":method", "PUT"), (":scheme", "https"), (":path", "/f")];
    fields.push(("expect", "100-Continue"));
    let head = build(&fields, false).unwrap();
    assert!(head.expect_continue);
    assert_eq!(head.body, BodyFraming::Chunked);
}

#[test]
fn the_first_fault_is_the_one_reported() {
    let fields = [
        (":method", "GET"),
        ("User-Agent", "x"),
        ("connection", "close"),
    ];
    assert_eq!(build(&fields, true), Err(MalformedRequest::FieldSyntax));
}

fn listed(fields: &ResponseFields) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(name, value)| {
            (
                String::from_utf8(name.to_vec()).unwrap(),
                String::from_utf8(value.to_vec()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn push_adds_a_field() {
    let mut fields = ResponseFields::default();
    fields.push(b"server", b"ampd");
    fields.push(b"x-extra", b"1");
    assert_eq!(
        listed(&fields),
        [
            ("server".to_owned(), "ampd".to_owned()),
            ("x-extra".to_owned(), "1".to_owned())
        ]
    );
}
