//! The QPACK decoder (RFC 9204 §2.2, §4.3, §4.4, §4.5): one per connection, fed the peer's
//! encoder stream and each request's field section, writing our decoder stream.
//!
//! Owns the dynamic table's copy, blocked streams and the acknowledgements the encoder needs.
//! Must not know what fields mean (`h3::request`) or which stream is which.
//!
//! Limits, as for HPACK: the table is bounded by the capacity we advertise
//! (SETTINGS_QPACK_MAX_TABLE_CAPACITY), the streams that may wait for insertions by
//! SETTINGS_QPACK_BLOCKED_STREAMS, a partial encoder instruction by that capacity, and a section
//! whose decoded list passes the caller's limit stops yielding fields but is decoded to the end,
//! so the table stays in step.

use super::static_table;
use super::table::{DynamicTable, ENTRY_OVERHEAD};
use crate::field_coding::string::{self, Text};
use crate::field_coding::{integer, CodingError};
use crate::h3::error::{Error, ErrorCode};

/// What decoding a field section found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Every field was handed over (or, past the limit, counted).
    Decoded {
        /// The list's size as RFC 9114 §4.2.2 counts it (name + value + 32 per field).
        list_size: usize,
        /// The list passed the caller's limit: the fields after that point were not handed
        /// over (the request gets a 431).
        over_limit: bool,
    },
    /// The section needs insertions not yet received: keep it and decode it again when
    /// `take_unblocked` names its stream.
    Blocked,
}

#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY as we advertised it.
    max_capacity: u64,
    max_blocked: usize,
    /// Streams waiting, with the Required Insert Count each section's prefix gave when it
    /// arrived (decoded then: its encoding wraps, so the same octets read later, with more
    /// insertions, could name another count).
    blocked: Vec<(u64, u64)>,
    /// Streams `take_unblocked` named, whose sections are to be decoded again.
    unblocked: Vec<(u64, u64)>,
    /// An encoder instruction that arrived in part.
    pending: Vec<u8>,
    /// Our decoder stream's bytes not yet taken.
    output: Vec<u8>,
    /// The Insert Count the encoder knows we have (§2.2.2.3).
    known_received: u64,
    scratch: Vec<u8>,
}

/// A malformed field section (§2.2.3, §4.5): the connection ends.
const DECOMPRESSION_FAILED: ErrorCode = ErrorCode::QpackDecompressionFailed;

fn section_error(reason: &'static str) -> Error {
    Error::connection(DECOMPRESSION_FAILED, reason)
}

fn encoder_stream_error(reason: &'static str) -> Error {
    Error::connection(ErrorCode::QpackEncoderStreamError, reason)
}

impl Decoder {
    /// A decoder for what we advertise: at most `max_capacity` octets of table and
    /// `max_blocked` streams waiting for insertions.
    #[must_use]
    pub fn new(max_capacity: u64, max_blocked: u64) -> Decoder {
        Decoder {
            table: DynamicTable::default(),
            max_capacity,
            max_blocked: usize::try_from(max_blocked).unwrap_or(usize::MAX),
            blocked: Vec::new(),
            unblocked: Vec::new(),
            pending: Vec::new(),
            output: Vec::new(),
            known_received: 0,
            scratch: Vec::new(),
        }
    }

    /// Reads the peer's encoder stream (§4.3), in whatever pieces it arrives.
    ///
    /// Stops after the insertion that lets a blocked section be decoded (§2.2.1): the section
    /// must see the table as its encoder meant it, before later instructions evict what it
    /// references (how the bytes were cut must not decide that). What follows is kept: once
    /// `take_unblocked` named the streams and their sections were decoded, call again (with
    /// no new input, or more) to go on.
    ///
    /// # Errors
    /// QPACK_ENCODER_STREAM_ERROR: a capacity above what we advertised, a reference to an
    /// entry that does not exist, an insertion larger than the table, an instruction longer
    /// than any valid one could be.
    pub fn read_encoder_stream(&mut self, input: &[u8]) -> Result<(), Error> {
        self.pending.extend_from_slice(input);
        let mut at = 0;
        while !self.has_unblocked() {
            let mut next = at;
            match self.instruction(&mut next) {
                Ok(()) => at = next,
                Err(Incomplete::Truncated) => break,
                Err(Incomplete::Failed(error)) => return Err(error),
            }
        }
        self.pending.drain(..at);
        // A whole instruction is at most an entry the table can hold plus its framing; while
        // sections wait to be decoded, more may wait behind them.
        let longest = usize::try_from(self.max_capacity)
            .unwrap_or(usize::MAX)
            .saturating_add(2 * 10);
        if !self.has_unblocked() && self.pending.len() > longest {
            return Err(encoder_stream_error(
                "an encoder instruction longer than the table",
            ));
        }
        Ok(())
    }

