//! HTTP/2 through `harness`: a client written with the protocol crate's own frame and HPACK
//! types talks to `Conn` as an engine would drive it (ALPN `h2` via `set_tls`, or the preface
//! on an `h2c` listener). What the server side adds to the protocol core is tested here:
//! streams served by the HTTP/1 handlers, request bodies re-framed, flow control waiting for
//! WINDOW_UPDATE, fairness between streams, GOAWAY on a stop and on an idle timeout.

use ampd_http::h2::frame::{flags, FrameHeader, Kind, HEADER_LEN};
use ampd_http::h2::hpack::{Decoder, Encoder};
use ampd_http::h2::PREFACE;

use super::harness::{big_body, Harness, INDEX};
use super::{Need, Phase, State};
use crate::content::job::{self, Job};
use crate::tls::TlsInfo;

/// The client's side of one connection.
struct Client {
    encoder: Encoder,
    decoder: Decoder,
}

/// One frame the server sent.
#[derive(Debug)]
struct Frame {
    header: FrameHeader,
    payload: Vec<u8>,
}

/// A stream's response as the client reads it.
#[derive(Debug, Default)]
struct Answer {
    fields: Vec<(String, String)>,
    body: Vec<u8>,
    ended: bool,
}

impl Answer {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

impl Client {
    fn new() -> Client {
        Client {
            encoder: Encoder::new(),
            decoder: Decoder::new(4096),
        }
    }

    /// The preface and an empty SETTINGS frame.
    fn start(&self) -> Vec<u8> {
        let mut bytes = PREFACE.to_vec();
        frame(&mut bytes, Kind::Settings, 0, 0, &[]);
        bytes
    }

    fn request(&mut self, stream: u32, method: &str, path: &str, end_stream: bool) -> Vec<u8> {
        self.request_with(stream, method, path, &[], end_stream)
    }

    fn request_with(
        &mut self,
        stream: u32,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        end_stream: bool,
    ) -> Vec<u8> {
        self.request_to(stream, "a.test", method, path, extra, end_stream)
    }

    /// A request for `authority`.
    fn request_to(
        &mut self,
        stream: u32,
        authority: &str,
        method: &str,
        path: &str,
        extra: &[(&str, &str)],
        end_stream: bool,
    ) -> Vec<u8> {
        let mut block = Vec::new();
        self.encoder.begin(&mut block);
        for (name, value) in [
            (":method", method),
            (":scheme", "https"),
            (":authority", authority),
            (":path", path),
        ]
        .iter()
        .chain(extra)
        {
            self.encoder
                .field(name.as_bytes(), value.as_bytes(), false, &mut block);
        }
        let mut flags = flags::END_HEADERS;
        if end_stream {
            flags |= flags::END_STREAM;
        }
        let mut bytes = Vec::new();
        frame(&mut bytes, Kind::Headers, flags, stream, &block);
        bytes
    }

    /// The answers in `frames`, by stream, HPACK-decoded in order.
    fn answers(&mut self, frames: &[Frame]) -> std::collections::BTreeMap<u32, Answer> {
        let mut answers = std::collections::BTreeMap::<u32, Answer>::new();
        for frame in frames {
            let stream = frame.header.stream;
            match frame.header.kind {
                Kind::Headers => {
                    assert!(frame.header.has(flags::END_HEADERS), "{frame:?}");
                    let answer = answers.entry(stream).or_default();
                    let mut fields = Vec::new();
                    self.decoder
                        .decode(&frame.payload, 1 << 20, &mut |name, value| {
                            fields.push((
                                String::from_utf8_lossy(name).into_owned(),
                                String::from_utf8_lossy(value).into_owned(),
                            ));
                        })
                        .expect("the server's header block decodes");
                    // A 1xx then the final response: the final one's fields are kept.
                    answer.fields = fields;
                    answer.ended |= frame.header.has(flags::END_STREAM);
                }
                Kind::Data => {
                    let answer = answers.entry(stream).or_default();
                    assert!(!answer.ended, "DATA after END_STREAM on {stream}");
                    answer.body.extend_from_slice(&frame.payload);
                    answer.ended |= frame.header.has(flags::END_STREAM);
                }
                _ => {}
            }
        }
        answers
    }
}

fn frame(out: &mut Vec<u8>, kind: Kind, flags: u8, stream: u32, payload: &[u8]) {
    FrameHeader {
        length: u32::try_from(payload.len()).unwrap(),
        kind,
        flags,
        stream,
    }
    .write(out);
    out.extend_from_slice(payload);
}

fn data(stream: u32, payload: &[u8], end_stream: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    let flags = if end_stream { flags::END_STREAM } else { 0 };
    frame(&mut bytes, Kind::Data, flags, stream, payload);
    bytes
}

fn window_update(stream: u32, increment: u32) -> Vec<u8> {
    let mut bytes = Vec::new();
    frame(
        &mut bytes,
        Kind::WindowUpdate,
        0,
        stream,
        &increment.to_be_bytes(),
    );
    bytes
}

/// Split what the server sent into frames (every byte must belong to one).
fn frames(mut bytes: &[u8]) -> Vec<Frame> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        assert!(bytes.len() >= HEADER_LEN, "a cut frame header: {bytes:?}");
        let header = FrameHeader::parse(bytes[..HEADER_LEN].try_into().unwrap());
        let end = HEADER_LEN + header.length as usize;
        assert!(bytes.len() >= end, "a cut frame: {header:?}");
        frames.push(Frame {
            header,
            payload: bytes[HEADER_LEN..end].to_vec(),
        });
        bytes = &bytes[end..];
    }
    frames
}

