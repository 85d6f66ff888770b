//! `ampd-bench plot -o FILE`: the chart's format follows the file's extension. `.svg` is the
//! SVG the plotter draws, `.png` that chart rasterized (a real PNG of the chart's size), and
//! any other extension is refused before anything is read, naming the formats there are
//! (exit status 2, as for every usage error).

mod support;

use std::path::{Path, PathBuf};
use support::*;

/// A results file with two servers at two client counts, from a real (short) run.
fn results(dir: &Path) -> PathBuf {
    let server = BrokenServer::start();
    let report = dir.join("clients.json");
    let a = format!("a={}", server.url("/good"));
    let b = format!("b={}", server.url("/good"));
    let output = ampd_bench(&[
        "clients",
        "--counts",
        "1,2",
        "--of",
        "file",
        "--target",
        &a,
        "--target",
        &b,
        "--requests",
        "10",
        "--warmup",
        "0",
        "--json",
        report.to_str().unwrap(),
    ]);
    assert_succeeded(&output);
    report
}

/// Width and height from a PNG's IHDR chunk, after checking the signature (RFC 2083 §3.1, §4.1.1).
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&bytes[12..16], b"IHDR", "IHDR first");
    let width = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    (width, height)
}

#[test]
fn png_output_is_a_png_of_the_chart() {
    let dir = temp_dir("plot-png");
    let report = results(&dir);
    let svg = dir.join("chart.svg");
    let png = dir.join("chart.PNG");
    for out in [&svg, &png] {
        let output = ampd_bench(&[
            "plot",
            report.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_succeeded(&output);
    }
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<svg"), "{svg_text}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(png_size(&bytes), (760, 460), "the SVG's own size");
    // A drawn chart, not an empty canvas: lines, labels and a legend compress to kilobytes.
    assert!(bytes.len() > 4000, "{} bytes", bytes.len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn other_formats_are_refused_with_the_supported_ones() {
    let dir = temp_dir("plot-formats");
    for name in ["chart.jpg", "chart.pdf", "chart"] {
        let out = dir.join(name);
        let output = ampd_bench(&["plot", "no-such-results.json", "-o", out.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{name}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("supported: .svg, .png"), "{name}: {stderr}");
        // A usage mistake: clap's message, which says where the help is.
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(stderr.contains("Usage: ampd-bench plot"), "{stderr}");
        assert!(!out.exists(), "nothing written for {name}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
