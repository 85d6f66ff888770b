//! Large files: ranges deep inside a 5 GiB sparse file (64-bit offsets), and byte-exact 20 MiB
//! bodies on both sides of `--sendfile-threshold`.

use crate::support;

use std::io::{Seek, SeekFrom, Write};
use support::root::pattern_bytes;
use support::*;

const FIVE_GIB: u64 = 5 * 1024 * 1024 * 1024;

for_each_arch!(fn sparse_five_gib_ranges(arch) {
    let root = TempRoot::new();
    let path = root.path().join("huge.bin");
    let tail = pattern_bytes(4096, 99);
    let made = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&path)?;
        file.set_len(FIVE_GIB)?;
        file.seek(SeekFrom::Start(FIVE_GIB - tail.len() as u64))?;
        file.write_all(&tail)?;
        Ok(())
    })();
    if let Err(error) = made {
        println!("skipped: the filesystem refuses a 5 GiB sparse file: {error}");
        return;
    }
    let server = Server::start(Options::new(root.path(), arch));
    let mut conn = Conn::open(server.addr());
    conn.send(support::http::build_request("HEAD", "/huge.bin", &[]));
    let head = conn.read_response("HEAD");
    assert_eq!(head.header("content-length"), Some(FIVE_GIB.to_string().as_str()));

    let last = conn.get("/huge.bin", &[("Range", "bytes=-1")]);
    assert_eq!(last.status, 206);
    assert_eq!(last.header("content-range"), Some(format!("bytes {}-{}/{FIVE_GIB}", FIVE_GIB - 1, FIVE_GIB - 1).as_str()));
    assert_eq!(last.body, &tail[tail.len() - 1..]);

    let middle = conn.get("/huge.bin", &[("Range", "bytes=5368709000-5368709119")]);
    assert_eq!(middle.status, 206);
    assert_eq!(middle.body.len(), 120);
    let tail_start = (FIVE_GIB - tail.len() as u64) as usize;
    let from = 5_368_709_000usize - tail_start;
    assert_eq!(middle.body, &tail[from..from + 120]);

    let zeros = conn.get("/huge.bin", &[("Range", "bytes=4294967290-4294967305")]);
    assert_eq!(zeros.body, vec![0u8; 16], "sparse hole across the 4 GiB boundary reads as zeros");
    let both = conn.get("/huge.bin", &[("Range", "bytes=0-0,-1")]);
    assert_eq!(both.status, 206);
    let boundary = support::http::boundary_of(both.header("content-type").unwrap()).unwrap();
    let parts = support::http::parse_multipart(&both.body, &boundary);
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[1].2, &tail[tail.len() - 1..]);
});

fn twenty_mib_exact(arch: &'static str, threshold: &str) {
    let data = pattern_bytes(20 * 1024 * 1024, 5);
    let root = TempRoot::new();
    root.file("big.bin", &data);
    root.file("small.txt", "small");
    let server =
        Server::start(Options::new(root.path(), arch).args(["--sendfile-threshold", threshold]));
    let mut conn = Conn::open(server.addr());
    for _ in 0..2 {
        let response = conn.get("/big.bin", &[]);
        assert_eq!(response.status, 200);
        assert_eq!(response.body.len(), data.len());
        assert!(
            response.body == data,
            "20 MiB body differs (threshold {threshold})"
        );
        // Keep-alive still in sync after a large body.
        assert_eq!(conn.get("/small.txt", &[]).body, b"small");
    }
    let range = conn.get("/big.bin", &[("Range", "bytes=10000000-10999999")]);
    assert!(range.body == data[10_000_000..11_000_000]);
}

for_each_arch!(fn twenty_mib_above_sendfile_threshold(arch) {
    twenty_mib_exact(arch, "1024");
});

for_each_arch!(fn twenty_mib_below_sendfile_threshold(arch) {
    twenty_mib_exact(arch, "67108864");
});
