//! Fuzz checks of HTTP/3's frame layer (`crate::h3::frame`), QPACK (`crate::h3::qpack`) and
//! the request stream (`crate::h3::request_stream`).
//!
//! Owns those invariants. Must not be used by the server; every check panics on violation.

use crate::h3::frame::{Frame, FrameReader, StreamKind};
use crate::h3::qpack::{Decoder, Encoder, Section};
use crate::h3::request_stream::{Event, RequestError, RequestStream};
use crate::h3::Error;
use crate::message::{BodyFraming, Version};

/// What reading a stream found: its frames (DATA joined per frame) and how it ended.
type Reading = (Vec<String>, Result<bool, Error>);

/// Reads `input` as one stream in reads of `step` octets; the result says whether the stream
/// ended at a frame boundary.
fn read_stream(stream: StreamKind, input: &[u8], step: usize) -> Reading {
    let mut reader = FrameReader::new(stream, 256);
    let mut frames: Vec<String> = Vec::new();
    let mut start = 0;
    let mut end = 0;
    let mut data_left = 0u64;
    loop {
        end = (end + step).min(input.len());
        loop {
            let (used, frame) = match reader.read(&input[start..end]) {
                Ok(step) => step,
                Err(error) => return (frames, Err(error)),
            };
            assert!(used <= end - start, "used {used} of {}", end - start);
            start += used;
            match frame {
                Some(Frame::DataBegins { length }) => {
                    assert_eq!(data_left, 0, "a DATA frame began inside another");
                    data_left = length;
                    frames.push(format!("data {length}:"));
                }
                Some(Frame::Data(piece)) => {
                    assert!(!piece.is_empty() && piece.len() as u64 <= data_left);
                    data_left -= piece.len() as u64;
                    let text: String = piece.iter().map(|byte| format!("{byte:02x}")).collect();
                    frames
                        .last_mut()
                        .expect("DATA begins first")
                        .push_str(&text);
                }
                Some(other) => frames.push(format!("{other:?}")),
                None if used == 0 => break,
                None => {}
            }
        }
        if end == input.len() {
            return (frames, Ok(reader.at_frame_boundary()));
        }
    }
}

/// Reads `data` (its first octet choosing a control or a request stream) whole and in reads
/// of several sizes, checking that the frames, the error and whether the stream ended at a
/// frame boundary do not depend on how the bytes arrived, that a reader never uses more than
/// it was given, and that DATA pieces add up to their frame's length.
///
/// # Panics
/// Only when an invariant is violated.
pub fn h3_frames(data: &[u8]) {
    let Some((&first, input)) = data.split_first() else {
        return;
    };
    let stream = if first & 1 == 0 {
        StreamKind::Request
    } else {
        StreamKind::Control
    };
    let whole = read_stream(stream, input, input.len().max(1));
    for step in [1, 2, 3, 7, 64] {
        assert_eq!(read_stream(stream, input, step), whole, "reads of {step}");
    }
}

