//! The access log of proxied exchanges under every engine: one line per exchange, written when
//! it ends, with the status the client got, the body bytes really sent and the time it took
//! (a streamed response is counted as it goes, not from a head written in advance).

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::http::get;
use support::proxy::{self, location, pool, refusing_address};
use support::pyupstream::PyUpstream;
use support::*;

/// Waits (bounded) for a JSON line whose `uri` is `uri`; returns it.
fn logged(log: &Path, uri: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let needle = format!("\"uri\":\"{uri}\"");
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|line| line.contains(&needle)) {
            return line.to_owned();
        }
        assert!(Instant::now() < deadline, "no line for {uri} in:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The number after `"name":` in a JSON line.
fn number(line: &str, name: &str) -> u64 {
    let key = format!("\"{name}\":");
    let start = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        + key.len();
    line[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number in {line}"))
}

default_arch!(fn proxied_exchanges_are_logged_with_their_real_bytes_and_status(arch) {
    let root = TempRoot::new();
    let upstream = PyUpstream::start("py");
    let log = root.outside_dir().join("access.log");
    let pools = format!(
        "{}{}[log]\naccess = \"{}\"\nformat = \"json\"\n",
        pool("app", &[upstream.addr()], ""),
        pool("gone", &[refusing_address()], ""),
        log.display()
    );
    let locations = format!("{}{}", location("/", "app", ""), location("/gone/", "gone", ""));
    let server = proxy::start(&root, arch, &pools, &locations);

    let len: u64 = 300_000;
    let response = get(server.addr(), &format!("/bytes/{len}"));
    assert_eq!(response.status, 200);
    assert_eq!(response.body.len() as u64, len);
    let line = logged(&log, &format!("/bytes/{len}"));
    assert_eq!(number(&line, "status"), 200, "{line}");
    assert_eq!(number(&line, "bytes"), len, "{line}");
    assert!(number(&line, "duration_us") > 0, "{line}");

    assert_eq!(get(server.addr(), "/gone/x").status, 502);
    let line = logged(&log, "/gone/x");
    assert_eq!(number(&line, "status"), 502, "{line}");
});
