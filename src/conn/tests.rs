//! Unit tests of `Conn`'s state machine through `harness`: pipelining, body discard, errors,
//! and the keep-alive / close decision (RFC 9112 §9), with no socket.

use super::harness::{big_body, Harness, INDEX};
use super::{Ending, Need, Phase, OUTPUT_HIGH_WATER};

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n")
}

fn is_read(need: &Need) -> bool {
    matches!(need, Need::Read)
}

fn closes(need: &Need) -> Option<Ending> {
    match need {
        Need::Close(ending) => Some(*ending),
        _ => None,
    }
}

#[test]
fn a_get_is_answered_and_the_connection_stays_open() {
    let mut harness = Harness::new(|_| {});
    let need = harness.feed(get("/index.html").as_bytes());
    assert!(is_read(&need), "{need:?}");
    let responses = harness.take();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].status, 200);
    assert_eq!(responses[0].body, INDEX);
    assert_eq!(responses[0].header("connection"), None);
    // The client closing its side after the exchange ends the connection plainly.
    assert_eq!(closes(&harness.finish()), Some(Ending::Close));
}

#[test]
fn a_file_range_body_arrives_whole() {
    let mut harness = Harness::new(|_| {});
    harness.feed(get("/big.bin").as_bytes());
    let responses = harness.take();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].status, 200);
    assert_eq!(responses[0].body, big_body());
}

#[test]
fn pipelined_requests_are_answered_in_order_whole_or_bytewise() {
    let requests = [
        get("/index.html"),
        get("/missing"),
        get("/big.bin"),
        "OPTIONS /index.html HTTP/1.1\r\nHost: a.test\r\n\r\n".to_owned(),
    ]
    .concat();
    for bytewise in [false, true] {
        let mut harness = Harness::new(|_| {});
        let need = harness.feed_split(requests.as_bytes(), bytewise);
        assert!(is_read(&need), "bytewise {bytewise}: {need:?}");
        let responses = harness.take();
        let statuses: Vec<u16> = responses.iter().map(|response| response.status).collect();
        assert_eq!(statuses, [200, 404, 200, 204], "bytewise {bytewise}");
        assert_eq!(responses[0].body, INDEX);
        assert_eq!(responses[2].body, big_body());
    }
}

#[test]
fn a_content_length_body_is_discarded_before_the_next_request() {
    // The body looks like a request: answering it would mean the body was parsed as one.
    let body = get("/missing");
    let requests = format!(
        "GET /index.html HTTP/1.1\r\nHost: a.test\r\nContent-Length: {}\r\n\r\n{body}{}",
        body.len(),
        get("/index.html")
    );
    for bytewise in [false, true] {
        let mut harness = Harness::new(|_| {});
        let need = harness.feed_split(requests.as_bytes(), bytewise);
        assert!(is_read(&need), "{need:?}");
        assert_eq!(harness.statuses(), [200, 200], "bytewise {bytewise}");
    }
}

#[test]
fn a_chunked_body_is_discarded_before_the_next_request() {
    // A chunk that looks like a request, after a chunk extension, then trailers.
    let disguised = get("/missing");
    let requests = format!(
        "GET /index.html HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n\
         5\r\nhello\r\n{:x};ext=1\r\n{disguised}\r\n0\r\nTrailer: x\r\n\r\n{}",
        disguised.len(),
        get("/index.html")
    );
    for bytewise in [false, true] {
        let mut harness = Harness::new(|_| {});
        let need = harness.feed_split(requests.as_bytes(), bytewise);
        assert!(is_read(&need), "{need:?}");
        assert_eq!(harness.statuses(), [200, 200], "bytewise {bytewise}");
    }
}

#[test]
fn a_body_still_arriving_holds_the_answer_until_it_is_read() {
    let mut harness = Harness::new(|_| {});
    let need =
        harness.feed(b"GET /index.html HTTP/1.1\r\nHost: a.test\r\nContent-Length: 4\r\n\r\nab");
    assert!(is_read(&need), "{need:?}");
    assert!(
        harness.take().is_empty(),
        "answered before its body was read"
    );
    harness.feed(b"cd");
    assert_eq!(harness.statuses(), [200]);
}