/// The table capacity and blocked streams the fuzzed decoder advertises: small, so eviction
/// and blocking happen often.
const TABLE_CAPACITY: u64 = 256;
const BLOCKED_STREAMS: u64 = 2;
const MAX_LIST_SIZE: usize = 512;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Reads `data` as QPACK input, a sequence of chunks each a length octet then that many bytes:
/// an odd length is encoder stream data, an even one a field section for the next stream. It
/// checks:
///
/// * nothing panics; an error ends the connection (decoding stops);
/// * the encoder stream read byte by byte gives the same outcome as read in chunks;
/// * a blocked section decodes once `take_unblocked` names its stream, against the table its
///   insertions made (the decoder stops reading the encoder stream there until it is);
/// * a section decoded within the limit, encoded again by our `Encoder`, decodes to the same
///   list.
///
/// # Panics
/// Only when an invariant is violated.
pub fn qpack_decode(data: &[u8]) {
    let mut chunked = Decoder::new(TABLE_CAPACITY, BLOCKED_STREAMS);
    let mut bytewise = Decoder::new(TABLE_CAPACITY, BLOCKED_STREAMS);
    let mut waiting: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut stream = 0u64;
    let mut rest = data;
    while let Some((&len, after)) = rest.split_first() {
        let take = usize::from(len).min(after.len());
        let (chunk, next) = after.split_at(take);
        rest = next;
        if len % 2 == 1 {
            let chunked_result = chunked.read_encoder_stream(chunk);
            let mut bytewise_result = Ok(());
            for byte in chunk {
                bytewise_result = bytewise.read_encoder_stream(std::slice::from_ref(byte));
                if bytewise_result.is_err() {
                    break;
                }
            }
            assert_eq!(chunked_result, bytewise_result, "encoder stream in pieces");
            if chunked_result.is_err() {
                return;
            }
            // The decoder stops after the insertions a blocked section waited for: decode it,
            // then let the decoder go on with what followed.
            loop {
                let unblocked = chunked.take_unblocked();
                assert_eq!(unblocked, bytewise.take_unblocked());
                if unblocked.is_empty() {
                    break;
                }
                for id in unblocked {
                    let position = waiting.iter().position(|(waiting_id, _)| *waiting_id == id);
                    let (_, block) =
                        waiting.remove(position.expect("an unblocked stream was waiting"));
                    let section = decode(&mut chunked, id, &block);
                    assert_eq!(section, decode(&mut bytewise, id, &block));
                    match section {
                        Ok((Section::Blocked, _)) => {
                            panic!("stream {id} unblocked but still blocked")
                        }
                        Ok((_, fields)) => check_round_trip(&fields),
                        Err(_) => return,
                    }
                }
                let going_on = chunked.read_encoder_stream(&[]);
                assert_eq!(going_on, bytewise.read_encoder_stream(&[]));
                if going_on.is_err() {
                    return;
                }
            }
        } else {
            let id = stream;
            stream += 4;
            let section = decode(&mut chunked, id, chunk);
            assert_eq!(section, decode(&mut bytewise, id, chunk));
            match section {
                Ok((Section::Blocked, _)) => waiting.push((id, chunk.to_vec())),
                Ok((
                    Section::Decoded {
                        over_limit: false, ..
                    },
                    fields,
                )) => check_round_trip(&fields),
                Ok(_) => {}
                Err(_) => return,
            }
        }
        assert_eq!(
            chunked.take_decoder_stream(),
            bytewise.take_decoder_stream()
        );
    }
}

fn decode(decoder: &mut Decoder, stream: u64, block: &[u8]) -> Result<(Section, Fields), Error> {
    let mut fields = Vec::new();
    let section = decoder.decode_section(stream, block, MAX_LIST_SIZE, &mut |name, value| {
        fields.push((name.to_vec(), value.to_vec()));
    })?;
    Ok((section, fields))
}

fn check_round_trip(fields: &Fields) {
    let mut block = Vec::new();
    Encoder::new().encode_section(
        fields.iter().map(|(name, value)| (&name[..], &value[..])),
        &mut block,
    );
    let mut fresh = Decoder::new(0, 0);
    let (section, again) = decode(&mut fresh, 0, &block).expect("our own section decodes");
    assert!(matches!(section, Section::Decoded { .. }));
    assert_eq!(&again, fields, "re-encoded section");
}

/// One request stream and its connection's decoder, fed as `h3_request_stream` says, with
/// what it yielded written down.
struct RequestRun {
    decoder: Decoder,
    stream: RequestStream,
    /// Request-stream octets not yet used (a blocked stream uses none).
    pending: Vec<u8>,
    /// Octets handed to `read` at a time.
    step: usize,
    transcript: Vec<String>,
    head_seen: bool,
    trailers_seen: bool,
    content_length: Option<u64>,
    body_length: u64,
    /// The error the stream or connection ended with; nothing is read after it.
    failed: bool,
}

impl RequestRun {
    fn new(step: usize) -> RequestRun {
        RequestRun {
            decoder: Decoder::new(TABLE_CAPACITY, BLOCKED_STREAMS),
            stream: RequestStream::new(0, MAX_LIST_SIZE),
            pending: Vec::new(),
            step,
            transcript: Vec::new(),
            head_seen: false,
            trailers_seen: false,
            content_length: None,
            body_length: 0,
            failed: false,
        }
    }

    fn fail(&mut self, error: &RequestError) {
        self.transcript.push(format!("error {error:?}"));
        self.failed = true;
    }

