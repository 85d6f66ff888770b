//! Replaying an access log (Common or Combined Log Format): the GET lines in logged order,
//! truncated to a data-set size, in a loop.
//!
//! Owns: parsing log lines, choosing the prefix, the files the prefix names and their sizes.
//! Must not touch: the network. Strict on structure (a line that is not CLF stops the run with
//! its line number), lenient on content: requests that are not GET, GETs answered other than
//! 2xx or 304 (a 404 names no file to serve), and unparseable request lines that servers log
//! (such as `"-"` for a 408) are valid log lines and are skipped.
//!
//! Sources: Flash §6.2 ("we use the access logs ... and truncate them as appropriate to achieve
//! a given dataset size. The clients then replay this truncated log as a loop"); the NCSA/Apache
//! Common Log Format: `host ident authuser [date] "request" status bytes`, and the Combined
//! format's `"referer" "user-agent"` after it.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::fileset::FileSpec;
use super::{Picker, Resource, Workload};

/// A log that cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogError {
    Unreadable { path: PathBuf, reason: String },
    Malformed { line: usize, reason: &'static str },
    NoGetLines,
}

impl fmt::Display for LogError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogError::Unreadable { path, reason } => {
                write!(formatter, "cannot read log {}: {reason}", path.display())
            }
            LogError::Malformed { line, reason } => write!(
                formatter,
                "log line {line} is not Common or Combined Log Format: {reason}"
            ),
            LogError::NoGetLines => formatter.write_str("the log has no GET requests to replay"),
        }
    }
}

/// One GET line of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub status: u16,
    /// The logged response size (`-` is 0).
    pub bytes: u64,
}

/// The GET lines of a log, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log {
    pub entries: Vec<Entry>,
}

impl Log {
    /// Reads and parses a log file.
    ///
    /// # Errors
    /// [`LogError`] for an unreadable file, a malformed line, or a log without GET lines.
    pub fn read(path: &Path) -> Result<Log, LogError> {
        let bytes = std::fs::read(path).map_err(|error| LogError::Unreadable {
            path: path.to_owned(),
            reason: error.to_string(),
        })?;
        Log::parse(&String::from_utf8_lossy(&bytes))
    }

    /// Parses log text.
    ///
    /// # Errors
    /// As [`Log::read`].
    pub fn parse(text: &str) -> Result<Log, LogError> {
        let mut entries = Vec::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let fields = parse_line(line).map_err(|reason| LogError::Malformed {
                line: number + 1,
                reason,
            })?;
            if let Some(entry) = fields {
                entries.push(entry);
            }
        }
        if entries.is_empty() {
            return Err(LogError::NoGetLines);
        }
        Ok(Log { entries })
    }

    /// The size of each distinct path: the largest size logged with status 200, else the
    /// largest size logged at all (a file only ever answered 304 or 206).
    #[must_use]
    pub fn file_sizes(&self) -> HashMap<&str, u64> {
        let mut full: HashMap<&str, u64> = HashMap::new();
        let mut any: HashMap<&str, u64> = HashMap::new();
        for entry in &self.entries {
            let slot = any.entry(&entry.path).or_default();
            *slot = (*slot).max(entry.bytes);
            if entry.status == 200 {
                let slot = full.entry(&entry.path).or_default();
                *slot = (*slot).max(entry.bytes);
            }
        }
        for (path, size) in full {
            any.insert(path, size);
        }
        any
    }

    /// How many lines of the log to replay so that the distinct files they name add up to at
    /// most `data_set` bytes: the longest such prefix (Flash §6.2). `None` keeps the whole log.
    #[must_use]
    pub fn prefix_for(&self, data_set: Option<u64>) -> usize {
        let Some(limit) = data_set else {
            return self.entries.len();
        };
        let sizes = self.file_sizes();
        let mut seen = std::collections::HashSet::new();
        let mut total = 0u64;
        for (index, entry) in self.entries.iter().enumerate() {
            if seen.insert(entry.path.as_str()) {
                let size = sizes[entry.path.as_str()];
                if total + size > limit {
                    return index;
                }
                total += size;
            }
        }
        self.entries.len()
    }

    /// The request stream of the first `lines` GET lines, in order, looping.
    #[must_use]
    pub fn workload(&self, lines: usize) -> Workload {
        let sizes = self.file_sizes();
        let mut index_of: HashMap<&str, u32> = HashMap::new();
        let mut resources = Vec::new();
        let mut order = Vec::with_capacity(lines);
        for entry in &self.entries[..lines] {
            let index = *index_of.entry(&entry.path).or_insert_with(|| {
                resources.push(Resource {
                    path: entry.path.clone(),
                    size: Some(sizes[entry.path.as_str()]),
                });
                (resources.len() - 1) as u32
            });
            order.push(index);
        }
        Workload {
            resources,
            picker: Picker::Sequence { order, next: 0 },
        }
    }

    /// The files the first `lines` GET lines name, with their sizes, as paths below a document
    /// root: the query is dropped, `%XX` decoded, and a path ending in `/` gets `index.html`.
    ///
    /// # Errors
    /// A path that cannot be a file below the root (`..`, NUL, a bad escape), named by line.
    pub fn files(&self, lines: usize) -> Result<Vec<FileSpec>, String> {
        let sizes = self.file_sizes();
        let mut seen = std::collections::HashSet::new();
        let mut files = Vec::new();
        for entry in &self.entries[..lines] {
            if !seen.insert(entry.path.as_str()) {
                continue;
            }
            let relative = file_path(&entry.path)
                .ok_or_else(|| format!("cannot create a file for logged path '{}'", entry.path))?;
            files.push(FileSpec {
                relative,
                size: sizes[entry.path.as_str()],
            });
        }
        Ok(files)
    }
}

