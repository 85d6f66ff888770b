//! The HTTP/2 connection under arbitrary client bytes: `h2::Connection` fed the preface, an
//! empty SETTINGS, then the input in cuts the input itself chooses, driven by a server that
//! answers every request (HEADERS, DATA up to its windows), releases every body byte and
//! resets now and then.

use std::time::{Duration, Instant};

use crate::h2::frame::{FrameHeader, HEADER_LEN};
use crate::h2::{Connection, ErrorCode, Event, Limits, ResponseFields, PREFACE};

/// Limits small enough that the input reaches them: few streams, small windows and blocks,
/// budgets of a few frames.
fn limits() -> Limits {
    Limits {
        max_concurrent_streams: 4,
        initial_window_size: 4_096,
        connection_window_size: 65_535,
        max_frame_size: 16_384,
        max_header_list_size: 1_024,
        header_table_size: 4_096,
        max_header_block: 8_192,
        budget_window: Duration::from_secs(10),
        max_resets: 20,
        max_settings: 20,
        max_pings: 20,
        max_empty_frames: 50,
    }
}

/// Feeds `data` and checks, after every call:
///
/// * `receive` never uses more than it was given, and reads nothing once `is_closing`;
/// * every window stays at or under 2^31-1 and no more streams are open than allowed
///   (`Connection::assert_invariants`);
/// * what the connection writes (control frames, HEADERS, DATA headers) parses back into
///   whole frames no larger than the client's frame size.
///
/// # Panics
/// Only when an invariant is violated.
pub fn h2_connection(data: &[u8]) {
    let mut conn = Connection::new(&limits());
    let mut input = PREFACE.to_vec();
    // An empty SETTINGS, so the input's frames are read as frames.
    input.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    input.extend_from_slice(data);

    let now = Instant::now();
    let mut buffered: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    let mut response = ResponseFields::default();
    response.status = 200;
    response.push(b"content-type", b"text/plain");
    let mut fed = 0;
    let mut turn = 0u64;
    while fed < input.len() {
        let step = 1 + usize::from(input[fed % input.len()]) * 7 % 113;
        let end = (fed + step).min(input.len());
        buffered.extend_from_slice(&input[fed..end]);
        fed = end;
        turn += 1;

        let was_closing = conn.is_closing();
        let clock = now + Duration::from_millis(turn * 50);
        let mut events = Vec::new();
        let used = conn.receive(&buffered, clock, &mut events);
        assert!(used <= buffered.len(), "used {used} of {}", buffered.len());
        if was_closing {
            assert_eq!(used, 0, "read after is_closing");
        }
        let mut streams = Vec::new();
        for event in &events {
            match *event {
                Event::Request { stream, .. } | Event::Refused { stream, .. } => {
                    streams.push((stream, true));
                }
                Event::Data { stream, data, .. } => {
                    assert!(data.len() <= limits().max_frame_size as usize);
                    streams.push((stream, false));
                    conn.release_body(stream, data.len());
                }
                Event::Reset { .. } | Event::WindowOpened | Event::GoAway { .. } => {}
            }
        }
        drop(events);
        buffered.drain(..used);
        conn.assert_invariants();

        serve(&mut conn, &streams, &response, turn, &mut out);
        conn.assert_invariants();
        check_frames(&out, conn.max_data_payload());
        out.clear();
    }
    // Whatever the input, a graceful GOAWAY can still be queued and written.
    conn.go_away(ErrorCode::NoError);
    conn.write_control(&mut out);
    check_frames(&out, conn.max_data_payload());
}

/// Answer what the events asked: HEADERS on new streams, DATA as far as the windows allow,
/// a reset now and then.
fn serve(
    conn: &mut Connection,
    streams: &[(u32, bool)],
    response: &ResponseFields,
    turn: u64,
    out: &mut Vec<u8>,
) {
    conn.write_control(out);
    for &(stream, new) in streams {
        if new {
            conn.write_headers(stream, response, false, out);
        }
        if turn.is_multiple_of(7) {
            conn.reset_stream(stream, ErrorCode::Cancel);
            continue;
        }
        let len = conn
            .send_capacity(stream)
            .min(conn.max_data_payload())
            .min(300);
        if len > 0 {
            let end_stream = !turn.is_multiple_of(3);
            let header = conn.data_frame(stream, len, end_stream);
            out.extend_from_slice(&header);
            out.resize(out.len() + len as usize, b'x');
        }
    }
    conn.write_control(out);
}

/// `out` is whole frames, none past `max_payload`.
fn check_frames(mut out: &[u8], max_payload: u32) {
    while !out.is_empty() {
        let head: &[u8; HEADER_LEN] = out
            .get(..HEADER_LEN)
            .and_then(|head| head.try_into().ok())
            .expect("a whole frame header");
        let header = FrameHeader::parse(head);
        assert!(header.length <= max_payload, "a frame of {}", header.length);
        let end = HEADER_LEN + header.length as usize;
        assert!(end <= out.len(), "a frame cut short");
        out = &out[end..];
    }
}
