//! zstd (RFC 8878) through the reference C library, with a 512 KiB window and a content
//! checksum (the frame's only integrity check: a client can tell a cut-off body).

use std::io::{self, Write};

use super::{finished, Encoder, Encoding, WINDOW_LOG};

type Stream = ::zstd::stream::write::Encoder<'static, Vec<u8>>;

pub(super) struct Zstd {
    stream: Option<Stream>,
}

impl Zstd {
    pub(super) fn new(level: u32) -> io::Result<Zstd> {
        let mut stream = Stream::new(Vec::new(), i32::try_from(level).unwrap_or(3))?;
        stream.window_log(WINDOW_LOG)?;
        stream.include_checksum(true)?;
        Ok(Zstd {
            stream: Some(stream),
        })
    }

    fn stream(&mut self) -> io::Result<&mut Stream> {
        self.stream.as_mut().ok_or_else(finished)
    }
}

impl Encoder for Zstd {
    fn encoding(&self) -> Encoding {
        Encoding::Zstd
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
