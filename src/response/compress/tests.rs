use std::io::Read;
use std::process::Command;

use super::*;

/// Text-like data with enough variety that the codecs do real work: numbered lines of words.
fn text(len: usize, seed: u64) -> Vec<u8> {
    let mut data = Vec::with_capacity(len + 64);
    let mut n = seed;
    while data.len() < len {
        n = n.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let word = [
            "alpha", "beta", "gamma", "delta", "json", "<div>", "{\"id\":",
        ][usize::try_from(n >> 61).unwrap_or(0) % 7];
        data.extend_from_slice(format!("{word} {} {}\n", n % 10, (n >> 40) % 4).as_bytes());
    }
    data.truncate(len);
    data
}

/// Decodes with each format's own decoder (flate2's gzip reader, the Brotli decompressor,
/// libzstd), as a client would.
fn decode(encoding: Encoding, body: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    match encoding {
        Encoding::Gzip => flate2::read::GzDecoder::new(body)
            .read_to_end(&mut plain)
            .map(drop),
        Encoding::Brotli => ::brotli::Decompressor::new(body, 4096)
            .read_to_end(&mut plain)
            .map(drop),
        Encoding::Zstd => ::zstd::stream::read::Decoder::new(body)
            .and_then(|mut decoder| decoder.read_to_end(&mut plain))
            .map(drop),
    }
    .unwrap_or_else(|error| panic!("{encoding:?} does not decode: {error}"));
    plain
}

#[test]
fn every_encoder_round_trips_at_every_level() {
    let data = text(300 << 10, 7);
    for encoding in Encoding::ALL {
        for level in encoding
            .levels()
            .step_by(3)
            .chain([encoding.default_level()])
        {
            let mut encoder = encoding.encoder(level).unwrap();
            assert_eq!(encoder.encoding(), encoding);
            let mut body = Vec::new();
            // Pieces of varying size, a flush in the middle, an empty piece.
            for (index, piece) in data.chunks(7919).enumerate() {
                encoder.feed(piece, &mut body).unwrap();
                if index == 10 {
                    encoder.flush(&mut body).unwrap();
                    encoder.feed(b"", &mut body).unwrap();
                }
            }
            encoder.finish(&mut body).unwrap();
            assert!(
                body.len() < data.len() / 2,
                "{encoding:?} {level}: {} of {}",
                body.len(),
                data.len()
            );
            assert_eq!(decode(encoding, &body), data, "{encoding:?} level {level}");
        }
    }
}

#[test]
fn a_flush_makes_what_was_fed_decodable() {
    for encoding in Encoding::ALL {
        let mut encoder = encoding.encoder(encoding.default_level()).unwrap();
        let mut body = Vec::new();
        encoder.feed(b"data: first event\n\n", &mut body).unwrap();
        encoder.flush(&mut body).unwrap();
        // A prefix of the stream, read until the decoder runs out of input.
        let mut plain = Vec::new();
        let mut buffer = [0u8; 64];
        let mut read_some = |reader: &mut dyn Read| {
            while let Ok(n @ 1..) = reader.read(&mut buffer) {
                plain.extend_from_slice(&buffer[..n]);
            }
        };
        match encoding {
            Encoding::Gzip => read_some(&mut flate2::read::GzDecoder::new(&body[..])),
            Encoding::Brotli => read_some(&mut ::brotli::Decompressor::new(&body[..], 4096)),
            Encoding::Zstd => {
                read_some(&mut ::zstd::stream::read::Decoder::new(&body[..]).unwrap())
            }
        }
        assert_eq!(plain, b"data: first event\n\n", "{encoding:?}");
    }
}

#[test]
fn nothing_is_fed_after_finish_and_empty_bodies_encode() {
    for encoding in Encoding::ALL {
        let mut encoder = encoding.encoder(99).unwrap();
        let mut body = Vec::new();
        encoder.finish(&mut body).unwrap();
        assert!(
            !body.is_empty(),
            "{encoding:?}: an empty stream still has a frame"
        );
        assert_eq!(decode(encoding, &body), b"");
        assert!(encoder.feed(b"x", &mut body).is_err());
        assert!(encoder.flush(&mut body).is_err());
        assert!(encoder.finish(&mut body).is_err());
    }
}

#[test]
fn tokens() {
    for encoding in Encoding::ALL {
        assert_eq!(Encoding::from_token(encoding.token()), Some(encoding));
        assert!(encoding.levels().contains(&encoding.default_level()));
    }
    assert_eq!(Encoding::from_token("BR"), Some(Encoding::Brotli));
    assert_eq!(Encoding::from_token("deflate"), None);
}

