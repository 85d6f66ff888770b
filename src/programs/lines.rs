//! A program's output (a CGI script's stderr, an application's stdout and stderr) cut into
//! lines for the error log, within a budget.
//!
//! Owns: the cutting: a line ends at LF (a CR before it is dropped); a line longer than
//! `LONGEST` keeps its first `LONGEST` bytes, says it was cut, and the rest up to its LF is
//! dropped, so a program that never writes a newline costs one line, not one per 4 KiB. Bytes
//! that are not UTF-8 are written lossily. And the budget (`ProgramLines`): each program may
//! write `LINES_PER_INTERVAL` lines per `THROTTLE_INTERVAL`, and all programs of a kind share a
//! pool (the error log's `Throttle`, as every repeatable line has); what is left out is counted
//! and said in one line when the program is heard again or ends (one CGI request once wrote
//! 200,003 lines, 16 MB, in 1.8 s). Must not touch: where the lines go.

use crate::log::error::Throttle;

/// The longest line kept (nginx cuts upstream stderr at a similar size).
pub const LONGEST: usize = 4096;

/// Lines one program (a script, an application's process) may write per `THROTTLE_INTERVAL`.
pub const LINES_PER_INTERVAL: u64 = 100;

/// Lines all the programs of a kind (`POOL_LINES_PER_INTERVAL` for CGI scripts together, and
/// for applications' processes together) may write per `THROTTLE_INTERVAL`.
pub const POOL_LINES_PER_INTERVAL: u64 = 1000;

#[derive(Debug, Default)]
pub struct Lines {
    partial: Vec<u8>,
    /// The rest of a line cut at `LONGEST` is being dropped, up to its LF.
    dropping: bool,
}

impl Lines {
    /// Add `bytes`; `line` is called with every line they complete.
    pub fn push(&mut self, mut bytes: &[u8], mut line: impl FnMut(&str)) {
        while !bytes.is_empty() {
            if self.dropping {
                match bytes.iter().position(|&byte| byte == b'\n') {
                    Some(end) => {
                        self.dropping = false;
                        bytes = &bytes[end + 1..];
                    }
                    None => return,
                }
                continue;
            }
            let room = LONGEST - self.partial.len();
            if room == 0 {
                // `LONGEST` bytes so far: whole if its LF comes next, else cut.
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    self.emit(&mut line, false);
                } else {
                    self.emit(&mut line, true);
                    self.dropping = true;
                }
                continue;
            }
            let window = &bytes[..bytes.len().min(room)];
            match window.iter().position(|&byte| byte == b'\n') {
                Some(end) => {
                    self.partial.extend_from_slice(&window[..end]);
                    bytes = &bytes[end + 1..];
                    self.emit(&mut line, false);
                }
                None => {
                    self.partial.extend_from_slice(window);
                    bytes = &bytes[window.len()..];
                }
            }
        }
    }

    /// The output ended: a last line without its newline is written too.
    pub fn finish(&mut self, mut line: impl FnMut(&str)) {
        if !self.partial.is_empty() {
            self.emit(&mut line, false);
        }
        self.dropping = false;
    }

    fn emit(&mut self, line: &mut impl FnMut(&str), cut: bool) {
        if !cut && self.partial.last() == Some(&b'\r') {
            self.partial.pop();
        }
        let text = String::from_utf8_lossy(&self.partial);
        if cut {
            line(&format!("{text} [line cut at {LONGEST} bytes]"));
        } else {
            line(&text);
        }
        self.partial.clear();
    }
}

/// One program's output as log lines, within its own budget and its kind's `pool`.
#[derive(Debug)]
pub struct ProgramLines {
    lines: Lines,
    own: Throttle,
    pool: &'static Throttle,
    /// Lines left out since the last one written.
    suppressed: u64,
}

impl ProgramLines {
    /// `pool`: a `Throttle::with_budget(POOL_LINES_PER_INTERVAL)` shared by the programs of a
    /// kind.
    #[must_use]
    pub fn new(pool: &'static Throttle) -> ProgramLines {
        ProgramLines {
            lines: Lines::default(),
            own: Throttle::with_budget(LINES_PER_INTERVAL),
            pool,
            suppressed: 0,
        }
    }