/// The file below a document root that serves `path`.
fn file_path(path: &str) -> Option<PathBuf> {
    let without_query = path.split(['?', '#']).next().unwrap_or(path);
    let decoded = percent_decode(without_query)?;
    if decoded.contains('\0') || decoded.contains('\\') {
        return None;
    }
    let mut relative = PathBuf::new();
    for segment in decoded.split('/').filter(|segment| !segment.is_empty()) {
        if segment == "." || segment == ".." {
            return None;
        }
        relative.push(segment);
    }
    if decoded.ends_with('/') {
        relative.push("index.html");
    }
    Some(relative)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Parses one line; `Ok(None)` for a well-formed line that is not a replayable GET.
fn parse_line(line: &str) -> Result<Option<Entry>, &'static str> {
    let mut rest = line;
    for _ in 0..3 {
        let (field, after) = rest
            .split_once(' ')
            .ok_or("expected host, ident and user fields")?;
        if field.is_empty() {
            return Err("empty host, ident or user field");
        }
        rest = after;
    }
    let rest = rest.strip_prefix('[').ok_or("expected [date]")?;
    let (_date, rest) = rest.split_once("] ").ok_or("expected [date]")?;
    let rest = rest.strip_prefix('"').ok_or("expected a quoted request")?;
    let (request, rest) = split_quoted(rest).ok_or("unterminated quoted request")?;
    let rest = rest
        .strip_prefix(' ')
        .ok_or("expected a status after the request")?;
    let (status, rest) = rest.split_once(' ').ok_or("expected status and size")?;
    if status.len() != 3 || !status.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err("status is not three digits");
    }
    let size = rest.split(' ').next().unwrap_or("");
    let bytes = match size {
        "-" => 0,
        digits if !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit()) => {
            digits.parse().map_err(|_| "size too large")?
        }
        _ => return Err("size is neither a number nor '-'"),
    };
    let status: u16 = status.parse().map_err(|_| "status is not three digits")?;
    // Only requests for files that existed: 2xx, and 304 (the client had it cached). A 404 or
    // a 500 in the log says nothing about which files to serve.
    if !(200..300).contains(&status) && status != 304 {
        return Ok(None);
    }
    let mut parts = request.split(' ');
    let (Some("GET"), Some(target)) = (parts.next(), parts.next()) else {
        return Ok(None);
    };
    // Absolute-form targets (proxy logs) keep only their path.
    let path = match target
        .strip_prefix("http://")
        .or(target.strip_prefix("https://"))
    {
        Some(authority_and_path) => authority_and_path
            .find('/')
            .map_or("/", |slash| &authority_and_path[slash..]),
        None => target,
    };
    if !path.starts_with('/') || path.bytes().any(|byte| byte <= b' ' || byte == 0x7f) {
        return Ok(None);
    }
    Ok(Some(Entry {
        path: path.to_owned(),
        status,
        bytes,
    }))
}

/// Splits `text` after an opening quote at its closing quote (`\"` and `\\` are escapes, as
/// Apache writes them).
fn split_quoted(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'"' => return Some((&text[..index], &text[index + 1..])),
            _ => index += 1,
        }
    }
    None
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;
