//! The connection as a TLS session sees it (`tls::session`'s `Plaintext` and `SealSource`):
//! plaintext goes to `Conn`, records are sealed from `Output`.
//!
//! Owns: those two impls. They are here, not in `tls`, so that `tls` depends on nothing of
//! `conn` (the layering `tests/it/imports.rs` checks): the session is a byte interface, and the
//! connection side drives it.

use std::io::IoSlice;
use std::os::fd::{AsFd, BorrowedFd};

use super::output::Output;
use super::Conn;
use crate::tls::session::{Plaintext, SealSource};
use crate::tls::TlsInfo;

impl Plaintext for Conn {
    fn handshake_done(&mut self, info: TlsInfo) {
        self.set_tls(info);
    }

    fn plaintext(&mut self, bytes: &[u8]) {
        self.receive(bytes);
    }

    fn end_of_stream(&mut self) {
        self.peer_finished();
    }
}

impl SealSource for Output {
    fn is_empty(&self) -> bool {
        Output::is_empty(self)
    }

    fn file_follows_memory(&self) -> bool {
        Output::file_follows_memory(self)
    }

    fn front_file(&mut self) -> Option<(BorrowedFd<'_>, u64, u64)> {
        Output::front_file(self).map(|range| (range.file.file.as_fd(), range.offset, range.end))
    }

    fn memory_slices(&mut self) -> Vec<IoSlice<'_>> {
        Output::memory_slices(self)
    }

    fn advance(&mut self, count: u64) {
        Output::advance(self, count);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::fd::AsFd as _;
    use std::sync::Arc;

    use crate::conn::output::Output;
    use crate::content::file::{FileKey, OpenFile};
    use crate::content::sink::Sink as _;
    use crate::tls::session::{gather, RECORD};

    #[test]
    fn a_frame_header_rides_in_the_record_of_the_file_bytes_after_it() {
        let path = std::env::temp_dir().join(format!("ampd-gather-{}", std::process::id()));
        let body: Vec<u8> = (0..40_000u32).map(|at| (at % 253) as u8).collect();
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&body)
            .unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let key = FileKey::of(&ampd_sys::file::fstat(file.as_fd()).unwrap());
        let file = Arc::new(OpenFile::new(file, key));
        std::fs::remove_file(&path).unwrap();
        // Two DATA frames as HTTP/2 queues them: a 9-byte header, then file bytes.
        let mut output = Output::default();
        output.bytes().extend_from_slice(b"HEADER-01");
        output.file(file.clone(), 0, 16_384);
        output.bytes().extend_from_slice(b"HEADER-02");
        output.file(file, 16_384, 40_000);
        let mut expected = b"HEADER-01".to_vec();
        expected.extend_from_slice(&body[..16_384]);
        expected.extend_from_slice(b"HEADER-02");
        expected.extend_from_slice(&body[16_384..]);

        let mut buffer = vec![0u8; RECORD];
        let mut records = Vec::new();
        let mut sent = Vec::new();
        while !output.is_empty() {
            let filled = gather(&mut output, &mut buffer).unwrap();
            records.push(filled);
            sent.extend_from_slice(&buffer[..filled]);
        }
        // Full records until the last: no record of 9 bytes.
        assert_eq!(records, [RECORD, RECORD, expected.len() - 2 * RECORD]);
        assert!(sent == expected, "the bytes keep their order");
    }
}
