//! Brotli (RFC 7932) through the pure-Rust `brotli` encoder, with a 512 KiB window.

use std::io::{self, Write};

use brotli::CompressorWriter;

use super::{finished, Encoder, Encoding, WINDOW_LOG};

/// The encoder's own output block before it writes to its sink.
const BLOCK: usize = 16 << 10;

pub(super) struct Brotli {
    stream: Option<CompressorWriter<Vec<u8>>>,
}

impl Brotli {
    pub(super) fn new(level: u32) -> Brotli {
        Brotli {
            stream: Some(CompressorWriter::new(Vec::new(), BLOCK, level, WINDOW_LOG)),
        }
    }

    fn stream(&mut self) -> io::Result<&mut CompressorWriter<Vec<u8>>> {
        self.stream.as_mut().ok_or_else(finished)
    }
}

impl Encoder for Brotli {
    fn encoding(&self) -> Encoding {
        Encoding::Brotli
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
        // `into_inner` writes the last meta-block; its sink is a `Vec`, which cannot fail.
        let mut rest = self.stream.take().ok_or_else(finished)?.into_inner();
        out.append(&mut rest);
        Ok(())
    }
}