fn agreed_h2() -> TlsInfo {
    TlsInfo {
        protocol: "TLSv1.3",
        cipher: "TLS13_AES_128_GCM_SHA256",
        server_name: Some("a.test".into()),
        alpn: Some(b"h2".to_vec().into_boxed_slice()),
        resumed: false,
        client: None,
    }
}

/// A harness whose connection agreed on `h2` by ALPN.
fn h2_harness(configure: impl FnOnce(&mut crate::config::Config)) -> Harness {
    let mut harness = Harness::new(configure);
    harness
        .conn
        .set_listener("127.0.0.1:8443".parse().unwrap(), true);
    harness.conn.set_tls(agreed_h2());
    harness
}

fn goaway_code(frames: &[Frame]) -> Option<(u32, u32)> {
    frames
        .iter()
        .find(|frame| frame.header.kind == Kind::GoAway)
        .map(|frame| {
            let last = u32::from_be_bytes(frame.payload[..4].try_into().unwrap()) & 0x7fff_ffff;
            let code = u32::from_be_bytes(frame.payload[4..8].try_into().unwrap());
            (last, code)
        })
}

#[test]
fn a_get_is_answered_on_its_stream_with_the_static_handler() {
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    bytes.extend(client.request(1, "GET", "/index.html", true));
    let need = harness.feed(&bytes);
    assert!(matches!(need, Need::Read), "{need:?}");
    let frames = frames(&harness.take_raw());
    // Our SETTINGS first (RFC 9113 §3.4), and the client's acknowledged.
    assert_eq!(frames[0].header.kind, Kind::Settings);
    assert!(!frames[0].header.has(flags::ACK));
    assert!(frames
        .iter()
        .any(|frame| frame.header.kind == Kind::Settings && frame.header.has(flags::ACK)));
    let answers = client.answers(&frames);
    let answer = &answers[&1];
    assert_eq!(answer.field(":status"), Some("200"), "{answer:?}");
    assert_eq!(
        answer.field("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(
        answer.field("content-length"),
        Some(INDEX.len().to_string().as_str())
    );
    // Connection-specific fields have no place in HTTP/2 (RFC 9113 §8.2.2).
    assert_eq!(answer.field("connection"), None);
    assert_eq!(answer.field("keep-alive"), None);
    assert_eq!(answer.body, INDEX);
    assert!(answer.ended);
    assert!(harness.conn.has_answered());
    assert_eq!(harness.conn.phase(), Phase::Idle);
}

#[test]
fn streams_open_at_once_are_each_answered_and_heads_end_the_stream_for_head() {
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    bytes.extend(client.request(1, "GET", "/index.html", true));
    bytes.extend(client.request(3, "GET", "/missing", true));
    bytes.extend(client.request(5, "HEAD", "/index.html", true));
    harness.feed(&bytes);
    let answers = client.answers(&frames(&harness.take_raw()));
    assert_eq!(answers[&1].field(":status"), Some("200"));
    assert_eq!(answers[&1].body, INDEX);
    assert_eq!(answers[&3].field(":status"), Some("404"));
    assert!(answers[&3].ended);
    assert_eq!(answers[&5].field(":status"), Some("200"));
    assert!(answers[&5].body.is_empty());
    assert!(answers[&5].ended);
}

#[test]
fn streams_served_one_after_another_reuse_ended_streams_and_answer_each_correctly() {
    // Ended streams' inner `Conn`s serve later streams (`Conn::renew`) and a repeated head is
    // sent from the block remembered for it: neither may carry anything of one response into
    // the next.
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    let requests = [
        ("GET", "/index.html"),
        ("GET", "/missing"),
        ("HEAD", "/index.html"),
        ("GET", "/index.html"),
        ("GET", "/index.html"),
    ];
    let mut next_stream = 1;
    for round in 0..4 {
        for (method, path) in requests {
            let stream = next_stream;
            next_stream += 2;
            bytes.extend(client.request(stream, method, path, true));
            harness.feed(&bytes);
            bytes.clear();
            let answers = client.answers(&frames(&harness.take_raw()));
            let answer = &answers[&stream];
            assert!(answer.ended, "round {round}, {method} {path}: {answer:?}");
            if path == "/missing" {
                assert_eq!(answer.field(":status"), Some("404"), "{answer:?}");
                continue;
            }
            assert_eq!(answer.field(":status"), Some("200"), "{answer:?}");
            assert_eq!(
                answer.field("content-length"),
                Some(INDEX.len().to_string().as_str())
            );
            let body: &[u8] = if method == "HEAD" { b"" } else { INDEX };
            assert_eq!(answer.body, body, "round {round}, {method} {path}");
        }
    }
    let State::Http2(session) = &harness.conn.state else {
        panic!("not HTTP/2: {:?}", harness.conn.state);
    };
    assert!(session.spare_conns() > 0);
    assert_eq!(harness.conn.phase(), Phase::Idle);
}

#[test]
fn the_preface_on_a_plain_listener_is_http2_only_where_it_says_h2c() {
    let mut plain = Harness::new(|_| {});
    plain.feed(PREFACE);
    let raw = plain.take_raw();
    assert!(
        raw.starts_with(b"HTTP/1.1 "),
        "{}",
        String::from_utf8_lossy(&raw)
    );

    let mut h2c = Harness::new(|_| {});
    h2c.conn.accept_prior_knowledge();
    let mut client = Client::new();
    let mut bytes = client.start();
    bytes.extend(client.request(1, "GET", "/index.html", true));
    // Cut inside the preface: it is recognised whole however it arrives.
    h2c.feed(&bytes[..10]);
    h2c.feed(&bytes[10..]);
    let answers = client.answers(&frames(&h2c.take_raw()));
    assert_eq!(answers[&1].body, INDEX);

    // HTTP/1.1 still works on an h2c listener.
    let mut both = Harness::new(|_| {});
    both.conn.accept_prior_knowledge();
    both.feed(b"GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(both.statuses(), [200]);
}

/// PROTOCOL_ERROR (RFC 9113 §7).
const PROTOCOL_ERROR: u32 = 1;

/// What an `h2c` connection opening with `bytes` gets, fed whole or a byte at a time: the
/// frames and whether the connection ends, or `None` if it answered as HTTP/1.
fn h2c_answer(bytes: &[u8], bytewise: bool) -> Option<(Vec<Frame>, bool)> {
    let mut harness = Harness::new(|_| {});
    harness.conn.accept_prior_knowledge();
    let need = harness.feed_split(bytes, bytewise);
    let raw = harness.take_raw();
    if raw.starts_with(b"HTTP/1.") {
        return None;
    }
    Some((frames(&raw), matches!(need, Need::Close(_))))
}

/// A connection that has committed to HTTP/2 and then breaks the preface is an HTTP/2
/// connection error (RFC 9113 §3.4: GOAWAY PROTOCOL_ERROR, then the close), never an HTTP/1
/// answer that an HTTP/2 client would read as frames. On an `h2c` listener it has committed
/// once it starts with the preface's own request line, or once its first line cannot be
/// HTTP/1's (no `HTTP/x.y` at its end: h2spec's "INVALID CONNECTION PREFACE"); over TLS, ALPN
/// `h2` committed it.
#[test]
fn a_broken_preface_gets_goaway_protocol_error_and_a_close() {
    for bytes in [
        &b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"[..],
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..18]
            .iter()
            .chain(b"GET / HTTP/1.1\r\n\r\n")
            .copied()
            .collect::<Vec<u8>>()
            .as_slice(),
        b"PRI * HTTP/2.0\r\nHost: a\r\n\r\n",
        b"INVALID CONNECTION PREFACE\r\n\r\n",
        b"\r\nGET /\r\n\r\n",
    ] {
        for bytewise in [false, true] {
            let shown = String::from_utf8_lossy(bytes);
            let (sent, closes) = h2c_answer(bytes, bytewise)
                .unwrap_or_else(|| panic!("an HTTP/1 answer to {shown:?}"));
            assert_eq!(goaway_code(&sent), Some((0, PROTOCOL_ERROR)), "{shown:?}");
            assert!(closes, "{shown:?}");
        }
    }
    // HTTP/1 requests stay HTTP/1, a broken one included: they begin like the preface (`P`),
    // or carry a version ampd does not speak (`505`).
    for (bytes, status) in [
        (
            &b"POST /index.html HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"[..],
            405,
        ),
        (b"PUT /x HTTP/1.1\r\nHost: a\r\n\r\n", 405),
        (b"GET / HTTP/3.0\r\nHost: a\r\n\r\n", 505),
        (b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ] {
        let mut harness = Harness::new(|_| {});
        harness.conn.accept_prior_knowledge();
        harness.feed(bytes);
        assert_eq!(
            harness.statuses(),
            [status],
            "{}",
            String::from_utf8_lossy(bytes)
        );
    }
    // Where the listener does not say h2c, such bytes are HTTP/1 requests, and answered so.
    let mut plain = Harness::new(|_| {});
    plain.feed(b"INVALID CONNECTION PREFACE\r\n\r\n");
    assert_eq!(plain.statuses(), [400]);
    // Over TLS, ALPN h2 has committed the connection.
    let mut harness = h2_harness(|_| {});
    let need = harness.feed(b"INVALID CONNECTION PREFACE\r\n\r\n");
    assert_eq!(
        goaway_code(&frames(&harness.take_raw())),
        Some((0, PROTOCOL_ERROR))
    );
    assert!(matches!(need, Need::Close(_)), "{need:?}");
}

/// A second site, `admin.test`, that requires client certificates.
fn with_an_mtls_site(config: &mut crate::config::Config) {
    let mut admin = config.sites[0].clone();
    admin.names = vec![crate::config::HostName::Exact("admin.test".into())];
    admin.default = false;
    admin.tls.client_certificates = crate::config::ClientCertificates::Required {
        ca: "clients.pem".into(),
    };
    config.sites[0].names = vec![crate::config::HostName::Exact("a.test".into())];
    config.sites.push(admin);
}

/// HTTP/2 streams go through the client-certificate check as HTTP/1 requests do: by
/// `:authority`, `403` over h2c (no handshake at all), `421` over a TLS connection whose
/// handshake named another site.
#[test]
fn a_client_certificate_site_is_refused_on_streams_without_its_certificate() {
    for over_tls in [false, true] {
        let mut harness = if over_tls {
            h2_harness(with_an_mtls_site)
        } else {
            let mut h2c = Harness::new(with_an_mtls_site);
            h2c.conn.accept_prior_knowledge();
            h2c
        };
        let mut client = Client::new();
        let mut bytes = client.start();
        bytes.extend(client.request_to(1, "admin.test", "GET", "/index.html", &[], true));
        bytes.extend(client.request_to(3, "a.test", "GET", "/index.html", &[], true));
        harness.feed(&bytes);
        let answers = client.answers(&frames(&harness.take_raw()));
        let refused = if over_tls { "421" } else { "403" };
        assert_eq!(
            answers[&1].field(":status"),
            Some(refused),
            "over TLS: {over_tls}"
        );
        assert_eq!(answers[&3].field(":status"), Some("200"));
        assert_eq!(answers[&3].body, INDEX);
    }
}

#[test]
fn a_body_without_length_reaches_the_handler_and_its_limit_holds() {
    let mut harness = h2_harness(|config| config.limits.max_body = 10);
    let mut client = Client::new();
    let mut bytes = client.start();
    // No content-length: the body goes to the HTTP/1 reader as chunks, which counts it.
    bytes.extend(client.request(1, "POST", "/index.html", false));
    bytes.extend(data(1, b"0123456789abcdef", true));
    harness.feed(&bytes);
    let answers = client.answers(&frames(&harness.take_raw()));
    assert_eq!(answers[&1].field(":status"), Some("413"), "{answers:?}");
    assert!(answers[&1].ended);
}

#[test]
fn a_large_file_waits_for_window_updates_and_a_small_one_is_not_held_behind_it() {
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    // A connection window as browsers open it; each stream keeps the initial 65,535 bytes.
    bytes.extend(window_update(0, 1 << 20));
    bytes.extend(client.request(1, "GET", "/big.bin", true));
    bytes.extend(client.request(3, "GET", "/index.html", true));
    harness.feed(&bytes);
    let sent = frames(&harness.take_raw());
    let answers = client.answers(&sent);
    // The stream's window is 65,535 bytes: the big body stops there.
    assert_eq!(answers[&1].body.len(), 65_535);
    assert!(!answers[&1].ended);
    // The small file went out whole, not after the big one.
    assert_eq!(answers[&3].body, INDEX);
    assert!(answers[&3].ended);
    assert_eq!(harness.conn.phase(), Phase::Sending);

    let big = big_body();
    harness.feed(&window_update(1, 1 << 20));
    let rest = client.answers(&frames(&harness.take_raw()));
    let mut body = answers[&1].body.clone();
    body.extend_from_slice(&rest[&1].body);
    assert_eq!(body.len(), big.len());
    assert!(body == big, "the body arrives exact");
    assert!(rest[&1].ended);
    assert_eq!(harness.conn.phase(), Phase::Idle);
}

#[test]
fn requests_that_arrive_together_are_started_a_few_at_a_time_and_all_answered() {
    // A page's requests arrive in one read; the first responses must not wait until every
    // request has been served (`OPEN_BATCH`), and none may be lost on the way.
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    bytes.extend(window_update(0, 16 << 20));
    // The file's translation cached first, as for a page's second visitor.
    bytes.extend(client.request(1, "GET", "/big.bin", true));
    bytes.extend(window_update(1, 1 << 20));
    harness.feed(&bytes);
    let first = client.answers(&frames(&harness.take_raw()));
    assert!(first[&1].ended);
    bytes.clear();
    let streams: Vec<u32> = (1..41).map(|at| 1 + 2 * at).collect();
    for &stream in &streams {
        bytes.extend(client.request(stream, "GET", "/big.bin", true));
        bytes.extend(window_update(stream, 1 << 20));
    }
    let need = harness.feed_unread(&bytes);
    assert!(matches!(need, Need::Flush), "{need:?}");
    let State::Http2(session) = &harness.conn.state else {
        panic!("not HTTP/2: {:?}", harness.conn.state);
    };
    let waiting = session.waiting_to_start();
    assert!(
        waiting > 0 && waiting < streams.len(),
        "{waiting} of {} requests not started when the first output is ready",
        streams.len()
    );
    assert!(!harness.conn.output.is_empty());

    let need = harness.run();
    assert!(matches!(need, Need::Read), "{need:?}");
    let answers = client.answers(&frames(&harness.take_raw()));
    let big = big_body();
    for stream in streams {
        let answer = &answers[&stream];
        assert_eq!(answer.field(":status"), Some("200"), "stream {stream}");
        assert!(answer.ended, "stream {stream}");
        assert!(
            answer.body == big,
            "stream {stream}: the body arrives exact"
        );
    }
    assert_eq!(harness.conn.phase(), Phase::Idle);
}

#[test]
fn streams_that_each_need_a_job_get_them_done_as_one_batch() {
    // One job per connection is out at a time; a page's requests that all need their
    // translations (a cold cache, or entries due for their check) go to a helper together,
    // not one round trip after another.
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    let paths = [
        "/index.html",
        "/big.bin",
        "/missing-a",
        "/missing-b",
        "/missing-c",
    ];
    for (at, path) in paths.iter().enumerate() {
        bytes.extend(client.request(1 + 2 * at as u32, "GET", path, true));
    }
    bytes.extend(window_update(0, 1 << 20));
    bytes.extend(window_update(3, 1 << 20));
    let Need::Job(Job::Batch(jobs)) = harness.feed_once(&bytes) else {
        panic!("not one batch of jobs");
    };
    assert_eq!(jobs.len(), paths.len());
    assert!(jobs.iter().all(|job| matches!(job, Job::Resolve { .. })));
    // Its results go back to their streams; the next needs (the small file's data to load)
    // are handed when the engine drives the connection again.
    assert!(harness.job_done(job::run(Job::Batch(jobs))).is_none());
    harness.run();
    let answers = client.answers(&frames(&harness.take_raw()));
    assert_eq!(answers[&1].field(":status"), Some("200"));
    assert_eq!(answers[&1].body, INDEX);
    assert_eq!(answers[&3].field(":status"), Some("200"));
    assert!(answers[&3].body == big_body());
    for stream in [5, 7, 9] {
        assert_eq!(
            answers[&stream].field(":status"),
            Some("404"),
            "stream {stream}"
        );
        assert!(answers[&stream].ended);
    }
    assert_eq!(harness.conn.phase(), Phase::Idle);
}

/// The streams, in the order their DATA frames were sent, runs of one stream merged.
fn data_order(frames: &[Frame]) -> Vec<u32> {
    let mut order: Vec<u32> = Vec::new();
    for frame in frames
        .iter()
        .filter(|frame| frame.header.kind == Kind::Data)
    {
        if order.last() != Some(&frame.header.stream) {
            order.push(frame.header.stream);
        }
    }
    order
}

#[test]
fn the_most_urgent_response_goes_first_and_whole_ones_go_one_at_a_time() {
    // RFC 9218: urgency 1 before urgency 5 whatever the order of the requests; two responses
    // of one urgency asked for whole (no `i`) go one after the other, in stream order; two
    // incremental ones share the connection.
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    bytes.extend(window_update(0, 16 << 20));
    let requests = [
        (1, "u=5"),
        (3, "u=1"),
        (5, "u=2"),
        (7, "u=2"),
        (9, "u=6, i"),
        (11, "u=6, i"),
    ];
    for (stream, priority) in requests {
        bytes.extend(client.request_with(
            stream,
            "GET",
            "/big.bin",
            &[("priority", priority)],
            true,
        ));
        bytes.extend(window_update(stream, 1 << 20));
    }
    harness.feed(&bytes);
    let frames = frames(&harness.take_raw());
    let answers = client.answers(&frames);
    let big = big_body();
    for (stream, _) in requests {
        assert!(answers[&stream].ended, "stream {stream}");
        assert!(
            answers[&stream].body == big,
            "stream {stream}: the body arrives exact"
        );
    }
    let order = data_order(&frames);
    assert_eq!(&order[..4], [3, 5, 7, 1], "{order:?}");
    assert!(
        order[4..].len() > 2 && order[4..].iter().all(|stream| [9, 11].contains(stream)),
        "the incremental pair interleaves at the end: {order:?}"
    );
}

#[test]
fn a_graceful_stop_sends_goaway_and_finishes_the_open_stream() {
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    bytes.extend(client.request(1, "GET", "/big.bin", true));
    harness.feed(&bytes);
    harness.start_draining();
    let need = harness.feed(&window_update(0, 1 << 20));
    let sent = frames(&harness.take_raw());
    assert_eq!(
        goaway_code(&sent),
        Some((1, 0)),
        "GOAWAY NO_ERROR, last stream 1"
    );
    assert!(!matches!(need, Need::Close(_)), "stream 1 is still sending");
    let need = harness.feed(&window_update(1, 1 << 20));
    let answers = client.answers(&frames(&harness.take_raw()));
    assert!(answers[&1].ended);
    assert!(matches!(need, Need::Close(_)), "{need:?}");
}

#[test]
fn an_idle_connection_that_times_out_gets_goaway() {
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    bytes.extend(client.request(1, "GET", "/index.html", true));
    harness.feed(&bytes);
    harness.take_raw();
    assert_eq!(harness.conn.phase(), Phase::Idle);
    let need = harness.time_out();
    assert!(matches!(need, Need::Close(_)), "{need:?}");
    let sent = frames(&harness.take_raw());
    assert_eq!(goaway_code(&sent), Some((1, 0)));
}

#[test]
fn a_client_that_hangs_up_mid_body_frees_the_connection_at_once() {
    let mut harness = h2_harness(|_| {});
    let mut client = Client::new();
    let mut bytes = client.start();
    // A body promised and never sent: only the body timeout would end it if the hang-up
    // were not heeded.
    bytes.extend(client.request(1, "POST", "/index.html", false));
    let need = harness.feed(&bytes);
    assert!(matches!(need, Need::Read), "{need:?}");
    let need = harness.finish();
    assert!(matches!(need, Need::Close(_)), "{need:?}");
}
