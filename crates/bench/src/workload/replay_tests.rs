//! Tests of log replay: parsing, GET-only order, truncation to a data-set size, the files.

use super::*;
use crate::rng::Rng;

const LOG: &str = r#"10.0.0.1 - - [10/Oct/1999:13:55:36 -0700] "GET /index.html HTTP/1.0" 200 2326
10.0.0.2 - frank [10/Oct/1999:13:55:37 -0700] "GET /images/logo.gif HTTP/1.0" 200 5000 "http://x/" "Mozilla/4.0 (compatible)"
10.0.0.3 - - [10/Oct/1999:13:55:38 -0700] "POST /cgi-bin/form HTTP/1.0" 200 120
10.0.0.1 - - [10/Oct/1999:13:55:39 -0700] "GET /index.html HTTP/1.0" 304 -
10.0.0.4 - - [10/Oct/1999:13:55:40 -0700] "-" 408 0
10.0.0.5 - - [10/Oct/1999:13:55:41 -0700] "GET /docs/a%20b.txt?x=1 HTTP/1.1" 200 1000
10.0.0.6 - - [10/Oct/1999:13:55:42 -0700] "HEAD /index.html HTTP/1.0" 200 0
10.0.0.7 - - [10/Oct/1999:13:55:43 -0700] "GET /big.iso HTTP/1.1" 200 90000
10.0.0.8 - - [10/Oct/1999:13:55:44 -0700] "GET /images/logo.gif HTTP/1.1" 200 5000
10.0.0.9 - - [10/Oct/1999:13:55:45 -0700] "GET /docs/ HTTP/1.1" 200 300
10.0.0.9 - - [10/Oct/1999:13:55:46 -0700] "GET /nothing-here HTTP/1.1" 404 209
"#;

#[test]
fn only_get_lines_in_logged_order() {
    let log = Log::parse(LOG).unwrap();
    let paths: Vec<_> = log
        .entries
        .iter()
        .map(|entry| entry.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "/index.html",
            "/images/logo.gif",
            "/index.html",
            "/docs/a%20b.txt?x=1",
            "/big.iso",
            "/images/logo.gif",
            "/docs/",
        ]
    );
    assert_eq!(log.entries[2].status, 304);
    assert_eq!(log.entries[2].bytes, 0);
}

#[test]
fn a_replay_issues_exactly_the_logged_paths_in_order_and_loops() {
    let log = Log::parse(LOG).unwrap();
    let mut workload = log.workload(log.entries.len());
    let mut rng = Rng::new(0);
    let logged: Vec<_> = log.entries.iter().map(|entry| entry.path.clone()).collect();
    let issued: Vec<_> = (0..logged.len() * 2)
        .map(|_| {
            let index = workload.draw(&mut rng);
            workload.resources[index].path.clone()
        })
        .collect();
    assert_eq!(issued[..logged.len()], logged[..]);
    assert_eq!(issued[logged.len()..], logged[..]);
    // A path answered 304 keeps the size its 200 line logged.
    assert_eq!(workload.resources[0].size, Some(2326));
}

#[test]
fn truncation_by_data_set_size_picks_the_longest_prefix_that_fits() {
    let log = Log::parse(LOG).unwrap();
    // Distinct files in order of first appearance: index 2326, logo 5000, a b 1000,
    // big 90000, docs/ 300.
    assert_eq!(log.prefix_for(None), 7);
    assert_eq!(log.prefix_for(Some(0)), 0);
    assert_eq!(log.prefix_for(Some(2326)), 1);
    assert_eq!(log.prefix_for(Some(7325)), 1);
    // Repeats of files already in the set cost nothing: with logo.gif in, the third GET
    // line (index.html again) comes free.
    assert_eq!(log.prefix_for(Some(7326)), 3);
    assert_eq!(log.prefix_for(Some(8326)), 4);
    // big.iso does not fit in 50,000 bytes: the prefix stops before it, even though the
    // later lines would fit.
    assert_eq!(log.prefix_for(Some(50_000)), 4);
    assert_eq!(log.prefix_for(Some(98_326)), 6);
    assert_eq!(log.prefix_for(Some(98_626)), 7);
    let workload = log.workload(log.prefix_for(Some(8326)));
    assert_eq!(workload.resources.len(), 3);
}

#[test]
fn files_decode_paths_and_name_index_files() {
    let log = Log::parse(LOG).unwrap();
    let files = log.files(log.entries.len()).unwrap();
    let names: Vec<_> = files
        .iter()
        .map(|file| (file.relative.to_str().unwrap(), file.size))
        .collect();
    assert_eq!(
        names,
        [
            ("index.html", 2326),
            ("images/logo.gif", 5000),
            ("docs/a b.txt", 1000),
            ("big.iso", 90000),
            ("docs/index.html", 300),
        ]
    );
    let escape = Log::parse("h - - [d] \"GET /../etc/passwd HTTP/1.0\" 200 5\n").unwrap();
    assert!(escape.files(1).is_err());
}

#[test]
fn malformed_lines_are_named_by_number() {
    let bad = format!("{LOG}this is not a log line\n");
    assert_eq!(
        Log::parse(&bad),
        Err(LogError::Malformed {
            line: 12,
            reason: "expected [date]"
        })
    );
    for (line, why) in [
        (
            "h - - [d] \"GET / HTTP/1.0\" 2000 5",
            "status is not three digits",
        ),
        (
            "h - - [d] \"GET / HTTP/1.0\" 200 five",
            "size is neither a number nor '-'",
        ),
        (
            "h - - [d] \"GET / HTTP/1.0 200 5",
            "unterminated quoted request",
        ),
        ("h - - [d] GET / 200 5", "expected a quoted request"),
    ] {
        match Log::parse(line) {
            Err(LogError::Malformed { line: 1, reason }) => assert_eq!(reason, why),
            other => panic!("{line}: {other:?}"),
        }
    }
    assert_eq!(
        Log::parse("h - - [d] \"POST / HTTP/1.0\" 200 5\n"),
        Err(LogError::NoGetLines)
    );
    let missing = Log::read(Path::new("/nonexistent/access.log")).unwrap_err();
    assert!(missing
        .to_string()
        .starts_with("cannot read log /nonexistent/access.log"));
}
