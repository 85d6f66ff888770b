//! The frame layer (RFC 9113 §4, §6): the 9-byte frame header, frame types and flags, and the
//! writers of the frames a server sends.
//!
//! Owns: bytes ↔ frame headers and payload layouts. Must not touch: what a frame means for a
//! stream or the connection (`connection/receive.rs` and `connection/closing.rs` decide).

/// Length of a frame header (RFC 9113 §4.1).
pub const HEADER_LEN: usize = 9;

/// The smallest SETTINGS_MAX_FRAME_SIZE and the initial one (§6.5.2).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;

/// The largest frame payload any peer may allow (2^24 - 1).
pub const MAX_FRAME_SIZE_LIMIT: u32 = (1 << 24) - 1;

/// The flags this implementation reads or writes (§6).
pub mod flags {
    /// DATA, HEADERS: the last frame the sender sends on this stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, CONTINUATION: the header block ends in this frame.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS: a pad length byte and padding surround the payload.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: a stream dependency and weight precede the field block.
    pub const PRIORITY: u8 = 0x20;
}

/// A frame type (§6, §11.2). Unknown types are kept so they can be ignored (§4.1, §5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Data,
    Headers,
    Priority,
    RstStream,
    Settings,
    PushPromise,
    Ping,
    GoAway,
    WindowUpdate,
    Continuation,
    Unknown(u8),
}

impl Kind {
    #[must_use]
    pub fn from_byte(byte: u8) -> Kind {
        match byte {
            0x0 => Kind::Data,
            0x1 => Kind::Headers,
            0x2 => Kind::Priority,
            0x3 => Kind::RstStream,
            0x4 => Kind::Settings,
            0x5 => Kind::PushPromise,
            0x6 => Kind::Ping,
            0x7 => Kind::GoAway,
            0x8 => Kind::WindowUpdate,
            0x9 => Kind::Continuation,
            other => Kind::Unknown(other),
        }
    }

    #[must_use]
    pub fn byte(self) -> u8 {
        match self {
            Kind::Data => 0x0,
            Kind::Headers => 0x1,
            Kind::Priority => 0x2,
            Kind::RstStream => 0x3,
            Kind::Settings => 0x4,
            Kind::PushPromise => 0x5,
            Kind::Ping => 0x6,
            Kind::GoAway => 0x7,
            Kind::WindowUpdate => 0x8,
            Kind::Continuation => 0x9,
            Kind::Unknown(byte) => byte,
        }
    }
}

/// A frame header (§4.1). The reserved bit of the stream identifier is ignored on receipt and
/// sent as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length (24 bits).
    pub length: u32,
    pub kind: Kind,
    pub flags: u8,
    pub stream: u32,
}

impl FrameHeader {
    #[must_use]
    pub fn parse(bytes: &[u8; HEADER_LEN]) -> FrameHeader {
        FrameHeader {
            length: u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]),
            kind: Kind::from_byte(bytes[3]),
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
        }
    }

    #[must_use]
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let length = self.length.to_be_bytes();
        let stream = (self.stream & 0x7fff_ffff).to_be_bytes();
        [
            length[1],
            length[2],
            length[3],
            self.kind.byte(),
            self.flags,
            stream[0],
            stream[1],
            stream[2],
            stream[3],
        ]
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.encode());
    }

    #[must_use]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// The SETTINGS parameters (§6.5.2, RFC 8441 §3 for ENABLE_CONNECT_PROTOCOL).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// The largest flow-control window (§6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// Why a payload does not fit its frame type: the error code of the connection (or stream)
/// error the caller raises.
pub type PayloadResult<T> = Result<T, super::ErrorCode>;

