//! Streaming content codings for on-the-fly compression (RFC 9110 §8.4.1): gzip, Brotli
//! (RFC 7932) and zstd (RFC 8878) behind one [`Encoder`] trait, their levels, and which
//! `Content-Type`s are worth compressing ([`CompressibleTypes`]).
//! Not wired into responses yet: the response stage (issue 30, step 1) will run these.
//!
//! Owns: making a compressed body from pieces of a plain one, with memory bounded by each
//! codec's window whatever the body's length (no encoder ever holds the whole body).
//! Must not touch: `Accept-Encoding` (`ampd_http::accept` chooses), headers, framing.

mod brotli;
mod gzip;
mod types;
mod zstd;

use std::io::{self, Write};

pub use types::{CompressibleTypes, TypePatternError};

/// A content coding ampd can produce on the fly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    Gzip,
    Brotli,
    Zstd,
}

impl Encoding {
    pub const ALL: [Encoding; 3] = [Encoding::Brotli, Encoding::Zstd, Encoding::Gzip];

    /// The token in `Accept-Encoding` and `Content-Encoding`.
    #[must_use]
    pub fn token(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Brotli => "br",
            Encoding::Zstd => "zstd",
        }
    }

    #[must_use]
    pub fn from_token(token: &str) -> Option<Encoding> {
        Encoding::ALL
            .into_iter()
            .find(|encoding| encoding.token().eq_ignore_ascii_case(token))
    }

    /// The levels the codec takes, lowest (fastest) to highest.
    #[must_use]
    pub fn levels(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Encoding::Gzip => 1..=9,
            Encoding::Brotli => 0..=11,
            Encoding::Zstd => 1..=19,
        }
    }

    /// The level used unless configured: where each codec's speed still keeps up with a
    /// server's output. gzip 5 as Caddy (nginx users mostly set `gzip_comp_level` 4-6; above 6
    /// zlib spends twice the time for about 1 % smaller output); Brotli 4, the densest level
    /// faster than gzip 5 (5 and above switch to a far slower block splitter); zstd 3, the
    /// library's own default, faster than gzip 1 and denser than gzip 9 on text.
    #[must_use]
    pub fn default_level(self) -> u32 {
        match self {
            Encoding::Gzip => 5,
            Encoding::Brotli => 4,
            Encoding::Zstd => 3,
        }
    }

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
