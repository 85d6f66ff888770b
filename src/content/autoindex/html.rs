//! The listing page for people: a self-contained HTML5 page (one small inline stylesheet, no
//! script, no outside asset, so it works under `default-src 'none'`), readable on a phone, with
//! sortable column headers, human sizes (exact bytes in a tooltip), UTC times and a parent link.
//!
//! Owns: the markup. Must not touch: ordering and query parsing (`mod.rs`).

use std::fmt::Write as _;

use super::text::{href, human_size, push_html_escaped, readable_time, rfc3339};
use super::{DirEntry, Order, SortKey, View};

const STYLE: &str = "\
body{font:15px/1.45 system-ui,-apple-system,\"Segoe UI\",sans-serif;margin:0 auto;\
max-width:64em;padding:1em;color:#1f2328;background:#fff}\
h1{font-size:1.25em;font-weight:600;overflow-wrap:anywhere}\
table{border-collapse:collapse;width:100%}\
th,td{padding:.35em .6em;text-align:left;vertical-align:top}\
th{border-bottom:2px solid #d0d7de;white-space:nowrap}\
td{border-bottom:1px solid #eaeef2}\
tbody tr:hover{background:#f6f8fa}\
a{color:#0969da;text-decoration:none}a:hover{text-decoration:underline}\
th a{color:inherit}\
.name{overflow-wrap:anywhere}.size{text-align:right;white-space:nowrap}\
.time{white-space:nowrap;font-variant-numeric:tabular-nums}\
.dir a{font-weight:600}\
footer{margin-top:1em;color:#656d76;font-size:.9em}\
@media (max-width:36em){.time{display:none}}\
@media (prefers-color-scheme:dark){body{color:#e6edf3;background:#0d1117}\
th{border-color:#30363d}td{border-color:#21262d}tbody tr:hover{background:#161b22}\
a{color:#4493f8}footer{color:#8d96a0}}";

/// The page for `entries` (already in `view`'s order) of the directory `directory` (decoded,
/// ending in '/').
pub(super) fn page(directory: &str, entries: &[&DirEntry], view: &View) -> String {
    let mut page = String::with_capacity(2048 + entries.len() * 300);
    page.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n<title>Index of ",
    );
    push_html_escaped(&mut page, directory);
    page.push_str("</title>\n<style>");
    page.push_str(STYLE);
    page.push_str("</style>\n</head>\n<body>\n<h1>Index of ");
    push_html_escaped(&mut page, directory);
    page.push_str("</h1>\n<table>\n<thead><tr>");
    for (key, label, class) in [
        (SortKey::Name, "Name", "name"),
        (SortKey::Size, "Size", "size"),
        (SortKey::Time, "Modified (UTC)", "time"),
    ] {
        column_header(&mut page, view, key, label, class);
    }
    page.push_str("</tr></thead>\n<tbody>\n");
    // Links keep the chosen order while browsing (a directory's listing sorts the same way).
    let keep = view.sort_query();
    if directory != "/" {
        page.push_str("<tr class=\"dir\"><td class=\"name\"><a href=\"../");
        push_html_escaped(&mut page, &keep);
        page.push_str(
            "\">../</a> (parent directory)</td><td class=\"size\"></td><td class=\"time\"></td></tr>\n",
        );
    }
    for entry in entries {
        row(&mut page, entry, &keep);
    }
    let directories = entries.iter().filter(|entry| entry.is_dir).count();
    let files = entries.len() - directories;
    // Writing to a String cannot fail.
    let _ = write!(
        page,
        "</tbody>\n</table>\n<footer>{directories} director{}, {files} file{} · \
         <a href=\"?format=json\">JSON</a></footer>\n</body>\n</html>\n",
        if directories == 1 { "y" } else { "ies" },
        if files == 1 { "" } else { "s" },
    );
    page
}

/// A header that sorts by its column: ascending first, the other way when already sorted by it.
fn column_header(page: &mut String, view: &View, key: SortKey, label: &str, class: &str) {
    let current = view.sort == key;
    let next = if current && view.order == Order::Ascending {
        Order::Descending
    } else {
        Order::Ascending
    };
    let _ = write!(page, "<th class=\"{class}\"");
    if current {
        let (word, arrow) = match view.order {
            Order::Ascending => ("ascending", " \u{25b2}"),
            Order::Descending => ("descending", " \u{25bc}"),
        };
        let _ = write!(
            page,
            " aria-sort=\"{word}\"><a href=\"?sort={}&amp;order={}\">{label}{arrow}</a></th>",
            key.word(),
            next.word()
        );
    } else {
        let _ = write!(
            page,
            "><a href=\"?sort={}&amp;order={}\">{label}</a></th>",
            key.word(),
            next.word()
        );
    }
}

fn row(page: &mut String, entry: &DirEntry, keep: &str) {
    page.push_str(if entry.is_dir {
        "<tr class=\"dir\">"
    } else {
        "<tr class=\"file\">"
    });
    page.push_str("<td class=\"name\"><a href=\"");
    push_html_escaped(page, &href(&entry.name, entry.is_dir));
    if entry.is_dir {
        push_html_escaped(page, keep);
    }
    page.push_str("\">");
    push_html_escaped(page, &entry.name);
    if entry.is_dir {
        page.push('/');
    }
    page.push_str("</a></td>");
    if entry.is_dir {
        page.push_str("<td class=\"size\">\u{2014}</td>");
    } else {
        let _ = write!(
            page,
            "<td class=\"size\" title=\"{} bytes\">{}</td>",
            entry.size,
            human_size(entry.size)
        );
    }
    let _ = writeln!(
        page,
        "<td class=\"time\"><time datetime=\"{}\">{}</time></td></tr>",
        rfc3339(entry.mtime_secs),
        readable_time(entry.mtime_secs)
    );
}