    /// Whether a blocked section's insertions have all arrived and `take_unblocked` has not
    /// yet named its stream.
    fn has_unblocked(&self) -> bool {
        let inserted = self.table.insert_count();
        self.blocked
            .iter()
            .any(|&(_, required)| required <= inserted)
    }

    /// One encoder instruction at `self.pending[*at]`.
    fn instruction(&mut self, at: &mut usize) -> Result<(), Incomplete> {
        let Some(&first) = self.pending.get(*at) else {
            return Err(Incomplete::Truncated);
        };
        self.scratch.clear();
        let block = &self.pending;
        if first & 0x80 != 0 {
            // Insert With Name Reference (§4.3.2).
            let is_static = first & 0x40 != 0;
            let index = integer::decode(block, at, 6)?;
            let value = string::decode(block, at, 7, &mut self.scratch)?;
            let name: Vec<u8> = if is_static {
                static_table::get(index)
                    .ok_or(encoder_stream_error("an insertion names no static entry"))?
                    .0
                    .to_vec()
            } else {
                let absolute = self
                    .table
                    .insert_count()
                    .checked_sub(index + 1)
                    .ok_or(encoder_stream_error("an insertion names no dynamic entry"))?;
                self.table
                    .get(absolute)
                    .ok_or(encoder_stream_error("an insertion names an evicted entry"))?
                    .0
                    .to_vec()
            };
            let value = value.get(block, &self.scratch).to_vec();
            insert(&mut self.table, &name, &value)
        } else if first & 0x40 != 0 {
            // Insert With Literal Name (§4.3.3).
            let name = string::decode(block, at, 5, &mut self.scratch)?;
            let value = string::decode(block, at, 7, &mut self.scratch)?;
            insert(
                &mut self.table,
                name.get(block, &self.scratch),
                value.get(block, &self.scratch),
            )
        } else if first & 0x20 != 0 {
            // Set Dynamic Table Capacity (§4.3.1).
            let capacity = integer::decode(block, at, 5)?;
            if capacity > self.max_capacity {
                return Err(encoder_stream_error("a table capacity above our maximum").into());
            }
            self.table.set_capacity(capacity as usize);
            Ok(())
        } else {
            // Duplicate (§4.3.4).
            let index = integer::decode(block, at, 5)?;
            let absolute = self
                .table
                .insert_count()
                .checked_sub(index + 1)
                .ok_or(encoder_stream_error("a duplicate of no entry"))?;
            let (name, value) = self
                .table
                .get(absolute)
                .map(|(name, value)| (name.to_vec(), value.to_vec()))
                .ok_or(encoder_stream_error("a duplicate of an evicted entry"))?;
            insert(&mut self.table, &name, &value)
        }
    }

    /// The streams whose sections can now be decoded (their insertions arrived), removed from
    /// the blocked list: the caller decodes each kept section again.
    pub fn take_unblocked(&mut self) -> Vec<u64> {
        let inserted = self.table.insert_count();
        let mut named = Vec::new();
        let unblocked = &mut self.unblocked;
        self.blocked.retain(|&(stream, required)| {
            let ready = required <= inserted;
            if ready {
                named.push(stream);
                unblocked.push((stream, required));
            }
            !ready
        });
        named
    }

    /// A stream was reset or abandoned before its section was decoded (§4.4.2): it no longer
    /// counts as blocked, and the encoder is told.
    pub fn cancel_stream(&mut self, stream: u64) {
        self.blocked.retain(|&(blocked, _)| blocked != stream);
        self.unblocked.retain(|&(unblocked, _)| unblocked != stream);
        if self.max_capacity > 0 {
            integer::encode(stream as usize, 6, 0x40, &mut self.output);
        }
    }

    /// Whether `take_decoder_stream` has anything to give.
    #[must_use]
    pub fn has_decoder_stream_output(&self) -> bool {
        !self.output.is_empty() || self.table.insert_count() > self.known_received
    }