/// The payload of a DATA or HEADERS frame with its padding removed (§6.1, §6.2). `PADDED`
/// means the first byte is the pad length; padding as long as the rest (or longer) is a
/// PROTOCOL_ERROR.
///
/// # Errors
/// `ProtocolError` when the pad length does not fit.
pub fn unpad<'a>(header: &FrameHeader, payload: &'a [u8]) -> PayloadResult<&'a [u8]> {
    if !header.has(flags::PADDED) {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or(super::ErrorCode::FrameSizeError)?;
    let pad = usize::from(pad);
    if pad > rest.len() {
        return Err(super::ErrorCode::ProtocolError);
    }
    Ok(&rest[..rest.len() - pad])
}

/// A stream dependency (§5.3, §6.3): parsed only to refuse a stream that depends on itself;
/// the priority tree itself is deprecated (RFC 9113 §5.3.2) and ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    pub dependency: u32,
    pub exclusive: bool,
    pub weight: u8,
}

impl Priority {
    fn parse(bytes: [u8; 5]) -> Priority {
        let word = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        Priority {
            dependency: word & 0x7fff_ffff,
            exclusive: word & 0x8000_0000 != 0,
            weight: bytes[4],
        }
    }
}

/// A HEADERS payload (§6.2): the optional priority and the field block fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers<'a> {
    pub priority: Option<Priority>,
    pub fragment: &'a [u8],
}

/// Parse a HEADERS payload: padding removed, then the priority fields when flagged.
///
/// # Errors
/// `ProtocolError` for padding that does not fit (§6.2), `FrameSizeError` for a payload too
/// short for its priority fields.
pub fn headers<'a>(header: &FrameHeader, payload: &'a [u8]) -> PayloadResult<Headers<'a>> {
    let body = unpad(header, payload)?;
    if !header.has(flags::PRIORITY) {
        return Ok(Headers {
            priority: None,
            fragment: body,
        });
    }
    let Some((fields, fragment)) = body.split_first_chunk::<5>() else {
        // The padding already used the bytes the priority needs.
        return Err(if header.has(flags::PADDED) {
            super::ErrorCode::ProtocolError
        } else {
            super::ErrorCode::FrameSizeError
        });
    };
    Ok(Headers {
        priority: Some(Priority::parse(*fields)),
        fragment,
    })
}

/// Parse a PRIORITY payload (§6.3).
///
/// # Errors
/// `FrameSizeError` unless it is 5 bytes (a stream error, §6.3).
pub fn priority(payload: &[u8]) -> PayloadResult<Priority> {
    let bytes: [u8; 5] = payload
        .try_into()
        .map_err(|_| super::ErrorCode::FrameSizeError)?;
    Ok(Priority::parse(bytes))
}

/// Parse a RST_STREAM payload (§6.4): its error code.
///
/// # Errors
/// `FrameSizeError` unless it is 4 bytes.
pub fn rst_stream(payload: &[u8]) -> PayloadResult<super::ErrorCode> {
    let bytes: [u8; 4] = payload
        .try_into()
        .map_err(|_| super::ErrorCode::FrameSizeError)?;
    Ok(super::ErrorCode::from_code(u32::from_be_bytes(bytes)))
}

/// The parameters of a SETTINGS payload (§6.5.1), in order (a later repeat wins).
///
/// # Errors
/// `FrameSizeError` when the length is not a multiple of 6.
pub fn settings(payload: &[u8]) -> PayloadResult<impl Iterator<Item = (u16, u32)> + '_> {
    if !payload.len().is_multiple_of(6) {
        return Err(super::ErrorCode::FrameSizeError);
    }
    Ok(payload.chunks_exact(6).map(|entry| {
        (
            u16::from_be_bytes([entry[0], entry[1]]),
            u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]),
        )
    }))
}

/// Parse a PING payload (§6.7): the 8 opaque bytes.
///
/// # Errors
/// `FrameSizeError` unless it is 8 bytes.
pub fn ping(payload: &[u8]) -> PayloadResult<[u8; 8]> {
    payload
        .try_into()
        .map_err(|_| super::ErrorCode::FrameSizeError)
}

/// A GOAWAY payload (§6.8); the debug data is not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoAway {
    pub last_stream: u32,
    pub code: super::ErrorCode,
}

