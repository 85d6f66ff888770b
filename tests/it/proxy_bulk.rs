//! Large bodies through the proxy in bounded memory, under every engine: a 100 MiB download and
//! a 100 MiB upload with the server's resident memory (its whole process tree, VmRSS) growing by
//! less than 16 MiB, and a client that stops reading beside a fast upstream (the proxy stops
//! reading the upstream instead of buffering, and keeps serving everyone else).

use crate::support;

use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use support::bulk::{self, read_head, read_pattern_body, tree_rss_kib};
use support::http::build_request;
use support::proxy::{self, location, pool};
use support::pyupstream::PyUpstream;
use support::upstream::{RawUpstream, Reply};
use support::*;

const MIB: u64 = 1 << 20;
const LARGE: u64 = 100 * MIB;
/// What the server may grow by while a large body passes (nginx holds a few buffers).
const GROWTH_LIMIT_KIB: u64 = 16 * 1024;
const WAIT: Duration = Duration::from_secs(30);

/// Samples the server's resident memory every 20 ms until dropped; the peak.
struct RssWatch {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl RssWatch {
    fn start(pid: u32) -> RssWatch {
        let peak = Arc::new(AtomicU64::new(tree_rss_kib(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (peak, stop) = (Arc::clone(&peak), Arc::clone(&stop));
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    peak.fetch_max(tree_rss_kib(pid), Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(20));
                }
            })
        };
        RssWatch {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn peak_kib(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.peak.load(Ordering::SeqCst)
    }
}

/// Downloads `len` bytes of the pattern through the proxy on one request, checking each byte.
fn download(server: &Server, path: &str, len: u64) {
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.write_all(&build_request("GET", path, &[])).unwrap();
    let head = read_head(&mut stream).expect("response head");
    assert_eq!(head.status, 200, "{}", head.head);
    let got = read_pattern_body(&mut stream, &head.early, len, |_| true).unwrap();
    assert_eq!(got, len, "the whole body");
}

for_each_arch!(fn hundred_mib_download_in_bounded_memory(arch) {
    let root = TempRoot::new();
    let upstream = RawUpstream::start(|seen| match seen.target.as_str() {
        "/big" => Reply::Generated(LARGE),
        _ => Reply::Generated(MIB),
    });
    let server = proxy::start(&root, arch, &pool("app", &[upstream.addr()], ""), &location("/", "app", ""));
    // Warm up every buffer a download uses before the baseline is taken.
    download(&server, "/warm", MIB);
    let before = tree_rss_kib(server.pid());
    let watch = RssWatch::start(server.pid());
    download(&server, "/big", LARGE);
    let peak = watch.peak_kib();
    assert!(
        peak.saturating_sub(before) < GROWTH_LIMIT_KIB,
        "{arch}: resident memory grew from {before} KiB to {peak} KiB for a 100 MiB download"
    );
});

for_each_arch!(fn hundred_mib_upload_in_bounded_memory(arch) {
    let root = TempRoot::new();
    let upstream = PyUpstream::start("py");
    let server = proxy::start(
        &root,
        arch,
        &pool("app", &[upstream.addr()], ""),
        &location("/", "app", "max_body = \"200MiB\""),
    );
    let upload = |len: u64| {
        let mut stream = TcpStream::connect(server.addr()).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        write!(stream, "PUT /sha256 HTTP/1.1\r\nHost: test\r\nContent-Length: {len}\r\n\r\n").unwrap();
        bulk::write_pattern(&mut stream, len).unwrap();
        let head = read_head(&mut stream).expect("response head");
        assert_eq!(head.status, 200, "{}", head.head);
        let mut body = head.early;
        let mut chunk = [0u8; 256];
        while body.len() < head.content_length.unwrap_or(0) as usize {
            let n = std::io::Read::read(&mut stream, &mut chunk).unwrap();
            assert!(n > 0);
            body.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8_lossy(&body).into_owned()
    };
    upload(MIB);
    let expected = format!("{LARGE} {}\n", bulk::pattern_sha256(LARGE));
    let before = tree_rss_kib(server.pid());
    let watch = RssWatch::start(server.pid());
    let answer = upload(LARGE);
    let peak = watch.peak_kib();
    assert_eq!(answer, expected, "the upstream got every byte, in order");
    assert!(
        peak.saturating_sub(before) < GROWTH_LIMIT_KIB,
        "{arch}: resident memory grew from {before} KiB to {peak} KiB for a 100 MiB upload"
    );
});

for_each_arch!(fn a_stalled_client_beside_a_fast_upstream_holds_little(arch) {
    let root = TempRoot::new();
    let upstream = RawUpstream::start(|seen| match seen.target.as_str() {
        "/big" => Reply::Generated(64 * MIB),
        _ => Reply::ok("raw", "quick"),
    });
    // The minimum send rate off: it resets a reader that takes nothing for a 2-second window
    // (as intended, tests/it/default_limits.rs), and on a loaded machine the stall below can
    // outlast one; what is measured here is the memory a stalled reader holds.
    let pools = format!("[limits]\nmin_send_rate = 0\n\n{}", pool("app", &[upstream.addr()], ""));
    let server = proxy::start(&root, arch, &pools, &location("/", "app", ""));
    assert_eq!(get(server.addr(), "/warm").body_text(), "quick");
    let before = tree_rss_kib(server.pid());
    let watch = RssWatch::start(server.pid());
    let mut slow = TcpStream::connect(server.addr()).unwrap();
    slow.set_read_timeout(Some(WAIT)).unwrap();
    slow.write_all(&build_request("GET", "/big", &[])).unwrap();
    let head = read_head(&mut slow).expect("response head");
    assert_eq!(head.status, 200);
    // The client reads nothing for a while; the upstream could send all 64 MiB in that time.
    // Others are served meanwhile.
    let stalled_until = Instant::now() + Duration::from_millis(1500);
    let mut served = 0;
    while Instant::now() < stalled_until {
        assert_eq!(get(server.addr(), "/other").body_text(), "quick");
        served += 1;
        thread::sleep(Duration::from_millis(50));
    }
    let stalled_peak = tree_rss_kib(server.pid());
    // Then it reads everything, and every byte is right.
    let got = read_pattern_body(&mut slow, &head.early, 64 * MIB, |_| true).unwrap();
    assert_eq!(got, 64 * MIB);
    let peak = watch.peak_kib();
    assert!(served > 5, "{served} requests served beside the stalled one");
    assert!(
        stalled_peak.saturating_sub(before) < GROWTH_LIMIT_KIB && peak.saturating_sub(before) < GROWTH_LIMIT_KIB,
        "{arch}: resident memory grew from {before} KiB to {stalled_peak} KiB (stalled), {peak} KiB (peak)"
    );
});
