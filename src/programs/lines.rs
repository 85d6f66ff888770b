//! A program's output (a CGI script's stderr, an application's stdout and stderr) cut into
//! lines for the error log.
//!
//! Owns: the cutting: a line ends at LF (a CR before it is dropped); a line longer than
//! `LONGEST` is written in pieces of that size, so a program that never writes a newline
//! cannot make ampd hold its output without bound. Bytes that are not UTF-8 are written
//! lossily. Must not touch: where the lines go.

/// The longest line kept whole (nginx cuts upstream stderr at a similar size).
pub const LONGEST: usize = 4096;

#[derive(Debug, Default)]
pub struct Lines {
    partial: Vec<u8>,
}

impl Lines {
    /// Add `bytes`; `line` is called with every line they complete.
    pub fn push(&mut self, mut bytes: &[u8], mut line: impl FnMut(&str)) {
        while !bytes.is_empty() {
            let room = LONGEST - self.partial.len();
            let window = &bytes[..bytes.len().min(room)];
            match window.iter().position(|&byte| byte == b'\n') {
                Some(end) => {
                    self.partial.extend_from_slice(&window[..end]);
                    bytes = &bytes[end + 1..];
                    self.emit(&mut line);
                }
                None => {
                    self.partial.extend_from_slice(window);
                    bytes = &bytes[window.len()..];
                    if self.partial.len() == LONGEST {
                        self.emit(&mut line);
                    }
                }
            }
        }
    }

    /// The output ended: a last line without its newline is written too.
    pub fn finish(&mut self, mut line: impl FnMut(&str)) {
        if !self.partial.is_empty() {
            self.emit(&mut line);
        }
    }

    fn emit(&mut self, line: &mut impl FnMut(&str)) {
        if self.partial.last() == Some(&b'\r') {
            self.partial.pop();
        }
        line(&String::from_utf8_lossy(&self.partial));
        self.partial.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(pieces: &[&[u8]]) -> Vec<String> {
        let mut lines = Lines::default();
        let mut out = Vec::new();
        for piece in pieces {
            lines.push(piece, |line| out.push(line.to_owned()));
        }
        lines.finish(|line| out.push(line.to_owned()));
        out
    }

    #[test]
    fn lines_are_cut_at_lf_across_pieces_with_crlf_and_a_last_line_without_newline() {
        assert_eq!(
            cut(&[b"one\r\ntw", b"o\n\nthr", b"ee"]),
            ["one", "two", "", "three"]
        );
        assert_eq!(cut(&[b"\xffbad\n"]), ["\u{fffd}bad"]);
        assert!(cut(&[b""]).is_empty());
    }

    #[test]
    fn a_line_without_end_is_written_in_pieces_of_the_longest() {
        let long = vec![b'x'; LONGEST * 2 + 10];
        let out = cut(&[&long[..LONGEST - 1], &long[LONGEST - 1..], b"\nnext\n"]);
        let sizes: Vec<usize> = out.iter().map(String::len).collect();
        assert_eq!(sizes, [LONGEST, LONGEST, 10, 4]);
    }
}
