//! gzip (RFC 1952) through flate2 on zlib-rs: the deflate window is 32 KiB, the state under
//! 300 KiB at any level.

use std::io;

use flate2::write::GzEncoder;
use flate2::Compression;

use super::CodecWriter;

pub(super) fn writer(level: u32) -> GzEncoder<Vec<u8>> {
    GzEncoder::new(Vec::new(), Compression::new(level))
}

impl CodecWriter for GzEncoder<Vec<u8>> {
    fn written(&mut self) -> &mut Vec<u8> {
        self.get_mut()
    }

    fn end(self) -> io::Result<Vec<u8>> {
        self.finish()
    }
}
