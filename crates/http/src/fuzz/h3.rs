//! Fuzz checks of HTTP/3's frame layer (`crate::h3::frame`) and QPACK (`crate::h3::qpack`).
//!
//! Owns those invariants. Must not be used by the server; every check panics on violation.

use crate::h3::frame::{Frame, FrameReader, StreamKind};
use crate::h3::qpack::{Decoder, Encoder, Section};
use crate::h3::Error;

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
/// * a blocked section decodes once `take_unblocked` names its stream;
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
            let unblocked = chunked.take_unblocked();
            assert_eq!(unblocked, bytewise.take_unblocked());
            for id in unblocked {
                let position = waiting.iter().position(|(waiting_id, _)| *waiting_id == id);
                let (_, block) = waiting.remove(position.expect("an unblocked stream was waiting"));
                let section = decode(&mut chunked, id, &block);
                assert_eq!(section, decode(&mut bytewise, id, &block));
                match section {
                    Ok((Section::Blocked, _)) => panic!("stream {id} unblocked but still blocked"),
                    Ok((_, fields)) => check_round_trip(&fields),
                    Err(_) => return,
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
