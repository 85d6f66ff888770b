//! gzip (RFC 1952) through flate2 on zlib-rs: the deflate window is 32 KiB, the state under
//! 300 KiB at any level.

use std::io::{self, Write};

use flate2::write::GzEncoder;
use flate2::Compression;

use super::{finished, Encoder, Encoding};

pub(super) struct Gzip {
    /// Writes into its own `Vec`, emptied into the caller's `out` after every call: it never
    /// holds more than one call's output.
    stream: Option<GzEncoder<Vec<u8>>>,
}

impl Gzip {
    pub(super) fn new(level: u32) -> Gzip {
        Gzip {
            stream: Some(GzEncoder::new(Vec::new(), Compression::new(level))),
        }
    }

    fn stream(&mut self) -> io::Result<&mut GzEncoder<Vec<u8>>> {
        self.stream.as_mut().ok_or_else(finished)
    }
}

impl Encoder for Gzip {
    fn encoding(&self) -> Encoding {
        Encoding::Gzip
    }

    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let stream = self.stream()?;
        stream.write_all(input)?;
        out.append(stream.get_mut());
        Ok(())
    }

    fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let stream = self.stream()?;
        stream.flush()?;
        out.append(stream.get_mut());
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        let mut rest = self.stream.take().ok_or_else(finished)?.finish()?;
        out.append(&mut rest);
        Ok(())
    }
}