#[test]
fn the_default_types_are_text_and_uncompressed_formats() {
    let types = CompressibleTypes::default();
    for yes in [
        "text/html; charset=utf-8",
        "TEXT/CSS",
        "text/plain",
        "application/json",
        "application/ld+json; charset=utf-8",
        "application/manifest+json",
        "application/javascript; charset=utf-8",
        "application/xml",
        "application/atom+xml",
        "image/svg+xml; charset=utf-8",
        "application/wasm",
        "font/ttf",
        "font/otf",
        "application/vnd.ms-fontobject",
    ] {
        assert!(types.matches(yes), "{yes}");
    }
    for no in [
        "font/woff2",
        "font/woff",
        "image/png",
        "image/jpeg",
        "video/mp4",
        "application/gzip",
        "application/zip",
        "application/octet-stream",
        "application/zstd",
        "",
        "text",
    ] {
        assert!(!types.matches(no), "{no}");
    }
}

#[test]
fn a_location_can_replace_the_list() {
    let types =
        CompressibleTypes::from_patterns(&["text/*", "application/x-ndjson", "*/*+yaml"]).unwrap();
    assert!(types.matches("text/csv"));
    assert!(types.matches("Application/X-NDJSON"));
    assert!(types.matches("application/vnd.k8s+yaml"));
    assert!(!types.matches("application/json"));
    for bad in [
        "text",
        "*/html",
        "*/*",
        "te xt/html",
        "text/",
        "*/*+",
        "*/*+a+b",
    ] {
        let error = CompressibleTypes::from_patterns(&[bad]).unwrap_err();
        assert_eq!(error.pattern, bad);
        assert!(error.to_string().contains(bad));
    }
    let nothing: [&str; 0] = [];
    assert!(!CompressibleTypes::from_patterns(&nothing)
        .unwrap()
        .matches("text/html"));
}

/// Set in the child process `streaming_memory_is_bounded_by_the_window` starts.
const CHILD: &str = "AMPD_COMPRESS_MEMORY_CHILD";
const PIECE: usize = 16 << 10;
const TOTAL: usize = 100 << 20;

/// A field of `/proc/self/status` in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// 100 MiB fed in 16 KiB pieces: each encoder's resident memory grows by no more than its
/// window and state after the first MiB, and what each call hands out is bounded by the window.
/// Measured in a process of its own per encoder (started from this test binary), where no
/// other test allocates.
#[test]
fn streaming_memory_is_bounded_by_the_window() {
    let children: Vec<_> = Encoding::ALL
        .into_iter()
        .map(|encoding| {
            let child = Command::new(std::env::current_exe().unwrap())
                .args([
                    "response::compress::tests::one_encoder_streams_in_bounded_memory",
                    "--exact",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(CHILD, encoding.token())
                .output()
                .unwrap();
            (encoding, child)
        })
        .collect();
    for (encoding, child) in children {
        let stdout = String::from_utf8_lossy(&child.stdout);
        assert!(
            child.status.success() && stdout.contains("1 passed"),
            "{encoding:?}: {}\n{stdout}\n{}",
            child.status,
            String::from_utf8_lossy(&child.stderr)
        );
    }
}

#[test]
#[ignore = "run in a process of its own by streaming_memory_is_bounded_by_the_window"]
fn one_encoder_streams_in_bounded_memory() {
    let token = std::env::var(CHILD).unwrap_or_else(|_| "gzip".to_owned());
    let encoding = Encoding::from_token(&token).unwrap();
    let mut encoder = encoding.encoder(encoding.default_level()).unwrap();
    let source = text(PIECE * 64, 3);
    let mut out = Vec::with_capacity(4 * PIECE);
    let mut compressed = 0usize;
    let mut most_per_call = 0usize;
    let mut baseline = None;
    for (index, piece) in source.chunks(PIECE).cycle().take(TOTAL / PIECE).enumerate() {
        encoder.feed(piece, &mut out).unwrap();
        most_per_call = most_per_call.max(out.len());
        compressed += out.len();
        out.clear();
        if index == (1 << 20) / PIECE {
            baseline = Some(status_kib("VmRSS:"));
        }
    }
    encoder.finish(&mut out).unwrap();
    compressed += out.len();
    let growth = status_kib("VmHWM:").saturating_sub(baseline.unwrap());
    eprintln!("{encoding:?}: {compressed} bytes out, peak growth {growth} KiB after the first MiB, at most {most_per_call} bytes per call");
    assert!(growth < 8 << 10, "{encoding:?} grew by {growth} KiB");
    // Brotli emits a meta-block at a time, up to its window of input in one call.
    assert!(
        most_per_call <= (1 << WINDOW_LOG) + PIECE,
        "{encoding:?}: {most_per_call} bytes from one call"
    );
    assert!(compressed < TOTAL / 3, "{encoding:?}: {compressed}");
}
