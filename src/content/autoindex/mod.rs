//! Directory listings (nginx's `autoindex`, Caddy's `browse`): what a listing holds, which
//! names it may show, the view a request asks for (`?sort=name|size|time&order=asc|desc`,
//! `?format=html|json`), and the response (ETag from the page, `304` on a match).
//!
//! Owns: the listed entries and their order, the query parameters, the listing's response head.
//! Must not touch: reading the directory (a helper does that in `resolve.rs` and passes plain
//! entries in), the clock, the page markup (`html.rs`) and the JSON form (`json.rs`).

mod html;
mod json;
mod text;

use std::cmp::Ordering;
use std::fmt;

use ampd_http::conditional::{self, Precondition, Validators};
use ampd_http::request::{Method, RequestHead};

pub use super::listing::{DirEntry, Listing};
use super::path::{self, CleanPath, PathOptions};
use super::sink::{ResponseContext, Sink};
use crate::response::{cache_fields, common_fields, Http1Framing, StatusAnswer};

/// Whether a link to `name` in a listing would fetch it: the name survives the server's own path
/// rules unchanged (no control character or backslash, which `path::normalize` refuses as
/// traversal and log-injection defences; not `.`/`..`), and is not hidden unless dot-files are
/// served. Judged by `normalize` itself so that a listing and a fetch can never disagree.
#[must_use]
pub fn is_listable_name(name: &str, show_hidden: bool) -> bool {
    if name.is_empty() || name.contains('/') || (!show_hidden && name.starts_with('.')) {
        return false;
    }
    let options = PathOptions {
        allow_dotfiles: true,
        userdir: false,
    };
    path::normalize(&format!("/{}", path::encode_path(name)), &options)
        .is_ok_and(|clean| clean.as_str().strip_prefix('/') == Some(name))
}

/// The column a listing is sorted by (`?sort=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Name,
    Size,
    Time,
}

/// `?order=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Ascending,
    Descending,
}

/// `?format=`: the page for people, or an array for programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Html,
    Json,
}

/// What a request asks of a listing. Directories always come first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub sort: SortKey,
    pub order: Order,
    pub format: Format,
}

impl Default for View {
    fn default() -> View {
        View {
            sort: SortKey::Name,
            order: Order::Ascending,
            format: Format::Html,
        }
    }
}

/// A listing parameter with a value it does not take (answered with 400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadParameter {
    pub name: &'static str,
    pub value: String,
}

impl fmt::Display for BadParameter {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let allowed = match self.name {
            "sort" => "name, size or time",
            "order" => "asc or desc",
            _ => "html or json",
        };
        write!(
            formatter,
            "?{}={} is not one of {allowed}",
            self.name, self.value
        )
    }
}

impl std::error::Error for BadParameter {}

impl View {
    /// The view a query string asks for. Parameters other than `sort`, `order` and `format` are
    /// ignored (a cache-busting `?v=3` still lists); a known one with an unknown value is an error.
    ///
    /// # Errors
    /// The parameter and the value it does not take.
    pub fn from_query(query: Option<&str>) -> Result<View, BadParameter> {
        let mut view = View::default();
        for pair in query.unwrap_or("").split('&') {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let bad = |name| BadParameter {
                name,
                value: value.to_owned(),
            };
            match name {
                "sort" => {
                    view.sort = match value {
                        "name" => SortKey::Name,
                        "size" => SortKey::Size,
                        "time" => SortKey::Time,
                        _ => return Err(bad("sort")),
                    }
                }
                "order" => {
                    view.order = match value {
                        "asc" => Order::Ascending,
                        "desc" => Order::Descending,
                        _ => return Err(bad("order")),
                    }
                }
                "format" => {
                    view.format = match value {
                        "html" => Format::Html,
                        "json" => Format::Json,
                        _ => return Err(bad("format")),
                    }
                }
                _ => {}
            }
        }
        Ok(view)
    }

    /// The query string that asks for this order (without the format), empty for the default.
    fn sort_query(&self) -> String {
        if self.sort == SortKey::Name && self.order == Order::Ascending {
            return String::new();
        }
        format!("?sort={}&order={}", self.sort.word(), self.order.word())
    }
}

impl SortKey {
    fn word(self) -> &'static str {
        match self {
            SortKey::Name => "name",
            SortKey::Size => "size",
            SortKey::Time => "time",
        }
    }
}