    /// Our decoder stream's bytes to send (§4.4): section acknowledgements and stream
    /// cancellations as they happened, then one Insert Count Increment for the insertions no
    /// acknowledgement has covered.
    pub fn take_decoder_stream(&mut self) -> Vec<u8> {
        let inserted = self.table.insert_count();
        if inserted > self.known_received {
            integer::encode(
                (inserted - self.known_received) as usize,
                6,
                0x00,
                &mut self.output,
            );
            self.known_received = inserted;
        }
        std::mem::take(&mut self.output)
    }

    /// Decodes the field section of a HEADERS frame on `stream`, handing each field to
    /// `field(name, value)` in order until the list passes `max_list_size`.
    ///
    /// # Errors
    /// QPACK_DECOMPRESSION_FAILED for a malformed section, a reference outside the table or
    /// past the Required Insert Count, a Required Insert Count no encoder could have sent, or
    /// more blocked streams than we allow.
    pub fn decode_section(
        &mut self,
        stream: u64,
        block: &[u8],
        max_list_size: usize,
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<Section, Error> {
        let mut at = 0;
        let mut required = self.required_insert_count(block, &mut at)?;
        if let Some(position) = self.unblocked.iter().position(|&(id, _)| id == stream) {
            required = self.unblocked.swap_remove(position).1;
        } else if let Some(&(_, kept)) = self.blocked.iter().find(|&&(id, _)| id == stream) {
            required = kept;
        }
        let sign = *block
            .get(at)
            .ok_or(section_error("a truncated section prefix"))?
            & 0x80;
        let delta = integer::decode(block, &mut at, 7).map_err(from_coding)?;
        let base = if sign == 0 {
            required.checked_add(delta)
        } else {
            required.checked_sub(delta + 1)
        }
        .ok_or(section_error("a negative Base"))?;
        if required > self.table.insert_count() {
            if !self.blocked.iter().any(|&(blocked, _)| blocked == stream) {
                if self.blocked.len() >= self.max_blocked {
                    return Err(section_error("more blocked streams than allowed"));
                }
                self.blocked.push((stream, required));
            }
            return Ok(Section::Blocked);
        }
        let mut lines = Lines {
            table: &self.table,
            required,
            base,
            largest_reference: None,
        };
        let mut list_size = 0usize;
        let mut over_limit = false;
        self.scratch.clear();
        while at < block.len() {
            let (name, value) = lines.next(block, &mut at, &mut self.scratch)?;
            let (name, value) = (
                name.get(block, &self.scratch),
                value.get(block, &self.scratch),
            );
            list_size = list_size.saturating_add(name.len() + value.len() + ENTRY_OVERHEAD);
            over_limit |= list_size > max_list_size;
            if !over_limit {
                field(name, value);
            }
            self.scratch.clear();
        }
        if required > 0 {
            // §4.5.1.1: a Required Insert Count above what the section uses could only come
            // from a broken encoder, and would make us acknowledge insertions we never used.
            if lines.largest_reference.map(|largest| largest + 1) != Some(required) {
                return Err(section_error(
                    "a Required Insert Count the section does not use",
                ));
            }
            integer::encode(stream as usize, 7, 0x80, &mut self.output);
            self.known_received = self.known_received.max(required);
        }
        Ok(Section::Decoded {
            list_size,
            over_limit,
        })
    }

    /// The section's Required Insert Count, from its encoded form (§4.5.1.1).
    fn required_insert_count(&self, block: &[u8], at: &mut usize) -> Result<u64, Error> {
        let encoded = integer::decode(block, at, 8).map_err(from_coding)?;
        if encoded == 0 {
            return Ok(0);
        }
        let max_entries = self.max_capacity / 32;
        let full_range = 2 * max_entries;
        if encoded > full_range {
            return Err(section_error(
                "an encoded Required Insert Count out of range",
            ));
        }
        let max_value = self.table.insert_count() + max_entries;
        let max_wrapped = max_value / full_range * full_range;
        let mut required = max_wrapped + encoded - 1;
        if required > max_value {
            if required <= full_range {
                return Err(section_error(
                    "an encoded Required Insert Count out of range",
                ));
            }
            required -= full_range;
        }
        if required == 0 {
            return Err(section_error("an encoded Required Insert Count of zero"));
        }
        Ok(required)
    }
}

/// An encoder instruction's insertion (§4.3.2–§4.3.4).
fn insert(table: &mut DynamicTable, name: &[u8], value: &[u8]) -> Result<(), Incomplete> {
    table
        .insert(name, value)
        .map_err(|_| encoder_stream_error("an insertion larger than the table").into())
}

/// Reads field lines (§4.5.2–§4.5.6) against the table as the section's prefix set it.
struct Lines<'t> {
    table: &'t DynamicTable,
    required: u64,
    base: u64,
    largest_reference: Option<u64>,
}

