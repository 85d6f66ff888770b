//! `tls_keys`'s tests: every key read into its typed setting, and every refusal naming its line
//! and key with a hint.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::load::load_str;
use super::super::{
    AcmeChallenge, CertificateFiles, CertificateSource, ClientCertificates, Config, ConfigError,
    Hsts, MinVersion,
};

fn load(text: &str) -> Result<Config, ConfigError> {
    load_str(text, Path::new("/etc/ampd/ampd.toml"))
}

/// The one error `text` gets: (line, key, message), with a hint.
fn error(text: &str) -> (usize, String, String) {
    let error = load(text).expect_err("an error");
    assert!(error.hint.is_some(), "a hint: {error}");
    (error.line, error.key, error.message)
}

const TLS_LISTEN: &str = "listen = [\"127.0.0.1:8080\", \"127.0.0.1:8443 tls\"]\n";
const SITE_FILES: &str =
    "[[site]]\nroot = \"/tmp\"\ncertificate = \"a.pem\"\ncertificate_key = \"a.key\"\n";

#[test]
fn the_tls_table_reads_every_key() {
    let config = load(&format!(
        "{TLS_LISTEN}\
         [tls]\n\
         min_version = \"1.3\"\n\
         ciphers = [\"TLS13_AES_128_GCM_SHA256\", \"TLS13_CHACHA20_POLY1305_SHA256\"]\n\
         session_tickets = false\n\
         ticket_rotation = \"6h\"\n\
         session_cache = 0\n\
         handshake_timeout = \"3s\"\n\
         certificate = \"default.pem\"\n\
         certificate_key = \"/keys/default.key\"\n\
         ocsp_response = \"default.ocsp\"\n\
         [tls.acme]\n\
         directory = \"https://127.0.0.1:14000/dir\"\n\
         ca_root = \"pebble.minica.pem\"\n\
         email = \"admin@example.test\"\n\
         challenge = \"tls-alpn-01\"\n\
         state_dir = \"state\"\n\
         renew_before = \"20d\"\n\
         [[site]]\nroot = \"/tmp\"\n"
    ))
    .unwrap();
    let tls = &config.tls;
    assert_eq!(tls.min_version, MinVersion::Tls13);
    assert_eq!(
        tls.ciphers,
        ["TLS13_AES_128_GCM_SHA256", "TLS13_CHACHA20_POLY1305_SHA256"]
    );
    assert!(!tls.session_tickets);
    assert_eq!(tls.ticket_rotation, Duration::from_secs(6 * 3600));
    assert_eq!(tls.session_cache, 0);
    assert_eq!(tls.handshake_timeout, Duration::from_secs(3));
    // Relative paths are relative to the file's directory.
    assert_eq!(
        tls.certificate,
        Some(CertificateFiles {
            certificate: PathBuf::from("/etc/ampd/default.pem"),
            key: PathBuf::from("/keys/default.key"),
            ocsp_response: Some(PathBuf::from("/etc/ampd/default.ocsp")),
        })
    );
    let acme = &tls.acme;
    assert_eq!(acme.directory, "https://127.0.0.1:14000/dir");
    assert_eq!(
        acme.ca_root.as_deref(),
        Some(Path::new("/etc/ampd/pebble.minica.pem"))
    );
    assert_eq!(acme.email.as_deref(), Some("admin@example.test"));
    assert_eq!(acme.challenge, AcmeChallenge::TlsAlpn01);
    assert_eq!(acme.state_dir, PathBuf::from("/etc/ampd/state"));
    assert_eq!(acme.renew_before, Duration::from_secs(20 * 86_400));
}