/// Parse a GOAWAY payload.
///
/// # Errors
/// `FrameSizeError` when shorter than 8 bytes.
pub fn go_away(payload: &[u8]) -> PayloadResult<GoAway> {
    let Some((fixed, _debug)) = payload.split_first_chunk::<8>() else {
        return Err(super::ErrorCode::FrameSizeError);
    };
    Ok(GoAway {
        last_stream: u32::from_be_bytes([fixed[0], fixed[1], fixed[2], fixed[3]]) & 0x7fff_ffff,
        code: super::ErrorCode::from_code(u32::from_be_bytes([
            fixed[4], fixed[5], fixed[6], fixed[7],
        ])),
    })
}

/// Parse a WINDOW_UPDATE payload (§6.9): the increment (0 is the caller's PROTOCOL_ERROR).
///
/// # Errors
/// `FrameSizeError` unless it is 4 bytes.
pub fn window_update(payload: &[u8]) -> PayloadResult<u32> {
    let bytes: [u8; 4] = payload
        .try_into()
        .map_err(|_| super::ErrorCode::FrameSizeError)?;
    Ok(u32::from_be_bytes(bytes) & 0x7fff_ffff)
}

fn write_header(out: &mut Vec<u8>, kind: Kind, flags: u8, stream: u32, length: usize) {
    FrameHeader {
        length: u32::try_from(length).expect("a control frame is small"),
        kind,
        flags,
        stream,
    }
    .write(out);
}

/// Append a SETTINGS frame carrying `params`.
pub fn write_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    write_header(out, Kind::Settings, 0, 0, params.len() * 6);
    for &(id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Append a SETTINGS acknowledgement.
pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_header(out, Kind::Settings, flags::ACK, 0, 0);
}

/// Append the PING acknowledgement of `payload`.
pub fn write_ping_ack(out: &mut Vec<u8>, payload: [u8; 8]) {
    write_header(out, Kind::Ping, flags::ACK, 0, 8);
    out.extend_from_slice(&payload);
}

/// Append a GOAWAY without debug data.
pub fn write_go_away(out: &mut Vec<u8>, last_stream: u32, code: super::ErrorCode) {
    write_header(out, Kind::GoAway, 0, 0, 8);
    out.extend_from_slice(&(last_stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&code.code().to_be_bytes());
}

/// Append a RST_STREAM.
pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: super::ErrorCode) {
    write_header(out, Kind::RstStream, 0, stream, 4);
    out.extend_from_slice(&code.code().to_be_bytes());
}

/// Append a WINDOW_UPDATE (`stream` 0: the connection's window).
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_header(out, Kind::WindowUpdate, 0, stream, 4);
    out.extend_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
}

/// The header of a DATA frame of `len` payload bytes.
#[must_use]
pub fn data_header(stream: u32, len: u32, end_stream: bool) -> [u8; HEADER_LEN] {
    FrameHeader {
        length: len,
        kind: Kind::Data,
        flags: if end_stream { flags::END_STREAM } else { 0 },
        stream,
    }
    .encode()
}

