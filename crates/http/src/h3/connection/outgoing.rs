//! Our unidirectional streams (RFC 9114 §6.2.1, RFC 9204 §4.2): the control stream (its
//! type, SETTINGS first, then GOAWAY), the QPACK encoder stream (its type only: our encoder
//! inserts nothing, `qpack/encoder.rs` says why, so the client's QPACK_MAX_TABLE_CAPACITY
//! never matters to it) and the QPACK decoder stream (its type, then what our decoder has to
//! tell the client's encoder).
//!
//! Owns the bytes queued for those streams and the greasing of our SETTINGS and control
//! stream. Must not touch: QUIC (the caller opens the streams and writes the bytes).

use super::peer_streams::CONTROL_STREAM;
use crate::h3::frame::{kind, write_goaway, write_header};
use crate::h3::qpack::{Decoder, DECODER_STREAM, ENCODER_STREAM};
use crate::h3::settings::Settings;
use crate::h3::varint;

/// One of the three streams the server opens on every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalStream {
    Control,
    QpackEncoder,
    QpackDecoder,
}

impl LocalStream {
    pub const ALL: [LocalStream; 3] = [
        LocalStream::Control,
        LocalStream::QpackEncoder,
        LocalStream::QpackDecoder,
    ];
}

#[derive(Debug)]
pub(super) struct Outgoing {
    control: Vec<u8>,
    encoder: Vec<u8>,
    decoder: Vec<u8>,
}

/// The `n`th reserved identifier, for settings, frame types, stream types and error codes
/// alike (§7.2.4.1, §7.2.8, §6.2.3, §8.1: `0x1f * N + 0x21`).
fn reserved(n: u64) -> u64 {
    0x1f * n + 0x21
}

impl Outgoing {
    /// Each stream's type; on the control stream our SETTINGS with a reserved setting among
    /// them, then a frame of a reserved type (§7.2.4.1, §7.2.8: so that peers that refuse
    /// what they should ignore are found out). `grease` picks the reserved values.
    pub(super) fn new(settings: &Settings, grease: u64) -> Outgoing {
        let mut control = Vec::new();
        varint::encode(CONTROL_STREAM, &mut control);
        let mut payload = Vec::new();
        settings.encode(&mut payload);
        varint::encode(reserved(grease & 0xffff), &mut payload);
        varint::encode((grease >> 16) & 0x3fff_ffff, &mut payload);
        write_header(kind::SETTINGS, payload.len() as u64, &mut control);
        control.extend_from_slice(&payload);
        let grease_payload = &grease.to_be_bytes()[..(grease % 4) as usize];
        write_header(
            reserved((grease >> 46) & 0xffff),
            grease_payload.len() as u64,
            &mut control,
        );
        control.extend_from_slice(grease_payload);

        let mut encoder = Vec::new();
        varint::encode(ENCODER_STREAM, &mut encoder);
        let mut decoder = Vec::new();
        varint::encode(DECODER_STREAM, &mut decoder);
        Outgoing {
            control,
            encoder,
            decoder,
        }
    }

    pub(super) fn goaway(&mut self, id: u64) {
        write_goaway(id, &mut self.control);
    }

    pub(super) fn take(&mut self, stream: LocalStream, qpack: &mut Decoder) -> Vec<u8> {
        match stream {
            LocalStream::Control => std::mem::take(&mut self.control),
            LocalStream::QpackEncoder => std::mem::take(&mut self.encoder),
            LocalStream::QpackDecoder => {
                let mut out = std::mem::take(&mut self.decoder);
                out.extend(qpack.take_decoder_stream());
                out
            }
        }
    }

    pub(super) fn has_output(&self, qpack: &Decoder) -> bool {
        !self.control.is_empty()
            || !self.encoder.is_empty()
            || !self.decoder.is_empty()
            || qpack.has_decoder_stream_output()
    }
}