#[test]
fn without_a_tls_table_the_defaults_hold() {
    let config = load("[[site]]\nroot = \"/tmp\"\n").unwrap();
    let tls = &config.tls;
    assert_eq!(tls.min_version, MinVersion::Tls12);
    assert!(tls.ciphers.is_empty());
    assert!(tls.session_tickets);
    assert_eq!(tls.ticket_rotation, Duration::from_secs(12 * 3600));
    assert_eq!(tls.session_cache, 20_000);
    assert_eq!(tls.handshake_timeout, Duration::from_secs(10));
    assert_eq!(tls.certificate, None);
    assert_eq!(tls.acme.challenge, AcmeChallenge::Http01);
    assert_eq!(config.sites[0].tls, super::super::SiteTls::default());
}

#[test]
fn min_version_takes_a_string_or_a_number() {
    for (written, version) in [
        ("\"1.2\"", MinVersion::Tls12),
        ("1.2", MinVersion::Tls12),
        ("\"1.3\"", MinVersion::Tls13),
        ("1.3", MinVersion::Tls13),
    ] {
        let config = load(&format!(
            "[tls]\nmin_version = {written}\n[[site]]\nroot = \"/tmp\"\n"
        ))
        .unwrap();
        assert_eq!(config.tls.min_version, version, "{written}");
    }
}

#[test]
fn site_keys_are_read() {
    let config = load(&format!(
        "{TLS_LISTEN}\
         [[site]]\nserver_names = [\"a.test\", \"*.a.test\"]\nroot = \"/tmp\"\n\
         certificate = \"a.pem\"\ncertificate_key = \"a.key\"\nocsp_response = \"a.ocsp.der\"\n\
         client_certificates = \"required\"\nclient_ca = \"clients-ca.pem\"\n\
         hsts = \"365d\"\nhsts_include_subdomains = true\nhsts_preload = true\n\
         redirect_https = true\n\
         [[site]]\nserver_names = [\"b.test\"]\nroot = \"/tmp\"\n\
         certificate = \"acme\"\nclient_certificates = \"optional\"\nclient_ca = \"/ca.pem\"\n\
         hsts = 0\n\
         [[site]]\nserver_names = [\"c.test\"]\nroot = \"/tmp\"\nclient_certificates = \"off\"\n"
    ))
    .unwrap();
    let [a, b, c] = &config.sites[..] else {
        panic!("three sites")
    };
    assert_eq!(
        a.tls.certificate,
        Some(CertificateSource::Files(CertificateFiles {
            certificate: PathBuf::from("/etc/ampd/a.pem"),
            key: PathBuf::from("/etc/ampd/a.key"),
            ocsp_response: Some(PathBuf::from("/etc/ampd/a.ocsp.der")),
        }))
    );
    assert_eq!(
        a.tls.client_certificates,
        ClientCertificates::Required {
            ca: PathBuf::from("/etc/ampd/clients-ca.pem")
        }
    );
    assert_eq!(
        a.tls.hsts,
        Some(Hsts {
            max_age: Duration::from_secs(365 * 86_400),
            include_subdomains: true,
            preload: true,
        })
    );
    assert!(a.tls.redirect_https);
    assert_eq!(b.tls.certificate, Some(CertificateSource::Acme));
    assert_eq!(
        b.tls.client_certificates,
        ClientCertificates::Optional {
            ca: PathBuf::from("/ca.pem")
        }
    );
    // max-age=0 is how a site tells browsers to forget it (RFC 6797 §6.1.1).
    assert_eq!(
        b.tls.hsts,
        Some(Hsts {
            max_age: Duration::ZERO,
            include_subdomains: false,
            preload: false,
        })
    );
    assert!(!b.tls.redirect_https);
    assert_eq!(c.tls.client_certificates, ClientCertificates::Off);
    assert_eq!(c.tls.certificate, None);
}

