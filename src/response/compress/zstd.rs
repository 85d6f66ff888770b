//! zstd (RFC 8878) through the reference C library, with a 512 KiB window and a content
//! checksum (the frame's only integrity check: a client can tell a cut-off body).

use std::io;

use super::{CodecWriter, WINDOW_LOG};

type Stream = ::zstd::stream::write::Encoder<'static, Vec<u8>>;

pub(super) fn writer(level: u32) -> io::Result<Stream> {
    let mut stream = Stream::new(Vec::new(), i32::try_from(level).unwrap_or(3))?;
    stream.window_log(WINDOW_LOG)?;
    stream.include_checksum(true)?;
    Ok(stream)
}

impl CodecWriter for Stream {
    fn written(&mut self) -> &mut Vec<u8> {
        self.get_mut()
    }

    fn end(self) -> io::Result<Vec<u8>> {
        self.finish()
    }
}
