//! The HTTP/3 connection (`crate::h3::Connection`) under an arbitrary script of stream events:
//! data (with or without FIN) on any stream ID, resets, streams opened, our GOAWAY, streams we
//! stop reading. Optionally after a valid prelude (the client's control, encoder and decoder
//! streams and the RFC 9204 B.2 insertions), so the script reaches request streams that refer
//! to the dynamic table.
//!
//! Owns those invariants. Must not be used by the server; every check panics on violation.

use std::collections::{BTreeMap, HashMap};

use crate::field_coding::integer;
use crate::h3::frame::{Frame, FrameReader, StreamKind};
use crate::h3::{Config, Connection, Error, Event, LocalStream};

/// One step of a script.
#[derive(Clone)]
enum Step {
    Data { id: u64, bytes: Vec<u8>, fin: bool },
    Reset(u64),
    Opened(u64),
    GoAway,
    StopReading(u64),
}

/// A stream ID from a script octet's low bits: three request streams, three client
/// unidirectional ones, a far request stream, a stream only the server opens.
fn stream_id(op: u8) -> u64 {
    match op & 7 {
        index @ 0..=2 => 4 * u64::from(index),
        index @ 3..=5 => 2 + 4 * u64::from(index - 3),
        6 => 12 + 4 * u64::from(op >> 5),
        _ => 1 + 2 * u64::from(op >> 7),
    }
}

/// The script `data` says: records of an operation octet, a length octet and that many
/// octets (data for the `Data` steps, ignored by the others).
fn script(data: &[u8]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut rest = data;
    while let [op, len, after @ ..] = rest {
        let take = usize::from(*len).min(after.len());
        let (bytes, next) = after.split_at(take);
        rest = next;
        let id = stream_id(*op);
        steps.push(match (op >> 3) & 3 {
            0 | 1 => Step::Data {
                id,
                bytes: bytes.to_vec(),
                fin: op & 0x08 != 0,
            },
            2 => Step::Reset(id),
            _ => match len % 3 {
                0 => Step::Opened(id),
                1 => Step::GoAway,
                _ => Step::StopReading(id),
            },
        });
    }
    steps
}

/// The valid start a script may have: the client's SETTINGS, its QPACK streams and two
/// insertions (`:authority www.example.com`, `:path /sample/path`).
fn prelude() -> Vec<Step> {
    let insertions = [
        &[0x02][..],
        &[0x3f, 0xbd, 0x01, 0xc0, 0x0f],
        b"www.example.com",
        &[0xc1, 0x0c],
        b"/sample/path",
    ]
    .concat();
    vec![
        Step::Data {
            id: 2,
            bytes: vec![0x00, 0x04, 0x00],
            fin: false,
        },
        Step::Data {
            id: 6,
            bytes: insertions,
            fin: false,
        },
        Step::Data {
            id: 10,
            bytes: vec![0x03],
            fin: false,
        },
    ]
}

/// What a run of a script gave, to compare runs of the same script fed differently.
#[derive(Debug, PartialEq, Eq)]
struct Transcript {
    /// Each stream's events in order, bodies joined.
    streams: BTreeMap<u64, Vec<String>>,
    /// Events not of one stream (SETTINGS, GOAWAY).
    connection: Vec<String>,
    error: Option<Error>,
    /// Our decoder stream's acknowledgements and cancellations, sorted: the order in which
    /// streams unblock within one read may differ with the cut.
    acknowledged: Vec<u64>,
    cancelled: Vec<u64>,
}

/// Where a request stream is, as its events show it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Head,
    Done,
}

struct Run {
    conn: Connection,
    transcript: Transcript,
    states: HashMap<u64, Seen>,
    goaway: Option<u64>,
    control: Vec<u8>,
    encoder: Vec<u8>,
    decoder: Vec<u8>,
}

impl Run {
    fn new(config: &Config) -> Run {
        Run {
            conn: Connection::new(config),
            transcript: Transcript {
                streams: BTreeMap::new(),
                connection: Vec::new(),
                error: None,
                acknowledged: Vec::new(),
                cancelled: Vec::new(),
            },
            states: HashMap::new(),
            goaway: None,
            control: Vec::new(),
            encoder: Vec::new(),
            decoder: Vec::new(),
        }
    }