#[test]
fn the_tls_table_refuses_bad_values() {
    let tls = |body: &str| format!("[tls]\n{body}\n[[site]]\nroot = \"/tmp\"\n");
    for (body, key, message) in [
        ("min_version = \"1.1\"", "tls.min_version", "'1.1'"),
        ("min_version = 1.0", "tls.min_version", "'1'"),
        ("ciphers = []", "tls.ciphers", "empty list"),
        (
            "ciphers = [\"TLS13_AES_128_GCM_SHA256\", \"TLS13_AES_128_GCM_SHA256\"]",
            "tls.ciphers",
            "twice",
        ),
        (
            "ticket_rotation = \"soon\"",
            "tls.ticket_rotation",
            "not a duration",
        ),
        (
            "ticket_rotation = 0",
            "tls.ticket_rotation",
            "more than zero",
        ),
        ("ticket_rotation = \"8d\"", "tls.ticket_rotation", "7 days"),
        ("session_cache = -1", "tls.session_cache", "less than 0"),
        (
            "handshake_timeout = 0",
            "tls.handshake_timeout",
            "more than zero",
        ),
        (
            "certificate = \"a.pem\"",
            "tls.certificate",
            "without certificate_key",
        ),
        (
            "certificate_key = \"a.key\"",
            "tls.certificate_key",
            "without certificate",
        ),
        (
            "certificate = \"acme\"\ncertificate_key = \"a.key\"",
            "tls.certificate",
            "per site",
        ),
        (
            "certificate = \"\"\ncertificate_key = \"a.key\"",
            "tls.certificate",
            "empty",
        ),
        (
            "ocsp_response = \"a.ocsp\"",
            "tls.ocsp_response",
            "without certificate",
        ),
    ] {
        let (line, found_key, found) = error(&tls(body));
        assert_eq!(found_key, key, "{body}: {found}");
        assert!(found.contains(message), "{body}: {found}");
        assert!(line >= 2, "{body}: line {line}");
    }
}

#[test]
fn the_acme_table_refuses_bad_values() {
    let acme = |body: &str| format!("[tls.acme]\n{body}\n[[site]]\nroot = \"/tmp\"\n");
    for (body, key, message) in [
        (
            "directory = \"http://ca.test/dir\"",
            "tls.acme.directory",
            "https",
        ),
        ("directory = \"ca.test\"", "tls.acme.directory", "https"),
        (
            "email = \"nobody\"",
            "tls.acme.email",
            "not an email address",
        ),
        (
            "email = \"a b@c.test\"",
            "tls.acme.email",
            "not an email address",
        ),
        ("challenge = \"dns-01\"", "tls.acme.challenge", "'dns-01'"),
        ("state_dir = \"\"", "tls.acme.state_dir", "empty"),
        ("ca_root = \"\"", "tls.acme.ca_root", "empty"),
        (
            "renew_before = 0",
            "tls.acme.renew_before",
            "more than zero",
        ),
    ] {
        let (line, found_key, found) = error(&acme(body));
        assert_eq!((line, found_key.as_str()), (2, key), "{body}: {found}");
        assert!(found.contains(message), "{body}: {found}");
    }
    let (line, key, message) = error("[tls.acme]\ndirectry = \"https://x\"\n");
    assert_eq!((line, key.as_str()), (2, "tls.acme.directry"), "{message}");
}

