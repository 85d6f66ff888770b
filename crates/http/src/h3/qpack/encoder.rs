//! The QPACK encoder (RFC 9204 §2.1, §4.4, §4.5) for our responses: the static table and
//! literals, never the dynamic table.
//!
//! Owns the field sections we send and the reading of the peer's decoder stream. Must not know
//! what fields mean.
//!
//! Why no dynamic table: a response head is mostly fields the static table has whole (`:status
//! 200`, common types) or by name, and the values that would gain from insertion (dates,
//! lengths, ETags) change from response to response. Inserting also means tracking which
//! entries unacknowledged sections still reference, and blocking streams at the peer. The
//! dynamic table is for when a measurement shows it pays.

use super::static_table::{self, Match};
use crate::field_coding::{integer, string, CodingError};
use crate::h3::error::{Error, ErrorCode};

#[derive(Debug, Default)]
pub struct Encoder {
    /// A decoder instruction that arrived in part.
    pending: Vec<u8>,
}

/// The longest decoder instruction: one integer (a stream ID or an increment, at most 2^62).
const LONGEST_INSTRUCTION: usize = 10;

fn decoder_stream_error(reason: &'static str) -> Error {
    Error::connection(ErrorCode::QpackDecoderStreamError, reason)
}

impl Encoder {
    #[must_use]
    pub fn new() -> Encoder {
        Encoder::default()
    }

    /// Appends the field section of `fields` (lowercase names) to `out`.
    pub fn encode_section<'f>(
        &self,
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
        out: &mut Vec<u8>,
    ) {
        // Required Insert Count 0 and Base 0 (§4.5.1): nothing refers to the dynamic table.
        out.extend_from_slice(&[0x00, 0x00]);
        for (name, value) in fields {
            match static_table::find(name, value) {
                // Indexed Field Line, static (§4.5.2): 1 T=1 index(6).
                Match::Field(index) => integer::encode(index as usize, 6, 0xc0, out),
                // Literal With Name Reference, static, N=0 (§4.5.4): 01 N T=1 index(4).
                Match::Name(index) => {
                    integer::encode(index as usize, 4, 0x50, out);
                    string::encode(value, 7, 0x00, out);
                }
                // Literal With Literal Name, N=0 (§4.5.6): 001 N H name(3).
                Match::None => {
                    string::encode(name, 3, 0x20, out);
                    string::encode(value, 7, 0x00, out);
                }
            }
        }
    }

    /// Reads the peer's decoder stream (§4.4), in whatever pieces it arrives.
    ///
    /// # Errors
    /// QPACK_DECODER_STREAM_ERROR: a Section Acknowledgment or an Insert Count Increment, since
    /// no section of ours refers to the dynamic table and we insert nothing (§4.4.1, §4.4.3);
    /// a malformed integer.
    pub fn read_decoder_stream(&mut self, input: &[u8]) -> Result<(), Error> {
        self.pending.extend_from_slice(input);
        let mut at = 0;
        while let Some(&first) = self.pending.get(at) {
            let mut next = at;
            let prefix = if first & 0x80 != 0 { 7 } else { 6 };
            match integer::decode(&self.pending, &mut next, prefix) {
                Ok(value) => {
                    if first & 0x80 != 0 {
                        return Err(decoder_stream_error(
                            "a Section Acknowledgment of a section that needs none",
                        ));
                    }
                    if first & 0x40 == 0 {
                        return Err(decoder_stream_error(if value == 0 {
                            "an Insert Count Increment of zero"
                        } else {
                            "an Insert Count Increment past our insertions"
                        }));
                    }
                    // Stream Cancellation (§4.4.2): nothing of that stream is outstanding.
                    at = next;
                }
                Err(CodingError::Truncated) => break,
                Err(_) => return Err(decoder_stream_error("an integer too large")),
            }
        }
        self.pending.drain(..at);
        if self.pending.len() > LONGEST_INSTRUCTION {
            return Err(decoder_stream_error("a decoder instruction too long"));
        }
        Ok(())
    }
}
