use super::text::{human_size, readable_time, rfc3339};
use super::*;

fn file(name: &str, size: u64, mtime_secs: i64) -> DirEntry {
    DirEntry {
        name: name.to_owned(),
        is_dir: false,
        size,
        mtime_secs,
    }
}

fn dir(name: &str, mtime_secs: i64) -> DirEntry {
    DirEntry {
        is_dir: true,
        ..file(name, 4096, mtime_secs)
    }
}

fn listing() -> Listing {
    Listing {
        entries: vec![
            file("b.txt", 20, 300),
            dir("zeta", 100),
            file("A.txt", 3000, 100),
            dir("alpha", 200),
            file("c.txt", 1, 200),
        ],
    }
}

fn clean(path: &str) -> CleanPath {
    CleanPath::from_normalized(path).unwrap()
}

fn names(listing: &Listing, query: &str) -> Vec<String> {
    let view = View::from_query(Some(query)).unwrap();
    sorted(listing, &view)
        .iter()
        .map(|entry| entry.name.clone())
        .collect()
}

#[test]
fn directories_first_then_the_chosen_column() {
    let listing = listing();
    assert_eq!(
        names(&listing, ""),
        ["alpha", "zeta", "A.txt", "b.txt", "c.txt"]
    );
    assert_eq!(
        names(&listing, "sort=name&order=desc"),
        ["zeta", "alpha", "c.txt", "b.txt", "A.txt"]
    );
    assert_eq!(
        names(&listing, "sort=size"),
        ["alpha", "zeta", "c.txt", "b.txt", "A.txt"]
    );
    assert_eq!(
        names(&listing, "sort=size&order=desc"),
        ["zeta", "alpha", "A.txt", "b.txt", "c.txt"]
    );
    assert_eq!(
        names(&listing, "order=asc&sort=time&v=3"),
        ["zeta", "alpha", "A.txt", "c.txt", "b.txt"]
    );
}

#[test]
fn bad_parameters_are_named() {
    for (query, name) in [
        ("sort=colour", "sort"),
        ("order=up", "order"),
        ("format=xml", "format"),
        ("sort", "sort"),
    ] {
        let error = View::from_query(Some(query)).unwrap_err();
        assert_eq!(error.name, name, "{query}");
    }
    assert_eq!(
        View::from_query(Some("sort=colour"))
            .unwrap_err()
            .to_string(),
        "?sort=colour is not one of name, size or time"
    );
    assert_eq!(View::from_query(None).unwrap(), View::default());
    assert_eq!(View::from_query(Some("x=1&&y")).unwrap(), View::default());
}

#[test]
fn html_page_has_viewport_sizes_times_and_sort_links() {
    let view = View::from_query(Some("sort=size&order=desc")).unwrap();
    let page = render(&clean("/docs/"), &listing(), &view);
    assert_eq!(page.content_type, "text/html; charset=utf-8");
    let html = String::from_utf8(page.body).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        html.contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">")
    );
    assert!(html.contains("<title>Index of /docs/</title>"));
    assert!(!html.contains("<script"), "{html}");
    assert!(
        html.contains("<td class=\"size\" title=\"3000 bytes\">2.9 KiB</td>"),
        "{html}"
    );
    assert!(html.contains("<time datetime=\"1970-01-01T00:01:40Z\">1970-01-01 00:01:40 UTC</time>"));
    // The current column says so and links to the other order; the others link ascending.
    assert!(html.contains(
        "<th class=\"size\" aria-sort=\"descending\"><a href=\"?sort=size&amp;order=asc\">Size \u{25bc}</a></th>"
    ), "{html}");
    assert!(html.contains("<a href=\"?sort=name&amp;order=asc\">Name</a>"));
    assert!(html.contains("<a href=\"?sort=time&amp;order=asc\">Modified (UTC)</a>"));
    // Parent and directory links keep the order; file links do not need it.
    assert!(
        html.contains("<a href=\"../?sort=size&amp;order=desc\">../</a>"),
        "{html}"
    );
    assert!(html.contains("<a href=\"alpha/?sort=size&amp;order=desc\">alpha/</a>"));
    assert!(html.contains("<a href=\"A.txt\">A.txt</a>"));
    assert!(html.contains("2 directories, 3 files"));
    assert!(html.contains("<a href=\"?format=json\">JSON</a>"));
}

#[test]
fn root_has_no_parent_link_and_the_default_view_plain_links() {
    let page = render(&clean("/"), &listing(), &View::default());
    let html = String::from_utf8(page.body).unwrap();
    assert!(!html.contains("../"));
    assert!(html.contains("<a href=\"alpha/\">alpha/</a>"));
    assert!(html.contains(
        "aria-sort=\"ascending\"><a href=\"?sort=name&amp;order=desc\">Name \u{25b2}</a>"
    ));
}