#[test]
fn site_keys_refuse_bad_values_and_incomplete_pairs() {
    let site = |body: &str| {
        format!("{TLS_LISTEN}[tls]\ncertificate = \"d.pem\"\ncertificate_key = \"d.key\"\n[[site]]\nserver_names = [\"a.test\"]\nroot = \"/tmp\"\n{body}\n")
    };
    // The site's keys start on line 8.
    for (body, key, message) in [
        (
            "certificate = \"a.pem\"",
            "site.certificate",
            "without certificate_key",
        ),
        (
            "certificate_key = \"a.key\"",
            "site.certificate_key",
            "without certificate",
        ),
        (
            "certificate = \"\"\ncertificate_key = \"a.key\"",
            "site.certificate",
            "empty",
        ),
        (
            "certificate = \"acme\"\ncertificate_key = \"a.key\"",
            "site.certificate_key",
            "certificate = \"acme\"",
        ),
        (
            "certificate = \"acme\"\nocsp_response = \"a.ocsp\"",
            "site.ocsp_response",
            "certificate = \"acme\"",
        ),
        (
            "ocsp_response = \"a.ocsp\"",
            "site.ocsp_response",
            "without certificate",
        ),
        (
            "client_certificates = \"yes\"",
            "site.client_certificates",
            "'yes'",
        ),
        (
            "client_certificates = \"required\"",
            "site.client_certificates",
            "without client_ca",
        ),
        (
            "client_certificates = \"optional\"",
            "site.client_certificates",
            "without client_ca",
        ),
        (
            "client_ca = \"ca.pem\"",
            "site.client_ca",
            "client_certificates",
        ),
        (
            "client_certificates = \"off\"\nclient_ca = \"ca.pem\"",
            "site.client_ca",
            "client_certificates",
        ),
        ("hsts = \"forever\"", "site.hsts", "not a duration"),
        (
            "hsts_include_subdomains = true",
            "site.hsts_include_subdomains",
            "without hsts",
        ),
        ("hsts_preload = true", "site.hsts_preload", "without hsts"),
        (
            "hsts = \"365d\"\nhsts_preload = true",
            "site.hsts_preload",
            "hsts_include_subdomains",
        ),
        (
            "hsts = \"30d\"\nhsts_include_subdomains = true\nhsts_preload = true",
            "site.hsts_preload",
            "365d",
        ),
    ] {
        let (line, found_key, found) = error(&site(body));
        assert_eq!(found_key, key, "{body}: {found}");
        assert!(found.contains(message), "{body}: {found}");
        assert!(line >= 7, "{body}: line {line}");
    }
}

#[test]
fn site_keys_are_refused_in_a_location() {
    for key in [
        "certificate = \"a.pem\"",
        "certificate_key = \"a.key\"",
        "ocsp_response = \"a.ocsp\"",
        "client_certificates = \"required\"",
        "client_ca = \"ca.pem\"",
        "hsts = \"1d\"",
        "hsts_include_subdomains = true",
        "hsts_preload = true",
        "redirect_https = true",
    ] {
        let (line, found_key, message) = error(&format!(
            "[[site]]\nroot = \"/tmp\"\n[[site.location]]\npath = \"/a/\"\n{key}\n"
        ));
        let name = key.split(' ').next().unwrap();
        assert_eq!(
            (line, found_key.as_str()),
            (5, format!("site.location.{name}").as_str()),
            "{message}"
        );
        assert!(message.contains("only valid in a [[site]]"), "{message}");
    }
}

#[test]
fn a_tls_listener_needs_a_default_certificate() {
    // The default site has none, [tls] has none, no site uses ACME.
    let (line, key, message) = error(&format!(
        "{TLS_LISTEN}[[site]]\nroot = \"/tmp\"\n\
         [[site]]\nserver_names = [\"a.test\"]\nroot = \"/tmp\"\n\
         certificate = \"a.pem\"\ncertificate_key = \"a.key\"\n"
    ));
    assert_eq!((line, key.as_str()), (1, "listen"), "{message}");
    assert!(message.contains("needs a certificate"), "{message}");
    // Any of the three is enough.
    load(&format!("{TLS_LISTEN}{SITE_FILES}")).unwrap();
    load(&format!(
        "{TLS_LISTEN}[tls]\ncertificate = \"d.pem\"\ncertificate_key = \"d.key\"\n\
         [[site]]\nroot = \"/tmp\"\n"
    ))
    .unwrap();
    load(&format!(
        "{TLS_LISTEN}[[site]]\nroot = \"/tmp\"\n\
         [[site]]\nserver_names = [\"a.test\"]\nroot = \"/tmp\"\ncertificate = \"acme\"\n"
    ))
    .unwrap();
    // No TLS listener: nothing is needed.
    load("[[site]]\nroot = \"/tmp\"\n").unwrap();
}