    /// Add `bytes`; `log` is called with every line they complete that the budget lets
    /// through (after a line that says how many were left out, if any were).
    pub fn push(&mut self, bytes: &[u8], mut log: impl FnMut(&str)) {
        let ProgramLines {
            lines,
            own,
            pool,
            suppressed,
        } = self;
        lines.push(bytes, |line| admit(own, pool, suppressed, line, &mut log));
    }

    /// The output ended: a last line without its newline, and how many were left out.
    pub fn finish(&mut self, mut log: impl FnMut(&str)) {
        let ProgramLines {
            lines,
            own,
            pool,
            suppressed,
        } = self;
        lines.finish(|line| admit(own, pool, suppressed, line, &mut log));
        if *suppressed > 0 {
            log(&left_out(*suppressed));
            *suppressed = 0;
        }
    }
}

fn admit(
    own: &Throttle,
    pool: &Throttle,
    suppressed: &mut u64,
    line: &str,
    log: &mut impl FnMut(&str),
) {
    if own.allows() && pool.allows() {
        if *suppressed > 0 {
            log(&left_out(*suppressed));
            *suppressed = 0;
        }
        log(line);
    } else {
        *suppressed += 1;
    }
}

fn left_out(count: u64) -> String {
    format!(
        "({count} lines of output left out: at most {LINES_PER_INTERVAL} per program and {POOL_LINES_PER_INTERVAL} for all every {}s)",
        crate::log::error::THROTTLE_INTERVAL.as_secs()
    )
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
    fn a_line_longer_than_the_longest_is_cut_and_its_rest_dropped() {
        let long = vec![b'x'; LONGEST * 3 + 10];
        let out = cut(&[&long[..LONGEST - 1], &long[LONGEST - 1..], b"\nnext\n"]);
        let kept = "x".repeat(LONGEST);
        assert_eq!(
            out,
            [
                format!("{kept} [line cut at {LONGEST} bytes]"),
                "next".to_owned()
            ]
        );
        // Exactly the longest, its LF in the next piece: whole.
        let exact = vec![b'y'; LONGEST];
        assert_eq!(
            cut(&[&exact, b"\nafter"]),
            ["y".repeat(LONGEST), "after".to_owned()]
        );
    }

    #[test]
    fn a_program_past_its_budget_is_counted_and_the_count_said() {
        static POOL: Throttle = Throttle::with_budget(POOL_LINES_PER_INTERVAL);
        let mut output = ProgramLines::new(&POOL);
        let mut logged = Vec::new();
        let flood: String = (0..1000).map(|n| format!("line {n}\n")).collect();
        output.push(flood.as_bytes(), |line| logged.push(line.to_owned()));
        output.finish(|line| logged.push(line.to_owned()));
        let budget = usize::try_from(LINES_PER_INTERVAL).unwrap();
        assert_eq!(logged.len(), budget + 1, "{logged:?}");
        assert_eq!(logged[0], "line 0");
        assert_eq!(logged[budget - 1], format!("line {}", budget - 1));
        assert!(
            logged[budget].starts_with(&format!("({} lines of output left out", 1000 - budget)),
            "{}",
            logged[budget]
        );
    }

    #[test]
    fn programs_sharing_a_pool_share_its_budget() {
        static POOL: Throttle = Throttle::with_budget(POOL_LINES_PER_INTERVAL);
        let mut logged = 0usize;
        let mut left_out = 0u64;
        for _ in 0..20 {
            let mut output = ProgramLines::new(&POOL);
            let flood: String = (0..LINES_PER_INTERVAL).map(|n| format!("{n}\n")).collect();
            output.push(flood.as_bytes(), |_| logged += 1);
            output.finish(|line| {
                if let Some(count) = line.strip_prefix('(') {
                    left_out += count.split(' ').next().unwrap().parse::<u64>().unwrap();
                }
            });
        }
        assert_eq!(logged, usize::try_from(POOL_LINES_PER_INTERVAL).unwrap());
        assert_eq!(left_out, 20 * LINES_PER_INTERVAL - POOL_LINES_PER_INTERVAL);
    }
}
