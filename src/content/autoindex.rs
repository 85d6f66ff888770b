//! Directory listings (nginx's `autoindex`): an HTML5 page with one row per entry.
//!
//! Owns: ordering the entries, escaping names for HTML and for URLs, formatting sizes and dates.
//! Must not touch: reading the directory (a helper thread does that with `ampd_sys::file` and
//! passes plain entries in), the clock.

use std::fmt::Write as _;

use ampd_http::date::civil_from_days;

use super::path::encode_path;

/// One directory entry as the listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
    pub mtime_secs: i64,
}

/// Escapes text for HTML element content and double- or single-quoted attributes.
fn push_html_escaped(out: &mut String, text: &str) {
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
}

/// A relative link to `name`: percent-encoded, and with ':' encoded too, so a file named
/// `javascript:alert(1)` cannot be read as a URL scheme (RFC 3986 §4.2).
fn href(name: &str, is_dir: bool) -> String {
    let mut link = encode_path(name).replace(':', "%3A");
    if is_dir {
        link.push('/');
    }
    link
}

/// `YYYY-MM-DD HH:MM` in UTC.
fn format_time(secs: i64) -> String {
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let seconds_of_day = secs.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        seconds_of_day / 3600,
        seconds_of_day % 3600 / 60
    )
}

/// Renders the listing of the directory at `uri_path` (the decoded request path, ending in '/').
///
/// Entries are sorted in place: directories first, then files, each by name. Names starting with
/// '.' are left out unless `show_hidden`. Every name is HTML-escaped where shown and
/// percent-encoded in its link; there is a `../` link everywhere but at the root.
#[must_use]
pub fn render(uri_path: &str, entries: &mut Vec<DirEntry>, show_hidden: bool) -> String {
    if !show_hidden {
        entries.retain(|entry| !entry.name.starts_with('.'));
    }
    entries.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));

    let mut page = String::with_capacity(512 + entries.len() * 160);
    page.push_str("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>Index of ");
    push_html_escaped(&mut page, uri_path);
    page.push_str(
        "</title>\n<style>td{padding:0 1em 0 0}td.size{text-align:right}</style>\n\
         </head>\n<body>\n<h1>Index of ",
    );
    push_html_escaped(&mut page, uri_path);
    page.push_str(
        "</h1>\n<hr>\n<table>\n<tr><th>Name</th><th>Last modified</th><th>Size</th></tr>\n",
    );
    if uri_path != "/" {
        page.push_str("<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    }
    for entry in entries.iter() {
        page.push_str("<tr><td><a href=\"");
        push_html_escaped(&mut page, &href(&entry.name, entry.is_dir));
        page.push_str("\">");
        push_html_escaped(&mut page, &entry.name);
        if entry.is_dir {
            page.push('/');
        }
        page.push_str("</a></td><td>");
        page.push_str(&format_time(entry.mtime_secs));
        page.push_str("</td><td class=\"size\">");
        if entry.is_dir {
            page.push('-');
        } else {
            // Writing to a String cannot fail.
            let _ = write!(page, "{}", entry.size);
        }
        page.push_str("</td></tr>\n");
    }
    page.push_str("</table>\n<hr>\n</body>\n</html>\n");
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, size: u64) -> DirEntry {
        DirEntry {
            name: name.to_owned(),
            is_dir: false,
            size,
            mtime_secs: 0,
        }
    }

    fn dir(name: &str) -> DirEntry {
        DirEntry {
            is_dir: true,
            ..file(name, 4096)
        }
    }

    #[test]
    fn directories_first_then_files_by_name() {
        let mut entries = vec![
            file("b.txt", 2),
            dir("zeta"),
            file("a.txt", 1),
            dir("alpha"),
        ];
        let page = render("/docs/", &mut entries, false);
        let names: Vec<_> = entries.iter().map(|entry| entry.name.as_str()).collect();
        assert_eq!(names, ["alpha", "zeta", "a.txt", "b.txt"]);
        let positions: Vec<_> = ["alpha/", "zeta/", "a.txt<", "b.txt<"]
            .iter()
            .map(|needle| page.find(needle).unwrap())
            .collect();
        assert!(positions.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<title>Index of /docs/</title>"));
        assert!(page.contains("<a href=\"../\">../</a>"));
        assert!(page.contains("<a href=\"alpha/\">alpha/</a>"));
        assert!(page.contains("<td class=\"size\">1</td>"));
        assert!(page.contains("<td class=\"size\">-</td>"));
    }

    #[test]
    fn root_has_no_parent_link() {
        let page = render("/", &mut vec![file("x", 1)], false);
        assert!(!page.contains("../"));
    }

    #[test]
    fn hostile_names_are_escaped_in_text_and_encoded_in_links() {
        let mut entries = vec![
            file("<script>alert(1)</script>", 1),
            file("a\"b&c#d?e f%g'h", 2),
            file("javascript:alert(1)", 3),
            dir("caf\u{e9} dir"),
        ];
        let page = render("/<x>&\"/", &mut entries, false);
        assert!(!page.contains("<script>"));
        assert!(page.contains("Index of /&lt;x&gt;&amp;&quot;/"));
        assert!(page.contains(
            "<a href=\"%3Cscript%3Ealert(1)%3C/script%3E\">&lt;script&gt;alert(1)&lt;/script&gt;</a>"
        ));
        assert!(page.contains(
            "<a href=\"a%22b&amp;c%23d%3Fe%20f%25g&#39;h\">a&quot;b&amp;c#d?e f%g&#39;h</a>"
        ));
        assert!(page.contains("<a href=\"javascript%3Aalert(1)\">"));
        assert!(page.contains("<a href=\"caf%C3%A9%20dir/\">caf\u{e9} dir/</a>"));
    }

    #[test]
    fn hidden_entries_only_on_request() {
        let mut entries = vec![file(".env", 1), file("index.html", 2)];
        let page = render("/", &mut entries.clone(), false);
        assert!(!page.contains(".env"));
        let page = render("/", &mut entries, true);
        assert!(page.contains("<a href=\".env\">.env</a>"));
    }

    #[test]
    fn dates_are_utc_minutes() {
        assert_eq!(format_time(0), "1970-01-01 00:00");
        assert_eq!(format_time(951_782_400), "2000-02-29 00:00");
        assert_eq!(format_time(1_700_000_000), "2023-11-14 22:13");
        assert_eq!(format_time(4_102_444_799), "2099-12-31 23:59");
        assert_eq!(format_time(-60), "1969-12-31 23:59");
        let mut entries = vec![DirEntry {
            mtime_secs: 1_700_000_000,
            ..file("f", 10)
        }];
        assert!(render("/", &mut entries, false).contains("<td>2023-11-14 22:13</td>"));
    }

    #[test]
    fn civil_dates_round_trip_day_by_day() {
        // Walk 1900..2100 day by day and check the calendar advances by exactly one day.
        let mut previous = civil_from_days(-25_567);
        assert_eq!(previous, (1900, 1, 1));
        for days in -25_566..47_482 {
            let next = civil_from_days(days);
            let (year, month, day) = previous;
            let advanced = next == (year, month, day + 1)
                || (next.2 == 1 && (next == (year, month + 1, 1) || next == (year + 1, 1, 1)));
            assert!(advanced, "{previous:?} -> {next:?}");
            previous = next;
        }
        assert_eq!(previous, (2099, 12, 31));
    }
}
