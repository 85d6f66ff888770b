//! Brotli (RFC 7932) through the pure-Rust `brotli` encoder, with a 512 KiB window.

use std::io;

use brotli::CompressorWriter;

use super::{CodecWriter, WINDOW_LOG};

/// The encoder's own output block before it writes to its sink.
const BLOCK: usize = 16 << 10;

pub(super) fn writer(level: u32) -> CompressorWriter<Vec<u8>> {
    CompressorWriter::new(Vec::new(), BLOCK, level, WINDOW_LOG)
}

impl CodecWriter for CompressorWriter<Vec<u8>> {
    fn written(&mut self) -> &mut Vec<u8> {
        self.get_mut()
    }

    fn end(self) -> io::Result<Vec<u8>> {
        // `into_inner` writes the last meta-block; its sink is a `Vec`, which cannot fail.
        Ok(self.into_inner())
    }
}