    fn step(&mut self, step: &Step) {
        let mut events = Vec::new();
        let result = match step {
            Step::Data { id, bytes, fin } => self.conn.receive(*id, bytes, *fin, &mut events),
            Step::Reset(id) => self.conn.stream_reset(*id),
            Step::Opened(id) => self.conn.stream_opened(*id, &mut events),
            Step::GoAway => {
                let id = self.conn.goaway();
                assert_eq!(id % 4, 0, "GOAWAY names a request stream");
                if let Some(earlier) = self.goaway {
                    assert_eq!(id, earlier, "a second GOAWAY changed the ID");
                }
                self.goaway = Some(id);
                Ok(())
            }
            // The server stops reading only requests it has.
            Step::StopReading(id) if self.states.get(id) == Some(&Seen::Head) => {
                self.conn.stop_reading(*id);
                self.states.insert(*id, Seen::Done);
                Ok(())
            }
            Step::StopReading(_) => return,
        };
        if let Some(earlier) = self.transcript.error {
            assert!(events.is_empty(), "events after the connection failed");
            if !matches!(step, Step::GoAway | Step::StopReading(_)) {
                assert_eq!(result, Err(earlier), "a failed connection came back");
            }
        }
        for event in events {
            self.note(event);
        }
        if let Err(error) = result {
            assert_eq!(self.conn.error(), Some(error));
            self.transcript.error = Some(error);
        }
        self.control
            .extend(self.conn.take_output(LocalStream::Control));
        self.encoder
            .extend(self.conn.take_output(LocalStream::QpackEncoder));
        self.decoder
            .extend(self.conn.take_output(LocalStream::QpackDecoder));
        assert!(!self.conn.has_output(), "output left after taking it all");
    }

    fn note(&mut self, event: Event<'_>) {
        let (stream, text) = match event {
            Event::Request { stream, head } => {
                assert_eq!(stream % 4, 0);
                assert!(
                    self.goaway.is_none_or(|limit| stream < limit),
                    "request {stream} served past our GOAWAY"
                );
                assert!(
                    self.states.insert(stream, Seen::Head).is_none(),
                    "a second head"
                );
                (stream, format!("{} {}", head.method.as_str(), head.target))
            }
            Event::Body { stream, data } => {
                assert!(!data.is_empty());
                assert!(
                    self.states.get(&stream) == Some(&Seen::Head),
                    "body out of order"
                );
                // Escaped octet by octet, so that pieces join to the same text however they were cut.
                let text = data.escape_ascii().to_string();
                let lines = self.transcript.streams.entry(stream).or_default();
                match lines.last_mut() {
                    Some(last) if last.starts_with("body ") => last.push_str(&text),
                    _ => lines.push(format!("body {text}")),
                }
                return;
            }
            Event::Finished { stream } => {
                let state = self.states.insert(stream, Seen::Done);
                assert!(state == Some(Seen::Head), "finished without a head");
                (stream, "finished".into())
            }
            Event::StreamError { stream, error } => {
                assert_eq!(stream % 4, 0);
                let state = self.states.insert(stream, Seen::Done);
                assert!(state != Some(Seen::Done), "an error after the end");
                (stream, format!("error {:?}", error.error().code))
            }
            Event::StopSending { stream, .. } => {
                assert_eq!(stream % 4, 2);
                (stream, "stop".into())
            }
            Event::Settings(settings) => {
                self.transcript.connection.push(format!("{settings:?}"));
                return;
            }
            Event::GoAway(id) => {
                self.transcript.connection.push(format!("goaway {id}"));
                return;
            }
        };
        self.transcript
            .streams
            .entry(stream)
            .or_default()
            .push(text);
    }