impl Order {
    fn word(self) -> &'static str {
        match self {
            Order::Ascending => "asc",
            Order::Descending => "desc",
        }
    }
}

/// Names compare case-insensitively first (as people scan a list), then byte by byte so the
/// order is total and the same on every request.
fn by_name(a: &DirEntry, b: &DirEntry) -> Ordering {
    a.name
        .to_lowercase()
        .cmp(&b.name.to_lowercase())
        .then_with(|| a.name.cmp(&b.name))
}

/// The entries in `view`'s order: directories first, then files; within each, by the chosen
/// column (directories have no size: they sort by name there), ties by name.
#[must_use]
pub fn sorted<'a>(listing: &'a Listing, view: &View) -> Vec<&'a DirEntry> {
    let mut entries: Vec<&DirEntry> = listing.entries.iter().collect();
    entries.sort_by(|a, b| {
        let column = match view.sort {
            SortKey::Name => by_name(a, b),
            SortKey::Size if a.is_dir => by_name(a, b),
            SortKey::Size => a.size.cmp(&b.size).then_with(|| by_name(a, b)),
            SortKey::Time => a.mtime_secs.cmp(&b.mtime_secs).then_with(|| by_name(a, b)),
        };
        let column = match view.order {
            Order::Ascending => column,
            Order::Descending => column.reverse(),
        };
        b.is_dir.cmp(&a.is_dir).then(column)
    });
    entries
}

/// A rendered listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

/// Renders `listing` of the directory at `directory` (the decoded request path, ending in '/')
/// as `view` asks.
#[must_use]
pub fn render(directory: &CleanPath, listing: &Listing, view: &View) -> Page {
    let entries = sorted(listing, view);
    match view.format {
        Format::Html => Page {
            content_type: "text/html; charset=utf-8",
            body: html::page(directory.as_str(), &entries, view).into_bytes(),
        },
        Format::Json => Page {
            content_type: "application/json; charset=utf-8",
            body: json::array(&directory.to_uri(), &entries),
        },
    }
}

/// The page's entity tag: a hash of its bytes, so it is strong (RFC 9110 §8.8.3: equal tags,
/// equal bytes) and the same in every process and loop that renders the same directory.
fn entity_tag(body: &[u8]) -> String {
    // FNV-1a, 64 bits: stable across builds, unlike `DefaultHasher`.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in body {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("\"l{hash:016x}-{:x}\"", body.len())
}

/// The HTML page may only style itself: no script, no outside resource can run or load even if
/// a name slipped past escaping.
const HTML_POLICY: &[u8] = b"default-src 'none'; style-src 'unsafe-inline'";

/// Writes the response to `request` for `page`: `200` with the location's cache headers and an
/// ETag, `304` when `If-None-Match` matches it, `412` when `If-Match` does not. A listing has no
/// Last-Modified (a file below can change without the directory's mtime) and no Vary (the view
/// comes from the URL, not from request headers). Returns the status written, or the `412`
/// whose status page the caller writes.
pub fn respond(
    request: &RequestHead,
    page: &Page,
    context: &ResponseContext<'_>,
    sink: &mut dyn Sink,
) -> Result<u16, StatusAnswer> {
    let etag = entity_tag(&page.body);
    let validators = Validators {
        etag: Some(etag.as_bytes()),
        last_modified: None,
    };
    let head_only = request.method == Method::Head;
    let status = match conditional::evaluate(request, &validators) {
        Precondition::Proceed => 200,
        Precondition::NotModified => 304,
        Precondition::Failed => return Err(StatusAnswer::new(412)),
    };
    let framing = Http1Framing::delimited(context.head.persistence);
    let head = sink.begin_head(status);
    common_fields(head, &context.head);
    cache_fields(head, &context.head);
    head.push("ETag", etag.as_bytes());
    if status == 304 {
        sink.end_head(framing);
        return Ok(304);
    }
    head.push("Content-Type", page.content_type.as_bytes());
    if page.content_type.starts_with("text/html") {
        head.push("Content-Security-Policy", HTML_POLICY);
    }
    head.push_decimal("Content-Length", page.body.len() as u64);
    sink.end_head(framing);
    if !head_only {
        sink.bytes().extend_from_slice(&page.body);
    }
    Ok(200)
}

#[cfg(test)]
mod tests;