#[test]
fn redirect_https_needs_a_tls_listener() {
    let (line, key, message) =
        error("listen = \"127.0.0.1:8080\"\n[[site]]\nroot = \"/tmp\"\nredirect_https = true\n");
    assert_eq!(
        (line, key.as_str()),
        (4, "site.redirect_https"),
        "{message}"
    );
    assert!(message.contains("no TLS listener"), "{message}");
    let config = load(&format!("{TLS_LISTEN}{SITE_FILES}redirect_https = true\n")).unwrap();
    assert!(config.sites[0].tls.redirect_https);
}

#[test]
fn an_acme_site_needs_names_a_certificate_authority_can_validate() {
    let (line, key, message) = error(&format!(
        "{TLS_LISTEN}{SITE_FILES}[[site]]\nserver_names = [\"b.test\", \"*.b.test\"]\nroot = \"/tmp\"\ncertificate = \"acme\"\n"
    ));
    assert_eq!((line, key.as_str()), (9, "site.certificate"), "{message}");
    assert!(message.contains("*.b.test"), "{message}");
    let (line, key, message) = error(&format!(
        "{TLS_LISTEN}[[site]]\nroot = \"/tmp\"\ncertificate = \"acme\"\n"
    ));
    assert_eq!((line, key.as_str()), (4, "site.certificate"), "{message}");
    assert!(message.contains("server_names"), "{message}");
}

#[test]
fn an_acme_site_needs_the_listener_its_challenge_arrives_on() {
    let acme_site =
        "[[site]]\nserver_names = [\"b.test\"]\nroot = \"/tmp\"\ncertificate = \"acme\"\n";
    // HTTP-01 arrives over plain HTTP.
    let (line, key, message) = error(&format!(
        "listen = [\"127.0.0.1:8443 tls\"]\n{SITE_FILES}{acme_site}"
    ));
    assert_eq!((line, key.as_str()), (9, "site.certificate"), "{message}");
    assert!(message.contains("http-01"), "{message}");
    load(&format!(
        "listen = [\"127.0.0.1:8443 tls\"]\n[tls.acme]\nchallenge = \"tls-alpn-01\"\n{SITE_FILES}{acme_site}"
    ))
    .unwrap();
    // TLS-ALPN-01 arrives over TLS.
    let (line, key, message) = error(&format!(
        "listen = [\"127.0.0.1:8080\"]\n[tls.acme]\nchallenge = \"tls-alpn-01\"\n{acme_site}"
    ));
    assert_eq!((line, key.as_str()), (7, "site.certificate"), "{message}");
    assert!(message.contains("tls-alpn-01"), "{message}");
}

#[test]
fn a_misspelt_tls_key_gets_the_nearest_one() {
    let error = load("[tls]\nsession_tikets = true\n[[site]]\nroot = \"/tmp\"\n").unwrap_err();
    assert_eq!((error.line, error.key.as_str()), (2, "tls.session_tikets"));
    assert_eq!(
        error.hint.as_deref(),
        Some("did you mean `session_tickets`?")
    );
    let error = load("[[site]]\nroot = \"/tmp\"\ncertificat = \"a.pem\"\n").unwrap_err();
    assert_eq!(error.hint.as_deref(), Some("did you mean `certificate`?"));
}

#[test]
fn a_plain_and_a_tls_listener_may_both_ask_for_port_0() {
    let config = load(&format!(
        "listen = [\"127.0.0.1:0\", \"127.0.0.1:0 tls\"]\n{SITE_FILES}"
    ))
    .unwrap();
    let tls: Vec<bool> = config.listen.iter().map(|listen| listen.tls).collect();
    assert_eq!(tls, [false, true]);
    let error = load(&format!(
        "listen = [\"127.0.0.1:8443\", \"127.0.0.1:8443 tls\"]\n{SITE_FILES}"
    ))
    .unwrap_err();
    assert!(error.message.contains("listed twice"), "{error}");
}