#[test]
fn a_declared_body_over_max_body_gets_413_and_a_lingering_close() {
    let mut harness = Harness::new(|config| config.limits.max_body = 10);
    let need = harness.feed(
        format!(
            "GET /index.html HTTP/1.1\r\nHost: a.test\r\nContent-Length: 11\r\n\r\n{}",
            get("/index.html")
        )
        .as_bytes(),
    );
    assert_eq!(closes(&need), Some(Ending::Linger));
    let responses = harness.take();
    assert_eq!(
        responses.len(),
        1,
        "nothing behind the refused body is answered"
    );
    assert_eq!(responses[0].status, 413);
    assert_eq!(responses[0].header("connection"), Some("close"));
}

#[test]
fn a_chunked_body_over_max_body_gets_413_and_a_lingering_close() {
    let mut harness = Harness::new(|config| config.limits.max_body = 10);
    let need = harness.feed(
        b"GET /index.html HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n\
          8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n",
    );
    assert_eq!(closes(&need), Some(Ending::Linger));
    assert_eq!(harness.statuses(), [413]);
}

#[test]
fn broken_chunk_framing_gets_400_and_a_lingering_close() {
    let mut harness = Harness::new(|_| {});
    let need = harness.feed(
        b"GET /index.html HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    );
    assert_eq!(closes(&need), Some(Ending::Linger));
    assert_eq!(harness.statuses(), [400]);
}

#[test]
fn a_malformed_request_gets_400_and_a_lingering_close_after_earlier_answers() {
    let mut harness = Harness::new(|_| {});
    let need = harness.feed(
        format!(
            "{}GET /index.html HTTP/1.1\r\nBad Header\r\n\r\n{}",
            get("/index.html"),
            get("/index.html")
        )
        .as_bytes(),
    );
    assert_eq!(closes(&need), Some(Ending::Linger));
    let responses = harness.take();
    let statuses: Vec<u16> = responses.iter().map(|response| response.status).collect();
    assert_eq!(statuses, [200, 400]);
    assert_eq!(responses[1].header("connection"), Some("close"));
}

#[test]
fn http10_closes_unless_it_asks_for_keep_alive() {
    let mut harness = Harness::new(|_| {});
    let need = harness.feed(b"GET /index.html HTTP/1.0\r\n\r\n");
    assert_eq!(closes(&need), Some(Ending::Close));
    let responses = harness.take();
    assert_eq!(responses[0].status, 200);
    assert_eq!(responses[0].header("connection"), Some("close"));

    let mut harness = Harness::new(|_| {});
    let need = harness.feed(b"GET /index.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert!(is_read(&need), "{need:?}");
    let responses = harness.take();
    assert_eq!(responses[0].status, 200);
    assert_eq!(responses[0].header("connection"), Some("keep-alive"));
    // Still usable: a second request is answered.
    harness.feed(b"GET /index.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(harness.statuses(), [200]);
}

#[test]
fn connection_close_closes_plainly_after_the_response() {
    let mut harness = Harness::new(|_| {});
    let need =
        harness.feed(b"GET /index.html HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
    assert_eq!(closes(&need), Some(Ending::Close));
    let responses = harness.take();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].status, 200);
    assert_eq!(responses[0].header("connection"), Some("close"));
}

/// The engines time a connection by its phase: the last response still queued is sending (the
/// send timeout, restarted by progress, and the minimum send rate), never closing, whose
/// linger timeout does not restart and cut such a download after 2 s.
#[test]
fn a_last_response_still_going_out_is_sending_not_closing() {
    let mut harness = Harness::new(|_| {});
    let need =
        harness.feed_unread(b"GET /big.bin HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
    assert_eq!(closes(&need), Some(Ending::Close));
    assert!(!harness.conn.output.is_empty());
    assert_eq!(harness.conn.phase(), Phase::Sending);
    harness.run();
    assert_eq!(harness.conn.phase(), Phase::Closing);
    assert_eq!(harness.take()[0].body, big_body());
}

#[test]
fn requests_pipelined_behind_connection_close_are_not_answered_and_the_close_lingers() {
    let mut harness = Harness::new(|_| {});
    let need = harness.feed(
        format!(
            "{}GET /index.html HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n{}{}",
            get("/index.html"),
            get("/index.html"),
            get("/missing")
        )
        .as_bytes(),
    );
    assert_eq!(closes(&need), Some(Ending::Linger));
    assert_eq!(harness.statuses(), [200, 200]);
    // Nothing more is read or answered.
    let need = harness.feed(get("/index.html").as_bytes());
    assert_eq!(closes(&need), Some(Ending::Linger));
    assert!(harness.take().is_empty());
}

#[test]
fn head_gets_the_get_headers_and_no_body() {
    let mut harness = Harness::new(|_| {});
    let need = harness.feed(
        format!(
            "HEAD /index.html HTTP/1.1\r\nHost: a.test\r\n\r\n\
             HEAD /big.bin HTTP/1.1\r\nHost: a.test\r\n\r\n{}",
            get("/index.html")
        )
        .as_bytes(),
    );
    assert!(is_read(&need), "{need:?}");
    // Parsed as HEAD answers, the GET behind them must start right after their heads: a body
    // sent for a HEAD would show as a malformed third response.
    let responses = harness.responses(&[true, true, false]);
    assert_eq!(responses.len(), 3);
    assert_eq!(responses[0].status, 200);
    assert_eq!(
        responses[0].header("content-length"),
        Some(INDEX.len().to_string().as_str())
    );
    assert_eq!(
        responses[1].header("content-length"),
        Some(big_body().len().to_string().as_str())
    );
    assert!(responses[0].body.is_empty() && responses[1].body.is_empty());
    assert_eq!(responses[2].body, INDEX);
}

#[test]
fn max_requests_per_connection_closes_after_the_last_allowed() {
    let mut harness = Harness::new(|config| config.limits.max_requests_per_connection = 2);
    let need = harness.feed(get("/index.html").as_bytes());
    assert!(is_read(&need), "{need:?}");
    let need = harness.feed(get("/index.html").as_bytes());
    assert_eq!(closes(&need), Some(Ending::Close));
    let responses = harness.take();
    assert_eq!(responses.len(), 2);
    assert_eq!(responses[0].header("connection"), None);
    assert_eq!(responses[1].header("connection"), Some("close"));
}

#[test]
fn a_partial_head_when_the_client_finishes_closes_without_an_answer() {
    let mut harness = Harness::new(|_| {});
    assert!(is_read(&harness.feed(b"GET /index.ht")));
    assert_eq!(closes(&harness.finish()), Some(Ending::Close));
    assert!(harness.take().is_empty());
}

#[test]
fn expect_continue_is_invited_then_the_body_discarded() {
    let mut harness = Harness::new(|_| {});
    let need = harness.feed(
        b"GET /index.html HTTP/1.1\r\nHost: a.test\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
    );
    assert!(is_read(&need), "{need:?}");
    assert_eq!(
        harness.statuses(),
        [100],
        "the invitation goes out before the body"
    );
    harness.feed(format!("abc{}", get("/index.html")).as_bytes());
    assert_eq!(harness.statuses(), [200, 200]);
}

#[test]
fn expect_continue_to_a_refused_method_gets_the_refusal_and_a_lingering_close() {
    let mut harness = Harness::new(|_| {});
    let need = harness.feed(
        b"POST /index.html HTTP/1.1\r\nHost: a.test\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
    );
    assert_eq!(closes(&need), Some(Ending::Linger));
    let responses = harness.take();
    assert_eq!(
        responses.len(),
        1,
        "no 100 Continue for a body that is refused"
    );
    assert_eq!(responses[0].status, 405);
    assert_eq!(responses[0].header("connection"), Some("close"));
}

#[test]
fn draining_answers_with_connection_close() {
    let mut harness = Harness::new(|_| {});
    assert!(is_read(&harness.feed(get("/index.html").as_bytes())));
    assert_eq!(harness.statuses(), [200]);
    harness.start_draining();
    let need = harness.feed(get("/index.html").as_bytes());
    assert_eq!(closes(&need), Some(Ending::Close));
    let responses = harness.take();
    assert_eq!(responses[0].status, 200);
    assert_eq!(responses[0].header("connection"), Some("close"));
}

#[test]
fn a_refused_connection_answers_its_first_request_503_and_closes() {
    let mut harness = Harness::refusing(|_| {});
    let need = harness.feed(get("/index.html").as_bytes());
    assert_eq!(closes(&need), Some(Ending::Close));
    let responses = harness.take();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].status, 503);
    assert!(responses[0].header("retry-after").is_some());
    assert_eq!(responses[0].header("connection"), Some("close"));
}

#[test]
fn a_timeout_mid_head_gets_408_and_an_idle_one_closes_silently() {
    let mut harness = Harness::new(|_| {});
    assert!(is_read(&harness.feed(b"GET /index.ht")));
    assert_eq!(closes(&harness.time_out()), Some(Ending::Linger));
    assert_eq!(harness.statuses(), [408]);

    let mut harness = Harness::new(|_| {});
    assert!(is_read(&harness.feed(get("/index.html").as_bytes())));
    assert_eq!(harness.statuses(), [200]);
    // `timed_out` ends every connection lingering, even one with nothing unread (the event
    // loop closes idle connections without calling it; the blocking engines' drain does not).
    assert_eq!(closes(&harness.time_out()), Some(Ending::Linger));
    assert!(
        harness.take().is_empty(),
        "an idle keep-alive connection gets no 408"
    );
}

#[test]
fn a_timeout_mid_body_gets_408() {
    let mut harness = Harness::new(|_| {});
    let need =
        harness.feed(b"GET /index.html HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n\r\nab");
    assert!(is_read(&need), "{need:?}");
    assert_eq!(closes(&harness.time_out()), Some(Ending::Linger));
    assert_eq!(harness.statuses(), [408]);
}

#[test]
fn parsing_stops_while_output_is_past_the_high_water_mark() {
    let mut harness = Harness::new(|_| {});
    let requests = get("/big.bin").repeat(4);
    // Three 100 KiB answers pass the 256 KiB mark: the fourth request waits, unparsed.
    let need = harness.feed_unread(requests.as_bytes());
    assert!(matches!(need, Need::Flush), "{need:?}");
    let pending = harness.conn.output.pending();
    assert!(pending > OUTPUT_HIGH_WATER, "{pending}");
    assert!(pending < 4 * big_body().len() as u64, "{pending}");
    // Once the client reads, the rest is answered in order.
    assert!(is_read(&harness.run()));
    let responses = harness.take();
    assert_eq!(responses.len(), 4);
    assert!(responses.iter().all(|response| response.body == big_body()));
}

/// The status pages the static handler decides on but no longer writes itself (a `301` to
/// `path/`, a `412`, a `416`) come out of the connection's one status-page writer whole: the
/// location's added headers, the status's own field before `Content-Type`, the page; the head
/// alone for `HEAD`.
#[test]
fn static_status_pages_are_written_in_one_place_byte_for_byte() {
    let mut harness = Harness::new(|config| {
        let settings = &mut config.sites[0].locations[0].settings;
        std::fs::create_dir_all(settings.static_files.root.join("docs")).unwrap();
        settings.headers.push(("X-Site".into(), "a".into()));
    });
    harness.feed(
        b"GET /docs?x=1 HTTP/1.1\r\nHost: a.test\r\n\r\n\
          GET /index.html HTTP/1.1\r\nHost: a.test\r\nIf-Match: \"other\"\r\n\r\n\
          HEAD /index.html HTTP/1.1\r\nHost: a.test\r\nRange: bytes=100-\r\n\r\n",
    );
    let raw = String::from_utf8(harness.take_raw()).unwrap();
    let page = |status: &str| {
        format!(
            "<!DOCTYPE html>\n<html><head><title>{status}</title></head>\n\
             <body><h1>{status}</h1><hr>ampd</body></html>\n"
        )
    };
    let head = |status: &str, field: &str, length: usize| {
        format!(
            "HTTP/1.1 {status}\r\nServer: ampd\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\n\
             X-Site: a\r\n{field}Content-Type: text/html; charset=utf-8\r\n\
             Content-Length: {length}\r\n\r\n"
        )
    };
    let moved = page("301 Moved Permanently");
    let failed = page("412 Precondition Failed");
    let unsatisfiable = page("416 Range Not Satisfiable");
    let expected = [
        head(
            "301 Moved Permanently",
            "Location: /docs/?x=1\r\n",
            moved.len(),
        ),
        moved,
        head("412 Precondition Failed", "", failed.len()),
        failed,
        head(
            "416 Range Not Satisfiable",
            &format!("Content-Range: bytes */{}\r\n", INDEX.len()),
            unsatisfiable.len(),
        ),
    ]
    .concat();
    assert_eq!(raw, expected);
}
