use std::io::{self, Read};

use super::*;
use crate::config::compression::Encoding;

/// A filter that upper-cases ASCII (to see a chain's order) and counts its flushes.
struct Upper {
    flushes: usize,
}

impl BodyFilter for Upper {
    fn name(&self) -> &'static str {
        "upper"
    }

    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        out.extend(input.iter().map(u8::to_ascii_uppercase));
        Ok(())
    }

    fn flush(&mut self, _out: &mut Vec<u8>) -> io::Result<()> {
        self.flushes += 1;
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        out.extend_from_slice(b"!");
        Ok(())
    }
}

fn gzip_stage(with_upper: bool) -> BodyStage {
    let mut filters: Vec<Box<dyn BodyFilter>> = Vec::new();
    if with_upper {
        filters.push(Box::new(Upper { flushes: 0 }));
    }
    filters.push(Box::new(compress::Compressing(
        Encoding::Gzip.encoder(5).unwrap(),
    )));
    BodyStage {
        filters,
        unflushed: false,
        between: Vec::new(),
    }
}

fn gunzip_prefix(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    // A flushed, unfinished stream decodes up to where it was flushed, then ends early.
    let _ = flate2::read::GzDecoder::new(bytes).read_to_end(&mut out);
    out
}

#[test]
fn a_pause_makes_what_was_fed_decodable_and_the_end_finishes_the_stream() {
    let mut stage = gzip_stage(false);
    assert!(stage.is_active());
    let mut out = Vec::new();
    stage.feed(b"data: first event\n\n", &mut out).unwrap();
    stage.pause(&mut out).unwrap();
    assert_eq!(gunzip_prefix(&out), b"data: first event\n\n");
    let flushed = out.len();
    stage.pause(&mut out).unwrap();
    assert_eq!(out.len(), flushed, "nothing fed since: nothing owed");
    stage.feed(b"data: second\n\n", &mut out).unwrap();
    stage.finish(&mut out).unwrap();
    let mut whole = Vec::new();
    flate2::read::GzDecoder::new(&out[..])
        .read_to_end(&mut whole)
        .unwrap();
    assert_eq!(whole, b"data: first event\n\ndata: second\n\n");
}

#[test]
fn a_chain_runs_in_registry_order_and_ends_each_filter_in_turn() {
    let mut stage = gzip_stage(true);
    let mut out = Vec::new();
    stage.feed(b"abc", &mut out).unwrap();
    stage.pause(&mut out).unwrap();
    stage.feed(b"def", &mut out).unwrap();
    stage.finish(&mut out).unwrap();
    let mut whole = Vec::new();
    flate2::read::GzDecoder::new(&out[..])
        .read_to_end(&mut whole)
        .unwrap();
    assert_eq!(whole, b"ABCDEF!");
}

#[test]
fn no_filter_passes_the_body_as_it_is() {
    let mut stage = BodyStage::default();
    assert!(!stage.is_active());
    let mut out = Vec::new();
    stage.feed(b"plain", &mut out).unwrap();
    stage.pause(&mut out).unwrap();
    stage.finish(&mut out).unwrap();
    assert_eq!(out, b"plain");
}
