//! On-the-fly compression as a body filter: the one decision every response takes
//! (`response::compress::policy`, which marks the head), then the chosen coding's streaming
//! encoder over the body's pieces.

use std::io;

use super::{BodyFilter, Facts};
use crate::response::compress::policy::{decide, decide_and_mark, Decision, Wanted};
use crate::response::compress::Encoder;
use crate::response::Head;

/// The compression filter for a response, if the location, the request and the head call for
/// one; `head` is marked either way (`Vary` for a compressible response).
pub(super) fn select(
    facts: &Facts<'_>,
    head: &mut Head,
    length: Option<u64>,
) -> Option<Box<dyn BodyFilter>> {
    let settings = &facts.location.compression;
    let wanted = Wanted {
        accept_encoding: facts.request.header("accept-encoding"),
        range: facts.request.header("range").is_some(),
    };
    // The encoder first: should the codec fail to set itself up (zstd's context allocation),
    // the response goes out as it came, its head unmarked, rather than announce a coding
    // nothing will produce.
    let encoder = match decide(settings, wanted, head, length) {
        Decision::Compress(encoding, level) => Some(encoding.encoder(level).ok()?),
        Decision::Identity | Decision::Untouched => None,
    };
    decide_and_mark(settings, wanted, head, length);
    encoder.map(|encoder| Box::new(Compressing(encoder)) as Box<dyn BodyFilter>)
}

/// A response body on its way through an encoder.
pub(super) struct Compressing(pub(super) Box<dyn Encoder>);

impl BodyFilter for Compressing {
    fn name(&self) -> &'static str {
        self.0.encoding().token()
    }

    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        self.0.feed(input, out)
    }

    fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.0.flush(out)
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.0.finish(out)
    }
}
