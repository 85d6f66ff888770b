//! `?format=json`: the listing as a JSON array of `{name, type, size, modified, url}` for
//! programs (`type` is `"file"` or `"directory"`; `size` is null for directories; `modified` is
//! RFC 3339 UTC; `url` is the entry's absolute path, percent-encoded, ending in '/' for
//! directories).
//!
//! Owns: the JSON form. Must not touch: ordering (`mod.rs`), the HTML page.

use serde::Serialize;

use super::text::{href, rfc3339};
use super::DirEntry;

#[derive(Serialize)]
struct Entry<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    size: Option<u64>,
    modified: String,
    url: String,
}

/// The array for `entries` of the directory whose encoded path is `directory_uri`.
pub(super) fn array(directory_uri: &str, entries: &[&DirEntry]) -> Vec<u8> {
    let entries: Vec<Entry<'_>> = entries
        .iter()
        .map(|entry| Entry {
            name: &entry.name,
            kind: if entry.is_dir { "directory" } else { "file" },
            size: (!entry.is_dir).then_some(entry.size),
            modified: rfc3339(entry.mtime_secs),
            url: format!("{directory_uri}{}", href(&entry.name, entry.is_dir)),
        })
        .collect();
    let mut body = serde_json::to_vec_pretty(&entries).unwrap_or_else(|_| b"[]".to_vec());
    body.push(b'\n');
    body
}