/// Frame the field block `out[block_start..]` (already encoded in place) as HEADERS and, past
/// `max_frame_size`, CONTINUATION frames (§6.2, §6.10). `out[block_start - HEADER_LEN..]`
/// must be room reserved for the HEADERS frame header.
pub fn frame_header_block(
    out: &mut Vec<u8>,
    block_start: usize,
    stream: u32,
    end_stream: bool,
    max_frame_size: u32,
) {
    let max = max_frame_size as usize;
    let total = out.len() - block_start;
    let end_flag = if end_stream { flags::END_STREAM } else { 0 };
    if total <= max {
        let header = FrameHeader {
            length: u32::try_from(total).expect("at most max_frame_size"),
            kind: Kind::Headers,
            flags: end_flag | flags::END_HEADERS,
            stream,
        };
        out[block_start - HEADER_LEN..block_start].copy_from_slice(&header.encode());
        return;
    }
    // Rare (a head larger than the client's frame size): split the block, copying its tail.
    let tail = out.split_off(block_start + max);
    let first = FrameHeader {
        length: max_frame_size,
        kind: Kind::Headers,
        flags: end_flag,
        stream,
    };
    out[block_start - HEADER_LEN..block_start].copy_from_slice(&first.encode());
    let mut pieces = tail.chunks(max).peekable();
    while let Some(piece) = pieces.next() {
        let last = pieces.peek().is_none();
        FrameHeader {
            length: u32::try_from(piece.len()).expect("at most max_frame_size"),
            kind: Kind::Continuation,
            flags: if last { flags::END_HEADERS } else { 0 },
            stream,
        }
        .write(out);
        out.extend_from_slice(piece);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h2::ErrorCode;

    #[test]
    fn a_header_round_trips_and_the_reserved_bit_is_dropped() {
        let header = FrameHeader {
            length: 0x01_02_03,
            kind: Kind::Headers,
            flags: flags::END_HEADERS | flags::END_STREAM,
            stream: 0x7fff_ffff,
        };
        assert_eq!(FrameHeader::parse(&header.encode()), header);
        let mut reserved = header.encode();
        reserved[5] |= 0x80;
        assert_eq!(FrameHeader::parse(&reserved).stream, 0x7fff_ffff);
        assert_eq!(Kind::from_byte(0xfe), Kind::Unknown(0xfe));
    }

    fn header(kind: Kind, flags: u8, length: usize) -> FrameHeader {
        FrameHeader {
            length: u32::try_from(length).unwrap(),
            kind,
            flags,
            stream: 1,
        }
    }

    #[test]
    fn padding_is_removed_and_padding_too_long_is_a_protocol_error() {
        let data = header(Kind::Data, flags::PADDED, 6);
        assert_eq!(unpad(&data, &[2, b'a', b'b', b'c', 0, 0]), Ok(&b"abc"[..]));
        assert_eq!(unpad(&data, &[5, 0, 0, 0, 0, 0]), Ok(&b""[..]));
        assert_eq!(
            unpad(&data, &[6, 0, 0, 0, 0, 0]),
            Err(ErrorCode::ProtocolError)
        );
        assert_eq!(unpad(&data, &[]), Err(ErrorCode::FrameSizeError));
        let plain = header(Kind::Data, 0, 2);
        assert_eq!(unpad(&plain, b"hi"), Ok(&b"hi"[..]));
    }

    #[test]
    fn headers_with_priority_and_padding_parse_and_short_ones_fail() {
        let both = header(Kind::Headers, flags::PADDED | flags::PRIORITY, 9);
        let payload = [1, 0x80, 0, 0, 3, 15, 0x82, 0x84, 0];
        let parsed = headers(&both, &payload).unwrap();
        assert_eq!(
            parsed.priority,
            Some(Priority {
                dependency: 3,
                exclusive: true,
                weight: 15
            })
        );
        assert_eq!(parsed.fragment, &[0x82, 0x84]);
        // Padding eating into the priority fields (§6.2).
        assert_eq!(
            headers(&both, &[4, 0, 0, 0, 3, 15]),
            Err(ErrorCode::ProtocolError)
        );
        let short = header(Kind::Headers, flags::PRIORITY, 3);
        assert_eq!(headers(&short, &[0, 0, 1]), Err(ErrorCode::FrameSizeError));
    }

    #[test]
    fn fixed_size_payloads_refuse_other_lengths() {
        assert_eq!(priority(&[0, 0, 0, 1]), Err(ErrorCode::FrameSizeError));
        assert_eq!(rst_stream(&[0, 0, 0, 8]), Ok(ErrorCode::Cancel));
        assert_eq!(rst_stream(&[0, 0, 8]), Err(ErrorCode::FrameSizeError));
        assert_eq!(ping(&[1; 6]), Err(ErrorCode::FrameSizeError));
        assert_eq!(ping(&[7; 8]), Ok([7; 8]));
        assert_eq!(window_update(&[0x80, 0, 0, 1]), Ok(1));
        assert_eq!(window_update(&[0, 0, 1]), Err(ErrorCode::FrameSizeError));
        assert_eq!(go_away(&[0; 7]), Err(ErrorCode::FrameSizeError));
        assert_eq!(
            go_away(&[0, 0, 0, 5, 0, 0, 0, 0xb, b'x']),
            Ok(GoAway {
                last_stream: 5,
                code: ErrorCode::EnhanceYourCalm
            })
        );
        assert!(settings(&[0; 7]).is_err());
        let params: Vec<_> = settings(&[0, 4, 0, 0, 0, 1, 0, 5, 0, 0, 0x40, 0])
            .unwrap()
            .collect();
        assert_eq!(params, [(4, 1), (5, 16_384)]);
    }

    #[test]
    fn writers_produce_frames_the_parsers_read_back() {
        let mut out = Vec::new();
        write_settings(&mut out, &[(setting::MAX_FRAME_SIZE, 16_384)]);
        write_settings_ack(&mut out);
        write_ping_ack(&mut out, [9; 8]);
        write_go_away(&mut out, 7, ErrorCode::ProtocolError);
        write_rst_stream(&mut out, 3, ErrorCode::RefusedStream);
        write_window_update(&mut out, 0, 1000);
        let mut kinds = Vec::new();
        let mut rest = &out[..];
        while !rest.is_empty() {
            let head = FrameHeader::parse(rest[..HEADER_LEN].try_into().unwrap());
            let payload = &rest[HEADER_LEN..HEADER_LEN + head.length as usize];
            match head.kind {
                Kind::GoAway => assert_eq!(go_away(payload).unwrap().last_stream, 7),
                Kind::RstStream => assert_eq!(rst_stream(payload), Ok(ErrorCode::RefusedStream)),
                Kind::WindowUpdate => assert_eq!(window_update(payload), Ok(1000)),
                Kind::Ping => assert!(head.has(flags::ACK) && payload == [9; 8]),
                _ => {}
            }
            kinds.push((head.kind, head.flags));
            rest = &rest[HEADER_LEN + head.length as usize..];
        }
        assert_eq!(
            kinds,
            [
                (Kind::Settings, 0),
                (Kind::Settings, flags::ACK),
                (Kind::Ping, flags::ACK),
                (Kind::GoAway, 0),
                (Kind::RstStream, 0),
                (Kind::WindowUpdate, 0)
            ]
        );
    }

    #[test]
    fn a_block_larger_than_the_frame_size_is_split_into_continuations() {
        let mut out = vec![0; HEADER_LEN];
        out.extend((0..40u8).collect::<Vec<_>>());
        frame_header_block(&mut out, HEADER_LEN, 5, true, 16);
        let mut frames = Vec::new();
        let mut block = Vec::new();
        let mut rest = &out[..];
        while !rest.is_empty() {
            let head = FrameHeader::parse(rest[..HEADER_LEN].try_into().unwrap());
            block.extend_from_slice(&rest[HEADER_LEN..HEADER_LEN + head.length as usize]);
            frames.push((head.kind, head.flags, head.length));
            rest = &rest[HEADER_LEN + head.length as usize..];
        }
        assert_eq!(block, (0..40u8).collect::<Vec<_>>());
        assert_eq!(
            frames,
            [
                (Kind::Headers, flags::END_STREAM, 16),
                (Kind::Continuation, 0, 16),
                (Kind::Continuation, flags::END_HEADERS, 8)
            ]
        );
        let mut small = vec![0; HEADER_LEN];
        small.extend_from_slice(&[0x88]);
        frame_header_block(&mut small, HEADER_LEN, 1, false, 16_384);
        assert_eq!(
            FrameHeader::parse(small[..HEADER_LEN].try_into().unwrap()),
            FrameHeader {
                length: 1,
                kind: Kind::Headers,
                flags: flags::END_HEADERS,
                stream: 1
            }
        );
    }
}
