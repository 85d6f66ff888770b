//! The `[http2]` section and the `h2c` listen option (docs/config.md "HTTP/2"): every key is
//! read into `config::http2::Http2`, a file without the section gets the documented defaults,
//! and every bad value is refused by `ampd check` (and `ampd run`) with one line naming the
//! file, line, column and key, with a hint.

use crate::support;

use std::path::Path;
use std::time::Duration;

use ampd::config::http2::Http2;
use ampd::config::load::load_str;
use ampd::config::Listen;
use support::*;

const SITE: &str = "[[site]]\nroot = \"/tmp\"\n";

/// `text` written as `DIR/h2.toml` and checked: (exit code, stdout, stderr).
fn check(dir: &Path, text: &str) -> (Option<i32>, String, String) {
    let file = dir.join("h2.toml");
    std::fs::write(&file, text).unwrap();
    run_to_exit(&["check", &file.display().to_string()])
}

/// The one error line `ampd check` gives `text`; `ampd run -c` refuses it with the same line.
fn error_line(text: &str) -> String {
    let root = TempRoot::new();
    let dir = root.outside_dir();
    let (code, stdout, stderr) = check(dir, text);
    assert_eq!(code, Some(1), "{text}\nstdout {stdout}\nstderr {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let file = dir.join("h2.toml").display().to_string();
    assert!(lines[0].starts_with(&format!("ampd: {file}:")), "{stderr}");
    let (code, _, run_stderr) = run_to_exit(&["run", "-c", &file]);
    assert_eq!(code, Some(1));
    assert_eq!(run_stderr.trim(), lines[0]);
    lines[0].to_owned()
}

fn http2_of(text: &str) -> Http2 {
    load_str(text, Path::new("/etc/ampd/ampd.toml"))
        .unwrap_or_else(|error| panic!("{error}"))
        .http2
}

const EVERY_KEY: &str = "listen = [\"127.0.0.1:0\", \"127.0.0.1:0 h2c\"]\n\
     [http2]\n\
     enabled = false\n\
     max_concurrent_streams = 64\n\
     initial_window_size = \"1MiB\"\n\
     connection_window_size = \"16m\"\n\
     max_frame_size = \"32k\"\n\
     max_header_list_size = \"32KiB\"\n\
     header_table_size = 0\n\
     max_header_block = \"128k\"\n\
     budget_window = \"30s\"\n\
     max_resets = 50\n\
     max_settings = 20\n\
     max_pings = 30\n\
     max_empty_frames = 500\n\
     max_upstream_streams = 4\n";

#[test]
fn every_http2_key_is_read() {
    // h2c on a listener with `enabled = false` is a conflict: that pairing is tested below.
    let text = EVERY_KEY.replace("enabled = false", "enabled = true");
    let http2 = http2_of(&format!("{text}{SITE}"));
    assert!(http2.enabled);
    let limits = &http2.limits;
    assert_eq!(limits.max_concurrent_streams, 64);
    assert_eq!(limits.initial_window_size, 1 << 20);
    assert_eq!(limits.connection_window_size, 16 << 20);
    assert_eq!(limits.max_frame_size, 32 << 10);
    assert_eq!(limits.max_header_list_size, 32 << 10);
    assert_eq!(limits.header_table_size, 0);
    assert_eq!(limits.max_header_block, 128 << 10);
    assert_eq!(limits.budget_window, Duration::from_secs(30));
    assert_eq!(limits.max_resets, 50);
    assert_eq!(limits.max_settings, 20);
    assert_eq!(limits.max_pings, 30);
    assert_eq!(limits.max_empty_frames, 500);
    assert_eq!(http2.max_upstream_streams, 4);

    let root = TempRoot::new();
    let (code, stdout, stderr) = check(root.outside_dir(), &format!("{text}{SITE}"));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");

    let disabled = http2_of(&format!(
        "listen = \"127.0.0.1:0\"\n[http2]\nenabled = false\n{SITE}"
    ));
    assert!(!disabled.enabled);
    assert_eq!(disabled.limits, Http2::default().limits);
}

#[test]
fn the_defaults_are_the_documented_ones() {
    let without = http2_of(&format!("listen = \"127.0.0.1:0\"\n{SITE}"));
    let empty = http2_of(&format!("listen = \"127.0.0.1:0\"\n[http2]\n{SITE}"));
    assert_eq!(without, empty);
    assert_eq!(without, Http2::default());
    assert!(without.enabled);
    let limits = &without.limits;
    assert_eq!(limits.max_concurrent_streams, 128);
    assert_eq!(limits.initial_window_size, 65_535);
    assert_eq!(limits.connection_window_size, 1 << 20);
    assert_eq!(limits.max_frame_size, 16_384);
    assert_eq!(limits.max_header_list_size, 64 << 10);
    assert_eq!(limits.header_table_size, 4_096);
    assert_eq!(limits.max_header_block, 64 << 10);
    assert_eq!(limits.budget_window, Duration::from_secs(10));
    assert_eq!(limits.max_resets, 200);
    assert_eq!(limits.max_settings, 100);
    assert_eq!(limits.max_pings, 100);
    assert_eq!(limits.max_empty_frames, 1_000);
    assert_eq!(without.max_upstream_streams, 8);
}

#[test]
fn the_rfc_bounds_themselves_are_accepted() {
    // RFC 9113 §6.5.2: 2^14 ..= 2^24-1 for the frame size, 2^31-1 for a window.
    for (key, value, read) in [
        ("max_frame_size", "16384", 16_384),
        ("max_frame_size", "\"16k\"", 16_384),
        ("max_frame_size", "16777215", 16_777_215),
        ("initial_window_size", "2147483647", 2_147_483_647),
        ("initial_window_size", "1", 1),
        ("connection_window_size", "2147483647", 2_147_483_647),
        ("connection_window_size", "65535", 65_535),
        ("max_concurrent_streams", "1", 1),
        ("max_concurrent_streams", "4294967295", u32::MAX),
        ("header_table_size", "\"64k\"", 64 << 10),
        ("max_resets", "1", 1),
        ("max_upstream_streams", "1", 1),
        ("max_upstream_streams", "32", 32),
    ] {
        let http2 = http2_of(&format!(
            "listen = \"127.0.0.1:0\"\n[http2]\n{key} = {value}\n{SITE}"
        ));
        let limits = &http2.limits;
        let got = match key {
            "max_frame_size" => limits.max_frame_size,
            "initial_window_size" => limits.initial_window_size,
            "connection_window_size" => limits.connection_window_size,
            "max_concurrent_streams" => limits.max_concurrent_streams,
            "header_table_size" => limits.header_table_size,
            "max_resets" => limits.max_resets,
            "max_upstream_streams" => u32::try_from(http2.max_upstream_streams).unwrap(),
            other => unreachable!("{other}"),
        };
        assert_eq!(got, read, "{key} = {value}");
    }
}

#[test]
fn every_bad_http2_value_names_file_line_and_key() {
    // Each: the line under `[http2]` (line 3), then what the error says (before the hint).
    for (line, key, says) in [
        ("enabled = \"yes\"", "enabled", "invalid type"),
        (
            "max_concurrent_streams = 0",
            "max_concurrent_streams",
            "0 is less than 1",
        ),
        (
            "max_concurrent_streams = -1",
            "max_concurrent_streams",
            "-1 is less than 1",
        ),
        (
            "max_concurrent_streams = 4294967296",
            "max_concurrent_streams",
            "4294967296 is more than 4294967295",
        ),
        (
            "initial_window_size = 0",
            "initial_window_size",
            "0 bytes is less than 1",
        ),
        (
            "initial_window_size = \"2g\"",
            "initial_window_size",
            "2147483648 bytes is more than 2147483647",
        ),
        (
            "initial_window_size = \"64 furlongs\"",
            "initial_window_size",
            "'64 furlongs' is not a size",
        ),
        (
            "connection_window_size = \"32k\"",
            "connection_window_size",
            "32768 bytes is less than 65535",
        ),
        (
            "connection_window_size = 2147483648",
            "connection_window_size",
            "2147483648 bytes is more than 2147483647",
        ),
        (
            "max_frame_size = \"8k\"",
            "max_frame_size",
            "8192 bytes is less than 16384",
        ),
        (
            "max_frame_size = \"16m\"",
            "max_frame_size",
            "16777216 bytes is more than 16777215",
        ),
        ("max_frame_size = -5", "max_frame_size", "-5 is not a size"),
        (
            "max_header_list_size = 10",
            "max_header_list_size",
            "10 bytes is less than 64",
        ),
        (
            "max_header_list_size = \"4g\"",
            "max_header_list_size",
            "4294967296 bytes is more than 4294967295",
        ),
        (
            "header_table_size = \"4g\"",
            "header_table_size",
            "4294967296 bytes is more than 4294967295",
        ),
        (
            "max_header_block = 0",
            "max_header_block",
            "0 bytes is less than 64",
        ),
        (
            "budget_window = 0",
            "budget_window",
            "must be more than zero",
        ),
        (
            "budget_window = \"10 fortnights\"",
            "budget_window",
            "'10 fortnights' is not a duration",
        ),
        ("max_resets = 0", "max_resets", "0 is less than 1"),
        ("max_settings = 0", "max_settings", "0 is less than 1"),
        ("max_pings = 0", "max_pings", "0 is less than 1"),
        (
            "max_empty_frames = 0",
            "max_empty_frames",
            "0 is less than 1",
        ),
        (
            "max_upstream_streams = 0",
            "max_upstream_streams",
            "0 is less than 1",
        ),
        (
            "max_upstream_streams = 33",
            "max_upstream_streams",
            "33 is more than 32",
        ),
        (
            "max_pings = 5000000000",
            "max_pings",
            "5000000000 is more than 4294967295",
        ),
    ] {
        let text = format!("listen = \"127.0.0.1:0\"\n[http2]\n{line}\n{SITE}");
        let error = error_line(&text);
        let column = line.find('=').unwrap() + 3;
        assert!(
            error.contains(&format!("h2.toml:3:{column}: http2.{key}: {says}")),
            "{line}: {error}"
        );
        // A wrong TOML type is the reader's own error, as for every other key.
        if says != "invalid type" {
            assert!(error.contains("(hint: "), "{line}: {error}");
        }
    }
}

#[test]
fn an_unknown_http2_key_is_named_with_the_nearest_one() {
    let error = error_line(&format!(
        "listen = \"127.0.0.1:0\"\n[http2]\nmax_concurent_streams = 10\n{SITE}"
    ));
    assert!(
        error.contains("h2.toml:3:1: http2.max_concurent_streams: unknown field"),
        "{error}"
    );
    assert!(
        error.contains("hint: did you mean `max_concurrent_streams`?"),
        "{error}"
    );
}

#[test]
fn h2c_is_a_listen_option() {
    let config = load_str(
        &format!("listen = [\"127.0.0.1:0 h2c\", \"127.0.0.1:0\", \"127.0.0.1:0 tls\"]\n[tls]\ncertificate = \"a.pem\"\ncertificate_key = \"a.key\"\n{SITE}"),
        Path::new("/etc/ampd/ampd.toml"),
    )
    .unwrap_or_else(|error| panic!("{error}"));
    let flags: Vec<(bool, bool)> = config
        .listen
        .iter()
        .map(|Listen { tls, h2c, .. }| (*tls, *h2c))
        .collect();
    assert_eq!(flags, [(false, true), (false, false), (true, false)]);

    let root = TempRoot::new();
    let (code, stdout, stderr) = check(
        root.outside_dir(),
        &format!("listen = \"127.0.0.1:0 h2c\"\n{SITE}"),
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
}

#[test]
fn listen_options_that_cannot_be_used_are_refused_with_both_options_named() {
    let error = error_line(&format!("listen = \"127.0.0.1:0 http2\"\n{SITE}"));
    assert!(
        error.contains("h2.toml:1:10: listen: '127.0.0.1:0 http2': unknown option 'http2'"),
        "{error}"
    );
    assert!(
        error.contains("`tls`") && error.contains("`h2c`"),
        "{error}"
    );

    // TLS already offers HTTP/2 (ALPN): h2c is the cleartext form, the two do not combine.
    for entry in ["127.0.0.1:0 tls h2c", "127.0.0.1:0 h2c tls"] {
        let error = error_line(&format!("listen = [\"{entry}\"]\n{SITE}"));
        assert!(
            error.contains(&format!(
                "h2.toml:1:10: listen: '{entry}': `tls` and `h2c` together"
            )),
            "{error}"
        );
        assert!(error.contains("(hint: "), "{error}");
        assert!(error.contains("ALPN"), "{error}");
    }

    let error = error_line(&format!("listen = \"127.0.0.1:0 h2c h2c\"\n{SITE}"));
    assert!(
        error.contains("listen: '127.0.0.1:0 h2c h2c': `h2c` twice"),
        "{error}"
    );
}

#[test]
fn h2c_with_http2_disabled_is_a_conflict() {
    let error = error_line(&format!(
        "listen = [\"127.0.0.1:0\", \"127.0.0.1:0 h2c\"]\n[http2]\nenabled = false\n{SITE}"
    ));
    assert!(
        error.contains("h2.toml:3:11: http2.enabled: false, and listen has an h2c listener"),
        "{error}"
    );
    assert!(error.contains("(hint: "), "{error}");
    // The complete example with every key says the same.
    let error = error_line(&format!("{EVERY_KEY}{SITE}"));
    assert!(error.contains("http2.enabled: false"), "{error}");
}

/// docs/config.md's `[http2]` table: (key, default) of each row, as written there.
fn documented_keys() -> Vec<(String, String)> {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/config.md"))
            .unwrap();
    let section = docs
        .split("### `[http2]`")
        .nth(1)
        .expect("docs/config.md has an [http2] section");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let key = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let default = cells.next()?.trim_matches('`');
            Some((key.to_owned(), default.to_owned()))
        })
        .collect()
}

#[test]
fn the_documented_keys_and_defaults_are_the_real_ones() {
    let documented = documented_keys();
    let keys: Vec<&str> = documented.iter().map(|(key, _)| key.as_str()).collect();
    let every: Vec<&str> = EVERY_KEY
        .lines()
        .skip(2)
        .map(|line| line.split(" = ").next().unwrap())
        .collect();
    assert_eq!(keys, every, "docs/config.md documents every key, in order");
    for (key, default) in &documented {
        // Each default, written as docs/config.md writes it, reads back as the default.
        let http2 = http2_of(&format!(
            "listen = \"127.0.0.1:0\"\n[http2]\n{key} = {default}\n{SITE}"
        ));
        assert_eq!(http2, Http2::default(), "{key} = {default}");
    }
}
