//! Large bodies without holding them: streaming the test pattern up to a server and checking a
//! streamed download against it, the sha256 of the pattern (by coreutils `sha256sum`, as the
//! Python upstream reports one), and the resident memory of a server's process tree.
//! Owns: nothing long-lived. Must not touch: the server process beyond reading /proc.

use std::io::{self, Read, Write};
use std::process::{Command, Stdio};
use std::thread;

use super::http::find;
use super::upstream::fill_pattern;

/// Hex sha256 of the first `len` bytes of the test pattern.
///
/// # Panics
/// If `sha256sum` (coreutils) cannot run.
pub fn pattern_sha256(len: u64) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils)");
    let mut stdin = child.stdin.take().unwrap();
    let writer = thread::spawn(move || write_pattern(&mut stdin, len));
    let output = child.wait_with_output().expect("sha256sum output");
    writer.join().unwrap().expect("feed sha256sum");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Hex sha256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum (coreutils)");
    let mut stdin = child.stdin.take().unwrap();
    let owned = bytes.to_vec();
    let writer = thread::spawn(move || stdin.write_all(&owned));
    let output = child.wait_with_output().expect("sha256sum output");
    writer.join().unwrap().expect("feed sha256sum");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Writes `len` bytes of the pattern to `out` in 64 KiB blocks.
pub fn write_pattern(out: &mut impl Write, len: u64) -> io::Result<()> {
    let mut block = vec![0u8; 64 << 10];
    let mut sent = 0u64;
    while sent < len {
        let take = (len - sent).min(block.len() as u64) as usize;
        fill_pattern(sent, &mut block[..take]);
        out.write_all(&block[..take])?;
        sent += take as u64;
    }
    Ok(())
}

/// Writes `len` bytes of the pattern as chunks of `chunk` bytes (RFC 9112 §7.1), then the last
/// chunk.
pub fn write_pattern_chunked(out: &mut impl Write, len: u64, chunk: usize) -> io::Result<()> {
    let mut block = vec![0u8; chunk];
    let mut sent = 0u64;
    while sent < len {
        let take = (len - sent).min(chunk as u64) as usize;
        fill_pattern(sent, &mut block[..take]);
        write!(out, "{take:x}\r\n")?;
        out.write_all(&block[..take])?;
        out.write_all(b"\r\n")?;
        sent += take as u64;
    }
    out.write_all(b"0\r\n\r\n")
}

/// A response head read off a stream, with the body bytes that came with it.
pub struct StreamedHead {
    pub status: u16,
    pub head: String,
    pub content_length: Option<u64>,
    /// Body bytes read together with the head.
    pub early: Vec<u8>,
}

/// Reads a response head (skipping `1xx` interim responses).
///
/// # Errors
/// EOF or a timeout before a whole head.
pub fn read_head(stream: &mut impl Read) -> io::Result<StreamedHead> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        while let Some(end) = find(&buffer, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let status: u16 = head
                .split(' ')
                .nth(1)
                .and_then(|code| code.parse().ok())
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, head.clone()))?;
            buffer.drain(..end + 4);
            if (100..200).contains(&status) {
                continue;
            }
            let content_length = head.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())
                    .flatten()
            });
            return Ok(StreamedHead {
                status,
                head,
                content_length,
                early: buffer,
            });
        }
        let n = super::read_some(stream, &mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("closed in a head: {:?}", String::from_utf8_lossy(&buffer)),
            ));
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}

/// Reads up to `len` body bytes (after `early`), checking every byte against the pattern;
/// returns how many arrived before EOF (== `len` for a whole body). `pace` runs after every read
/// with the count so far (a slow reader sleeps there; a test can stop reading by returning
/// false).
///
/// # Panics
/// If a byte differs from the pattern.
pub fn read_pattern_body(
    stream: &mut impl Read,
    early: &[u8],
    len: u64,
    mut pace: impl FnMut(u64) -> bool,
) -> io::Result<u64> {
    let mut got = 0u64;
    let mut expected = vec![0u8; 256 << 10];
    let mut check = |bytes: &[u8], at: u64| {
        fill_pattern(at, &mut expected[..bytes.len()]);
        if let Some(index) = (0..bytes.len()).find(|&i| bytes[i] != expected[i]) {
            panic!("body byte {} differs from the pattern", at + index as u64);
        }
    };
    let first = early.len().min(len as usize);
    check(&early[..first], 0);
    got += first as u64;
    let mut chunk = vec![0u8; 256 << 10];
    while got < len {
        let want = (len - got).min(chunk.len() as u64) as usize;
        let n = match super::read_some(stream, &mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) if error.kind() == io::ErrorKind::ConnectionReset => break,
            Err(error) => return Err(error),
        };
        check(&chunk[..n], got);
        got += n as u64;
        if !pace(got) {
            break;
        }
    }
    Ok(got)
}

/// Resident memory (VmRSS, KiB) of `pid` and every descendant (mp's workers, helper processes).
pub fn tree_rss_kib(pid: u32) -> u64 {
    let mut total = 0;
    let mut pending = vec![pid];
    while let Some(pid) = pending.pop() {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        total += status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            pending.extend(
                children
                    .split_whitespace()
                    .filter_map(|child| child.parse::<u32>().ok()),
            );
        }
    }
    total
}