    /// Checks what we wrote: our control stream is SETTINGS then GOAWAY at most once, our
    /// decoder stream whole instructions about request streams.
    fn finish(mut self) -> Transcript {
        // What no step took (a script of no steps, or only skipped ones).
        self.control
            .extend(self.conn.take_output(LocalStream::Control));
        self.encoder
            .extend(self.conn.take_output(LocalStream::QpackEncoder));
        self.decoder
            .extend(self.conn.take_output(LocalStream::QpackDecoder));
        // Our encoder inserts nothing: its stream is its type.
        assert_eq!(self.encoder, [0x02]);
        assert_eq!(self.control.first(), Some(&0x00));
        let mut reader = FrameReader::new(StreamKind::Control, 0);
        let mut at = 1;
        let mut frames = Vec::new();
        while at < self.control.len() {
            let (used, frame) = reader
                .read(&self.control[at..])
                .expect("our control stream");
            assert!(used > 0);
            at += used;
            frames.extend(frame.map(|frame| format!("{frame:?}")));
        }
        assert!(reader.at_frame_boundary());
        assert!(frames[0].starts_with("Settings"));
        let goaways: Vec<_> = frames[1..].iter().collect();
        assert_eq!(goaways.len(), usize::from(self.goaway.is_some()));
        if let Some(id) = self.goaway {
            assert_eq!(goaways[0], &format!("{:?}", Frame::GoAway(id)));
        }

        assert_eq!(self.decoder.first(), Some(&0x03));
        let mut at = 1;
        while let Some(&first) = self.decoder.get(at) {
            let (prefix, list) = match first {
                0x80.. => (7, Some(&mut self.transcript.acknowledged)),
                0x40.. => (6, Some(&mut self.transcript.cancelled)),
                _ => (6, None),
            };
            let value = integer::decode(&self.decoder, &mut at, prefix).expect("an instruction");
            match list {
                Some(list) => {
                    assert_eq!(value % 4, 0, "an instruction about a request stream");
                    list.push(value);
                }
                None => assert!(value > 0, "an Insert Count Increment of zero"),
            }
        }
        self.transcript.acknowledged.sort_unstable();
        self.transcript.cancelled.sort_unstable();
        self.transcript
    }
}

/// Runs `steps`, each `Data` step's bytes in reads of `cut` octets (the FIN with the last).
fn run(config: &Config, steps: &[Step], cut: usize) -> Transcript {
    let mut run = Run::new(config);
    for step in steps {
        match step {
            Step::Data { id, bytes, fin } if bytes.len() > cut => {
                let pieces: Vec<&[u8]> = bytes.chunks(cut).collect();
                for (index, piece) in pieces.iter().enumerate() {
                    run.step(&Step::Data {
                        id: *id,
                        bytes: piece.to_vec(),
                        fin: *fin && index + 1 == pieces.len(),
                    });
                }
            }
            _ => run.step(step),
        }
    }
    run.finish()
}

/// Feeds the script `data` describes (its first octet choosing the limits and whether the
/// valid prelude comes first) to `h3::Connection` whole and in reads of 1 and 5 octets, and
/// checks:
///
/// * nothing panics; once a call fails, every later one fails the same way, with no events;
/// * a request stream's events come in order (head, body, finished; an error ends it), no
///   request is served at or past our GOAWAY's ID, refused streams are unidirectional;
/// * what we write is well formed: our control stream SETTINGS then one GOAWAY at most, our
///   decoder stream whole instructions, each about a request stream;
/// * whether the connection fails does not depend on how the streams' bytes were cut, nor,
///   when it does not, the events and the decoder stream's acknowledgements.
///
/// # Panics
/// Only when an invariant is violated.
pub fn h3_connection(data: &[u8]) {
    let Some((config, steps)) = setup(data) else {
        return;
    };
    let whole = run(&config, &steps, usize::MAX);
    for cut in [1, 5] {
        let pieces = run(&config, &steps, cut);
        match (whole.error, pieces.error) {
            (None, None) => assert_eq!(pieces, whole, "reads of {cut}"),
            // Failed either way, but what came first may depend on the cut: an encoder-stream
            // read that completes a blocked stream's insertions and then holds a malformed
            // instruction fails before the stream is decoded, while octet by octet the stream
            // is decoded (and may fail) first.
            (Some(_), Some(_)) => {}
            (whole, pieces) => panic!("whole: {whole:?}, reads of {cut}: {pieces:?}"),
        }
    }
}

