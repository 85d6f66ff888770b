//! Streaming content codings for on-the-fly compression (RFC 9110 §8.4.1): gzip, Brotli
//! (RFC 7932) and zstd (RFC 8878) behind one [`Encoder`] trait. Which codings and types a
//! location compresses is its configuration's (`config::compression`).
//!
//! Owns: making a compressed body from pieces of a plain one, with memory bounded by each
//! codec's window whatever the body's length (no encoder ever holds the whole body).
//! Must not touch: `Accept-Encoding` (`ampd_http::accept` chooses), headers, framing.

mod brotli;
mod gzip;
pub mod policy;
mod zstd;

use std::io::{self, Write};

pub use crate::config::compression::{CompressibleTypes, Encoding, TypePatternError};

impl Encoding {
    /// A new encoder at `level` (clamped to [`Encoding::levels`]).
    ///
    /// # Errors
    /// The codec could not set itself up (zstd's context allocation failed).
    pub fn encoder(self, level: u32) -> io::Result<Box<dyn Encoder>> {
        let range = self.levels();
        let level = level.clamp(*range.start(), *range.end());
        Ok(match self {
            Encoding::Gzip => Box::new(Streaming::new(self, gzip::writer(level))),
            Encoding::Brotli => Box::new(Streaming::new(self, brotli::writer(level))),
            Encoding::Zstd => Box::new(Streaming::new(self, zstd::writer(level)?)),
        })
    }
}

/// A compressor fed a body in pieces. Each call appends to `out` the compressed bytes that are
/// ready; the codec keeps at most its window and a block of input between calls, so memory is
/// bounded whatever the body's length.
pub trait Encoder: Send {
    fn encoding(&self) -> Encoding;

    /// Compresses `input`. Output may lag behind input until the codec fills a block.
    ///
    /// # Errors
    /// After `finish`, or when the codec fails.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()>;

    /// Makes everything fed so far decodable by the client (a streamed response whose source
    /// paused): costs a few bytes of output and some compression.
    ///
    /// # Errors
    /// After `finish`, or when the codec fails.
    fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()>;

    /// Ends the stream (trailer, checksum). Nothing may be fed after it.
    ///
    /// # Errors
    /// A second `finish`, or when the codec fails.
    fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()>;
}

/// What the three codecs' writers share: they compress what is written into a `Vec` of their
/// own, which `Streaming` empties into the caller's `out` after every call (so it never holds
/// more than one call's output), and they end with a trailer.
trait CodecWriter: Write + Send {
    /// The compressed bytes written so far and not yet taken.
    fn written(&mut self) -> &mut Vec<u8>;

    /// Ends the stream and gives back what was not yet taken, trailer included.
    fn end(self) -> io::Result<Vec<u8>>;
}

/// An [`Encoder`] over one codec's writer; `None` once finished.
struct Streaming<W> {
    encoding: Encoding,
    writer: Option<W>,
}

impl<W: CodecWriter> Streaming<W> {
    fn new(encoding: Encoding, writer: W) -> Streaming<W> {
        Streaming {
            encoding,
            writer: Some(writer),
        }
    }

    fn writer(&mut self) -> io::Result<&mut W> {
        self.writer.as_mut().ok_or_else(finished)
    }
}

impl<W: CodecWriter> Encoder for Streaming<W> {
    fn encoding(&self) -> Encoding {
        self.encoding
    }

    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let writer = self.writer()?;
        writer.write_all(input)?;
        out.append(writer.written());
        Ok(())
    }

    fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let writer = self.writer()?;
        writer.flush()?;
        out.append(writer.written());
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let mut rest = self.writer.take().ok_or_else(finished)?.end()?;
        out.append(&mut rest);
        Ok(())
    }
}

/// The error for a call after `finish`.
fn finished() -> io::Error {
    io::Error::other("the compressed stream is already finished")
}

/// Window bits for Brotli and zstd: 512 KiB, as ngx_brotli's default `brotli_window`. A larger
/// window finds few more matches in one response and costs every connection compressing at
/// once its size in memory (zstd's default at level 3 is 2 MiB, Brotli's 4 MiB).
const WINDOW_LOG: u32 = 19;

#[cfg(test)]
mod tests;
