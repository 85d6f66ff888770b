//! The frame layer (RFC 9113 §4, §6): the 9-byte frame header, frame types and flags, and the
//! writers of the frames a server sends.
//!
//! Owns: bytes ↔ frame headers and payload layouts. Must not touch: what a frame means for a
//! stream or the connection (`connection.rs` decides).

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