/// The limits and the steps `data` describes.
fn setup(data: &[u8]) -> Option<(Config, Vec<Step>)> {
    let (&choice, rest) = data.split_first()?;
    let config = Config {
        // No table at all only without the prelude, whose insertions it would refuse.
        qpack_max_table_capacity: if choice & 3 == 3 { 0 } else { 256 },
        qpack_blocked_streams: u64::from((choice >> 2) & 3),
        max_field_section_size: 64 << ((choice >> 4) & 3),
        grease: u64::from(choice),
    };
    let mut steps = if choice & 1 == 0 {
        prelude()
    } else {
        Vec::new()
    };
    steps.extend(script(rest));
    Some((config, steps))
}

#[cfg(test)]
mod tests {
    use super::{run, setup};
    use crate::h3::ErrorCode;

    /// Each seed of `fuzz/corpus/h3_connection` reaches what it is named for, so the corpus
    /// starts the fuzzer at every rule rather than at the first error.
    #[test]
    fn the_seeds_reach_what_they_are_named_for() {
        let expected: [(&str, Result<&str, ErrorCode>); 23] = [
            ("blocked_reset", Ok("cancelled [0]")),
            (
                "blocked_then_inserted",
                Ok("0: GET /sample/path|body x|finished acknowledged [0]"),
            ),
            ("control_closed", Err(ErrorCode::ClosedCriticalStream)),
            ("control_reset", Err(ErrorCode::ClosedCriticalStream)),
            ("data_on_control", Err(ErrorCode::FrameUnexpected)),
            (
                "decoder_stream_ack",
                Err(ErrorCode::QpackDecoderStreamError),
            ),
            (
                "dynamic_get",
                Ok("4: GET /sample/path|finished acknowledged [4]"),
            ),
            (
                "encoder_over_capacity",
                Err(ErrorCode::QpackEncoderStreamError),
            ),
            (
                "fin_before_headers",
                Ok("0: error RequestIncomplete 4: GET /|finished cancelled [0]"),
            ),
            ("get", Ok("0: GET /|finished")),
            (
                "goaway",
                Ok("0: GET /|finished 4: error RequestRejected cancelled [4]"),
            ),
            ("headers_after_trailers", Err(ErrorCode::FrameUnexpected)),
            ("missing_settings", Err(ErrorCode::MissingSettings)),
            (
                "opened_then_goaway",
                Ok("4: GET /|finished 8: GET /|finished"),
            ),
            ("post_in_pieces", Ok("0: POST /|body hello|finished")),
            ("push_stream", Err(ErrorCode::StreamCreationError)),
            ("second_control", Err(ErrorCode::StreamCreationError)),
            ("server_stream", Err(ErrorCode::StreamCreationError)),
            ("settings_limits", Ok("0: GET /|finished")),
            ("stop_reading", Ok("0: POST / cancelled [0]")),
            ("too_many_blocked", Err(ErrorCode::QpackDecompressionFailed)),
            ("trailers", Ok("0: POST /|body hello|finished")),
            ("unknown_stream_type", Ok("2: stop")),
        ];
        let corpus = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fuzz/corpus/h3_connection/"
        );
        for (name, outcome) in expected {
            let data = std::fs::read(format!("{corpus}{name}")).unwrap();
            let (config, steps) = setup(&data).unwrap();
            let transcript = run(&config, &steps, usize::MAX);
            let mut said: Vec<String> = transcript
                .streams
                .iter()
                .map(|(stream, lines)| format!("{stream}: {}", lines.join("|")))
                .collect();
            for (what, list) in [
                ("acknowledged", &transcript.acknowledged),
                ("cancelled", &transcript.cancelled),
            ] {
                if !list.is_empty() {
                    said.push(format!("{what} {list:?}"));
                }
            }
            match (outcome, transcript.error) {
                (Err(code), Some(error)) => assert_eq!(error.code, code, "{name}"),
                (Ok(events), None) => assert_eq!(said.join(" "), events, "{name}"),
                (outcome, error) => panic!("{name}: {error:?}, expected {outcome:?}"),
            }
        }
    }
}