    fn note(&mut self, event: Event<'_>) {
        match event {
            Event::Head(head) => {
                assert!(!self.head_seen, "a second head");
                assert_eq!(head.version, Version::Http3);
                for header in &head.headers {
                    assert!(
                        !header.name.bytes().any(|b| b.is_ascii_uppercase()),
                        "an upper-case name passed: {}",
                        header.name
                    );
                }
                self.head_seen = true;
                self.content_length = match head.body {
                    BodyFraming::Length(length) => Some(length),
                    _ => None,
                };
                self.transcript.push(format!("{head:?}"));
            }
            Event::Body(piece) => {
                assert!(self.head_seen && !self.trailers_seen, "body out of order");
                assert!(!piece.is_empty());
                self.body_length += piece.len() as u64;
                if let Some(declared) = self.content_length {
                    assert!(
                        self.body_length <= declared,
                        "more body than content-length"
                    );
                }
                let text: String = piece.iter().map(|byte| format!("{byte:02x}")).collect();
                match self.transcript.last_mut() {
                    Some(last) if last.starts_with("body ") => last.push_str(&text),
                    _ => self.transcript.push(format!("body {text}")),
                }
            }
            Event::Trailers(fields) => {
                assert!(
                    self.head_seen && !self.trailers_seen,
                    "trailers out of order"
                );
                self.trailers_seen = true;
                self.transcript.push(format!("trailers {fields:?}"));
            }
        }
    }

    /// Reads what is pending, `step` octets at a time, until the stream uses no more.
    fn drain(&mut self) {
        let mut start = 0;
        let mut end = 0usize;
        while !self.failed {
            end = end
                .saturating_add(self.step)
                .min(self.pending.len())
                .max(start);
            let input = std::mem::take(&mut self.pending);
            let result = self.stream.read(&mut self.decoder, &input[start..end]);
            match result {
                Ok((used, event)) => {
                    assert!(used <= end - start, "used {used} of {}", end - start);
                    if self.stream.is_blocked() {
                        assert!(event.is_none());
                    }
                    start += used;
                    let stop = used == 0 && (end == input.len() || self.stream.is_blocked());
                    if let Some(event) = event {
                        self.note(event);
                    }
                    self.pending = input;
                    if stop {
                        break;
                    }
                }
                Err(error) => {
                    self.pending = input;
                    self.fail(&error);
                }
            }
        }
        self.pending.drain(..start.min(self.pending.len()));
    }

    fn request_bytes(&mut self, chunk: &[u8]) {
        self.pending.extend_from_slice(chunk);
        self.drain();
    }

    fn encoder_bytes(&mut self, chunk: &[u8]) {
        if self.failed {
            return;
        }
        if let Err(error) = self.decoder.read_encoder_stream(chunk) {
            self.fail(&RequestError::Protocol(error));
            return;
        }
        // The decoder stops after the insertions the section waited for; it goes on once
        // the section is decoded.
        while self.decoder.take_unblocked().contains(&0) {
            match self.stream.resume(&mut self.decoder) {
                Ok(Some(event)) => self.note(event),
                Ok(None) => panic!("an unblocked stream gave nothing"),
                Err(error) => return self.fail(&error),
            }
            self.drain();
            if self.failed {
                return;
            }
            if let Err(error) = self.decoder.read_encoder_stream(&[]) {
                return self.fail(&RequestError::Protocol(error));
            }
        }
    }

    fn end(&mut self) {
        if self.failed {
            return;
        }
        match self.stream.end() {
            Ok(true) => {
                assert!(self.head_seen, "a request ended without a head");
                if let Some(declared) = self.content_length {
                    assert_eq!(self.body_length, declared, "body shorter than declared");
                }
                self.transcript.push("end".into());
            }
            Ok(false) => {
                assert!(self.stream.is_blocked());
                self.stream.abandon(&mut self.decoder);
                self.transcript.push("abandoned".into());
            }
            Err(error) => self.fail(&error),
        }
    }
}

/// Reads `data` as one request stream (id 0) and the peer's QPACK encoder stream interleaved:
/// chunks of a length octet then that many bytes, an odd length for the encoder stream, an even
/// one for the request stream; then the stream ends. It checks:
///
/// * the events and the error do not depend on how the request stream's bytes arrive;
/// * events come in order (one head, then body, then at most one trailer section), the head
///   is HTTP/3 with lower-case names;
/// * the body never passes `content-length`, and a request that ends well has exactly it;
/// * a blocked stream uses no input and yields nothing until its insertions arrive.
///
/// # Panics
/// Only when an invariant is violated.
pub fn h3_request_stream(data: &[u8]) {
    let mut runs: Vec<RequestRun> = [usize::MAX, 1, 3].map(RequestRun::new).into();
    let mut rest = data;
    while let Some((&len, after)) = rest.split_first() {
        let take = usize::from(len).min(after.len());
        let (chunk, next) = after.split_at(take);
        rest = next;
        for run in &mut runs {
            if len % 2 == 1 {
                run.encoder_bytes(chunk);
            } else {
                run.request_bytes(chunk);
            }
        }
    }
    for run in &mut runs {
        run.end();
    }
    for run in &runs[1..] {
        assert_eq!(run.transcript, runs[0].transcript, "reads of {}", run.step);
    }
}