#[test]
fn hostile_names_are_escaped_in_text_and_encoded_in_links() {
    let listing = Listing {
        entries: vec![
            file("<script>alert(1)</script>", 1, 0),
            file("a\"b&c#d?e f%g'h", 2, 0),
            file("javascript:alert(1)", 3, 0),
            dir("caf\u{e9} dir", 0),
        ],
    };
    let page = render(&clean("/<x>&\"/"), &listing, &View::default());
    let html = String::from_utf8(page.body).unwrap();
    assert!(!html.contains("<script>"));
    assert!(html.contains("Index of /&lt;x&gt;&amp;&quot;/"));
    assert!(html.contains(
        "<a href=\"%3Cscript%3Ealert(1)%3C/script%3E\">&lt;script&gt;alert(1)&lt;/script&gt;</a>"
    ));
    assert!(html.contains(
        "<a href=\"a%22b&amp;c%23d%3Fe%20f%25g&#39;h\">a&quot;b&amp;c#d?e f%g&#39;h</a>"
    ));
    assert!(html.contains("<a href=\"javascript%3Aalert(1)\">"));
    assert!(html.contains("<a href=\"caf%C3%A9%20dir/\">caf\u{e9} dir/</a>"));
}

#[test]
fn json_lists_every_entry_with_absolute_urls() {
    let listing = Listing {
        entries: vec![file("a \"q\".txt", 5, 1_700_000_000), dir("sub", 0)],
    };
    let view = View::from_query(Some("format=json")).unwrap();
    let page = render(&clean("/my docs/"), &listing, &view);
    assert_eq!(page.content_type, "application/json; charset=utf-8");
    let value: serde_json::Value = serde_json::from_slice(&page.body).unwrap();
    assert_eq!(
        value,
        serde_json::json!([
            {"name": "sub", "type": "directory", "size": null,
             "modified": "1970-01-01T00:00:00Z", "url": "/my%20docs/sub/"},
            {"name": "a \"q\".txt", "type": "file", "size": 5,
             "modified": "2023-11-14T22:13:20Z", "url": "/my%20docs/a%20%22q%22.txt"},
        ])
    );
}

#[test]
fn sizes_read_as_people_read_them() {
    assert_eq!(human_size(0), "0 B");
    assert_eq!(human_size(1023), "1023 B");
    assert_eq!(human_size(1024), "1.0 KiB");
    assert_eq!(human_size(1536), "1.5 KiB");
    assert_eq!(human_size(10 * 1024), "10 KiB");
    assert_eq!(human_size(1024 * 1024 - 1), "1.0 MiB");
    assert_eq!(human_size(5 * 1024 * 1024 * 1024), "5.0 GiB");
    assert_eq!(human_size(u64::MAX), "16 EiB");
}

#[test]
fn times_are_rfc3339_utc() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    assert_eq!(rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    assert_eq!(rfc3339(-1), "1969-12-31T23:59:59Z");
    assert_eq!(readable_time(1_700_000_000), "2023-11-14 22:13:20 UTC");
}

#[test]
fn only_names_the_server_would_serve_are_listable() {
    for name in ["a b", "100%", "#?&<>\"'", "caf\u{e9}", "a%2Fb", "~user"] {
        assert!(is_listable_name(name, false), "{name:?}");
    }
    for name in ["h\tTab", "l\\back", "new\nline", "del\u{7f}", ".", "..", ""] {
        assert!(!is_listable_name(name, true), "{name:?}");
    }
    assert!(!is_listable_name(".env", false));
    assert!(is_listable_name(".env", true));
    assert!(is_listable_name("...", true));
}

#[test]
fn listings_survive_the_trip_to_a_helper_process_and_back() {
    let listing = Listing {
        entries: vec![file("caf\u{e9}", u64::MAX, -5), dir("d", i64::MAX)],
    };
    let mut bytes = Vec::new();
    listing.encode(&mut bytes);
    assert_eq!(Listing::decode(&bytes), Some(listing));
    assert_eq!(Listing::decode(&bytes[..bytes.len() - 1]), None);
    bytes.push(0);
    assert_eq!(Listing::decode(&bytes), None);
    assert_eq!(Listing::decode(&u64::MAX.to_le_bytes()), None);
}

#[test]
fn civil_dates_round_trip_day_by_day() {
    use ampd_http::date::civil_from_days;
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
