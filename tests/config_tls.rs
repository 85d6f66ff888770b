//! The TLS keys (docs/config.md "TLS") through `ampd check`: a configuration using every one of
//! them is accepted once its certificates exist; a mistake in the file is one line naming the
//! file, line, column and key with a hint; a certificate, key or CA file that cannot be used is
//! one line naming the file (both files when a key is not its certificate's).

mod support;

use std::path::Path;

use support::certificates::{write_ca, write_self_signed};
use support::*;

/// `text` written as `DIR/tls.toml`, checked: (exit code, stdout, stderr).
fn check(dir: &Path, text: &str) -> (Option<i32>, String, String) {
    let file = dir.join("tls.toml");
    std::fs::write(&file, text).unwrap();
    run_to_exit(&["check", &file.display().to_string()])
}

/// The one error line `text` gets from `ampd check`.
fn error_line(dir: &Path, text: &str) -> String {
    let (code, stdout, stderr) = check(dir, text);
    assert_eq!(code, Some(1), "{text}\nstdout {stdout}\nstderr {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    lines[0].to_owned()
}

/// As `error_line`, for a mistake in the file itself: `ampd run` refuses it with the same line,
/// before binding anything.
fn file_error_line(dir: &Path, text: &str) -> String {
    let line = error_line(dir, text);
    let file = dir.join("tls.toml").display().to_string();
    let (code, _, run_stderr) = run_to_exit(&["run", "-c", &file]);
    assert_eq!(code, Some(1));
    assert_eq!(run_stderr.trim(), line);
    line
}

fn every_key(root: &TempRoot) -> String {
    format!(
        r#"listen = ["127.0.0.1:0", "127.0.0.1:0 tls"]

[tls]
min_version = "1.2"
ciphers = ["TLS13_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]
session_tickets = true
ticket_rotation = "12h"
session_cache = 20000
handshake_timeout = "10s"
certificate = "certs/default.pem"
certificate_key = "certs/default.key"

[tls.acme]
directory = "https://127.0.0.1:14000/dir"
email = "admin@example.test"
challenge = "http-01"
state_dir = "state"
renew_before = "30d"

[[site]]
server_names = ["a.test", "*.a.test"]
root = "{www}"
certificate = "certs/a.pem"
certificate_key = "certs/a.key"
client_certificates = "required"
client_ca = "certs/clients-ca.pem"
hsts = "365d"
hsts_include_subdomains = true
hsts_preload = true
redirect_https = true

[[site]]
server_names = ["b.test"]
root = "{www}"
certificate = "acme"
client_certificates = "optional"
client_ca = "certs/clients-ca.pem"
"#,
        www = root.path().display()
    )
}

#[test]
fn ampd_check_accepts_every_tls_key() {
    let root = TempRoot::new();
    let dir = root.outside_dir();
    write_self_signed(&dir.join("certs"), "default", &["localhost"]);
    write_self_signed(&dir.join("certs"), "a", &["a.test", "*.a.test"]);
    write_ca(&dir.join("certs"), "clients-ca");
    let (code, stdout, stderr) = check(dir, &every_key(&root));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("configuration OK (2 sites"), "{stdout}");
}

#[test]
fn tls_mistakes_in_the_file_are_refused_at_their_line() {
    let root = TempRoot::new();
    let dir = root.outside_dir();
    let site = format!("[[site]]\nroot = \"{}\"\n", root.path().display());
    for (text, place, key, says) in [
        (
            format!("listen = [\"127.0.0.1:0 tls\"]\n{site}"),
            "1:10",
            "listen",
            "a TLS listener needs a certificate (hint: ",
        ),
        (
            format!("{site}certificate = \"a.pem\"\n"),
            "3:15",
            "site.certificate",
            "certificate without certificate_key (hint: ",
        ),
        (
            format!("{site}client_certificates = \"required\"\n"),
            "3:23",
            "site.client_certificates",
            "\"required\" without client_ca (hint: ",
        ),
        (
            format!("{site}hsts_preload = true\n"),
            "3:16",
            "site.hsts_preload",
            "hsts_preload without hsts (hint: ",
        ),
        (
            format!("[tls]\nmin_version = \"1.0\"\n{site}"),
            "2:15",
            "tls.min_version",
            "'1.0' is not a TLS version ampd offers (hint: ",
        ),
        (
            format!("[tls.acme]\nchallenge = \"dns-01\"\n{site}"),
            "2:13",
            "tls.acme.challenge",
            "unknown challenge 'dns-01' (hint: ",
        ),
        (
            format!("{site}[[site.location]]\npath = \"/a/\"\nhsts = \"1d\"\n"),
            "5:8",
            "site.location.hsts",
            "only valid in a [[site]] (hint: ",
        ),
    ] {
        let line = file_error_line(dir, &text);
        assert!(
            line.contains(&format!("tls.toml:{place}: {key}: {says}")),
            "{place} {key} {says}: {line}"
        );
    }
}

#[test]
fn files_that_cannot_be_used_are_named() {
    let root = TempRoot::new();
    let dir = root.outside_dir();
    let (a_pem, a_key) = write_self_signed(dir, "a", &["a.test"]);
    let (_, b_key) = write_self_signed(dir, "b", &["b.test"]);
    let config = |certificate: &Path, key: &Path| {
        format!(
            "listen = [\"127.0.0.1:0 tls\"]\n[[site]]\nroot = \"{}\"\ncertificate = \"{}\"\ncertificate_key = \"{}\"\n",
            root.path().display(),
            certificate.display(),
            key.display()
        )
    };
    let file = dir.join("tls.toml").display().to_string();
    let line = error_line(dir, &config(&a_pem, &b_key));
    assert_eq!(
        line,
        format!(
            "ampd: {file}: tls: certificate {} does not match key {}",
            a_pem.display(),
            b_key.display()
        )
    );
    // A file that is not there yet says how to make one.
    let missing = dir.join("missing.pem");
    let line = error_line(dir, &config(&missing, &a_key));
    assert_eq!(
        line,
        format!(
            "ampd: {file}: tls: {}: No such file or directory (hint: make it or correct the \
             path (relative to the configuration file); docs/tls.md, \"A self-signed \
             certificate\", makes one with openssl)",
            missing.display()
        )
    );
    let line = error_line(dir, &config(&a_pem, &a_pem));
    assert!(
        line.starts_with(&format!(
            "ampd: {file}: tls: {}: no private key",
            a_pem.display()
        )),
        "{line}"
    );
}