/// A name or a value: in the block, in the scratch buffer, or a table's.
enum Part<'t> {
    Text(Text),
    Table(&'t [u8]),
}

impl Part<'_> {
    fn get<'a>(&'a self, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Part::Text(text) => text.get(block, scratch),
            Part::Table(bytes) => bytes,
        }
    }
}

impl<'t> Lines<'t> {
    fn next(
        &mut self,
        block: &[u8],
        at: &mut usize,
        scratch: &mut Vec<u8>,
    ) -> Result<(Part<'t>, Part<'t>), Error> {
        let first = block[*at];
        let coded = |result: Result<Text, CodingError>| result.map(Part::Text).map_err(from_coding);
        if first & 0x80 != 0 {
            // Indexed Field Line (§4.5.2).
            let index = integer::decode(block, at, 6).map_err(from_coding)?;
            let (name, value) = if first & 0x40 != 0 {
                static_entry(index)?
            } else {
                self.relative(index)?
            };
            Ok((Part::Table(name), Part::Table(value)))
        } else if first & 0x40 != 0 {
            // Literal Field Line With Name Reference (§4.5.4).
            let index = integer::decode(block, at, 4).map_err(from_coding)?;
            let name = if first & 0x10 != 0 {
                static_entry(index)?.0
            } else {
                self.relative(index)?.0
            };
            Ok((
                Part::Table(name),
                coded(string::decode(block, at, 7, scratch))?,
            ))
        } else if first & 0x20 != 0 {
            // Literal Field Line With Literal Name (§4.5.6).
            let name = coded(string::decode(block, at, 3, scratch))?;
            Ok((name, coded(string::decode(block, at, 7, scratch))?))
        } else if first & 0x10 != 0 {
            // Indexed Field Line With Post-Base Index (§4.5.3).
            let index = integer::decode(block, at, 4).map_err(from_coding)?;
            let (name, value) = self.post_base(index)?;
            Ok((Part::Table(name), Part::Table(value)))
        } else {
            // Literal Field Line With Post-Base Name Reference (§4.5.5).
            let index = integer::decode(block, at, 3).map_err(from_coding)?;
            let name = self.post_base(index)?.0;
            Ok((
                Part::Table(name),
                coded(string::decode(block, at, 7, scratch))?,
            ))
        }
    }

    fn relative(&mut self, index: u64) -> Result<(&'t [u8], &'t [u8]), Error> {
        let absolute = self
            .base
            .checked_sub(index + 1)
            .ok_or(section_error("a relative index before the Base's start"))?;
        self.dynamic(absolute)
    }

    fn post_base(&mut self, index: u64) -> Result<(&'t [u8], &'t [u8]), Error> {
        let absolute = self
            .base
            .checked_add(index)
            .ok_or(section_error("a post-base index out of range"))?;
        self.dynamic(absolute)
    }

    fn dynamic(&mut self, absolute: u64) -> Result<(&'t [u8], &'t [u8]), Error> {
        if absolute >= self.required {
            return Err(section_error("a reference past the Required Insert Count"));
        }
        self.largest_reference = Some(self.largest_reference.map_or(absolute, |l| l.max(absolute)));
        self.table
            .get(absolute)
            .ok_or(section_error("a reference to an evicted entry"))
    }
}

fn static_entry(index: u64) -> Result<(&'static [u8], &'static [u8]), Error> {
    static_table::get(index).ok_or(section_error("an index past the static table"))
}

fn from_coding(error: CodingError) -> Error {
    section_error(match error {
        CodingError::Truncated => "a truncated field line",
        CodingError::IntegerOverflow => "an integer too large",
        CodingError::BadHuffman => "a malformed Huffman string",
    })
}

/// An encoder instruction that is not whole yet, or one that is wrong.
enum Incomplete {
    Truncated,
    Failed(Error),
}

impl From<CodingError> for Incomplete {
    fn from(error: CodingError) -> Incomplete {
        match error {
            CodingError::Truncated => Incomplete::Truncated,
            CodingError::IntegerOverflow => {
                Incomplete::Failed(encoder_stream_error("an integer too large"))
            }
            CodingError::BadHuffman => {
                Incomplete::Failed(encoder_stream_error("a malformed Huffman string"))
            }
        }
    }
}

impl From<Error> for Incomplete {
    fn from(error: Error) -> Incomplete {
        Incomplete::Failed(error)
    }
}
