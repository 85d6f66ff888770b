//! The TLS keys (docs/config.md "TLS") through `ampd check`: a configuration using every one of
//! them is accepted once its certificates exist; a mistake in the file is one line naming the
//! file, line, column and key with a hint; a certificate, key or CA file that cannot be used is
//! one line naming the file (both files when a key is not its certificate's).

use crate::support;

use std::path::Path;

use std::time::Duration;

use support::certificates::{write_ca, write_self_signed, write_self_signed_valid};
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

/// One TLS listener, one site with `certificate` and `key`, and `more` keys.
fn one_site(root: &TempRoot, listen: &str, certificate: &Path, key: &Path, more: &str) -> String {
    format!(
        "listen = {listen}\n[[site]]\nroot = \"{}\"\ncertificate = \"{}\"\ncertificate_key = \"{}\"\n{more}",
        root.path().display(),
        certificate.display(),
        key.display()
    )
}

const TLS_ONLY: &str = "[\"127.0.0.1:0 tls\"]";

/// A certificate outside its validity is still used (a renewal may be on its way, and a client
/// may accept it), but `ampd check` says so, naming the file and the date, and passes.
#[test]
fn a_certificate_outside_its_validity_is_warned_about_with_its_date() {
    let root = TempRoot::new();
    let dir = root.outside_dir();
    let (expired, expired_key) =
        write_self_signed_valid(dir, "expired", &["a.test"], (2020, 1, 1), (2021, 3, 4));
    let (early, early_key) =
        write_self_signed_valid(dir, "early", &["a.test"], (2090, 1, 1), (2091, 1, 1));
    let (good, good_key) = write_self_signed(dir, "good", &["a.test"]);
    for (certificate, key, says) in [
        (
            &expired,
            &expired_key,
            "expired on Mar  4 00:00:00 2021 GMT",
        ),
        (
            &early,
            &early_key,
            "not valid before Jan  1 00:00:00 2090 GMT",
        ),
    ] {
        let (code, stdout, stderr) = check(dir, &one_site(&root, TLS_ONLY, certificate, key, ""));
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains("configuration OK"), "{stdout}");
        let warning = format!("warning: certificate {}: ", certificate.display());
        assert!(
            stderr.contains(&warning) && stderr.contains(says),
            "{warning}...{says}: {stderr}"
        );
    }
    // A client CA past its date is named too: no client certificate would verify.
    let (old_ca, _) =
        write_self_signed_valid(dir, "old-ca", &["ca.test"], (2019, 1, 1), (2020, 1, 1));
    let more = format!(
        "client_certificates = \"required\"\nclient_ca = \"{}\"\n",
        old_ca.display()
    );
    let (code, _, stderr) = check(dir, &one_site(&root, TLS_ONLY, &good, &good_key, &more));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("warning: client_ca {}: ", old_ca.display()))
            && stderr.contains("expired on Jan  1 00:00:00 2020 GMT"),
        "{stderr}"
    );
    let (code, _, stderr) = check(dir, &one_site(&root, TLS_ONLY, &good, &good_key, ""));
    assert_eq!(
        (code, stderr.as_str()),
        (Some(0), ""),
        "a good one: no warning"
    );
}

/// `ampd run` says it in the error log at start-up, and again at each reload that reads it.
#[test]
fn an_expired_certificate_is_warned_about_at_start_and_on_reload() {
    let root = TempRoot::new();
    let dir = root.outside_dir();
    let (expired, key) =
        write_self_signed_valid(dir, "expired", &["a.test"], (2020, 1, 1), (2021, 3, 4));
    let file = dir.join("ampd.toml");
    std::fs::write(&file, one_site(&root, TLS_ONLY, &expired, &key, "")).unwrap();
    let server = Server::start(Options::config_file(&file));
    let says = format!(
        "certificate {}: CN=rcgen self signed cert expired on Mar  4 00:00:00 2021 GMT",
        expired.display()
    );
    // The error log is read by a thread of the test: the line may trail the ready line.
    assert!(
        server.wait_for_stderr(&says, Duration::from_secs(10)),
        "{says}: {}",
        server.stderr()
    );
    server.signal("HUP");
    assert!(
        server.wait_for_stderr(&format!("reload: {says}"), Duration::from_secs(10)),
        "{}",
        server.stderr()
    );
}

/// A PEM file cut short is one line naming the file and what is wrong, in words.
#[test]
fn a_truncated_pem_file_is_named_in_words() {
    let root = TempRoot::new();
    let dir = root.outside_dir();
    let (certificate, key) = write_self_signed(dir, "a", &["a.test"]);
    let whole = std::fs::read_to_string(&certificate).unwrap();
    let cut = dir.join("cut.pem");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let line = error_line(dir, &one_site(&root, TLS_ONLY, &cut, &key, ""));
    assert!(line.contains(&format!("{}: ", cut.display())), "{line}");
    assert!(
        line.contains("\"-----END CERTIFICATE-----\"") && line.contains("cut short"),
        "{line}"
    );
    assert!(!line.contains("[45, "), "bytes, not text: {line}");

    let whole = std::fs::read_to_string(&key).unwrap();
    let cut_key = dir.join("cut.key");
    std::fs::write(&cut_key, &whole[..whole.len() / 2]).unwrap();
    let line = error_line(dir, &one_site(&root, TLS_ONLY, &certificate, &cut_key, ""));
    assert!(line.contains(&format!("{}: ", cut_key.display())), "{line}");
    assert!(
        line.contains("-----END PRIVATE KEY-----") && line.contains("cut short"),
        "{line}"
    );
}

/// A site that requires client certificates can only refuse requests on a plain listener
/// (`403`) unless it sends them to HTTPS: `ampd check` says so.
#[test]
fn a_required_client_certificate_site_on_a_plain_listener_is_warned_about() {
    let root = TempRoot::new();
    let dir = root.outside_dir();
    let (certificate, key) = write_self_signed(dir, "a", &["admin.test"]);
    let ca = write_ca(dir, "clients-ca");
    let required = format!(
        "server_names = [\"admin.test\"]\nclient_certificates = \"required\"\nclient_ca = \"{}\"\n",
        ca.display()
    );
    let both = "[\"127.0.0.1:0\", \"127.0.0.1:0 tls\"]";
    let (code, stdout, stderr) = check(dir, &one_site(&root, both, &certificate, &key, &required));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
    assert!(
        stderr.contains("warning: site admin.test: client_certificates = \"required\"")
            && stderr.contains("127.0.0.1:0")
            && stderr.contains("403")
            && stderr.contains("redirect_https"),
        "{stderr}"
    );
    let redirected = format!("{required}redirect_https = true\n");
    let (code, _, stderr) = check(dir, &one_site(&root, both, &certificate, &key, &redirected));
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    let (code, _, stderr) = check(
        dir,
        &one_site(&root, TLS_ONLY, &certificate, &key, &required),
    );
    assert_eq!((code, stderr.as_str()), (Some(0), ""), "no plain listener");
}
