//! Each field against what `openssl x509 -nameopt RFC2253` prints for the same certificate,
//! made at test time with the `openssl` CLI.

use std::path::{Path, PathBuf};
use std::process::Command;

use rustls::pki_types::CertificateDer;

use super::{describe, openssl_time};

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("ampd-client-cert-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn openssl(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl CLI (Debian package openssl)");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A CA, and a client certificate it signed for `subject` with `serial`; the subject may name
/// `opaque`, an attribute (OID 1.2.3.4) only this request's configuration knows.
fn issue(dir: &Path, subject: &str, serial: &str) {
    std::fs::write(
        dir.join("oid.cnf"),
        "oid_section = extra\n[extra]\nopaque = 1.2.3.4\n[req]\ndistinguished_name = dn\n[dn]\n",
    )
    .unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let ca = [&ec[..], &["-x509", "-keyout", "ca.key", "-out", "ca.pem"]].concat();
    let ca = [
        &ca[..],
        &["-days", "30", "-subj", "/C=DE/O=Example\\, Inc./CN=Test CA"],
    ]
    .concat();
    openssl(dir, &[&["req"][..], &ca].concat());
    let request = [
        &ec[..],
        &[
            "-config", "oid.cnf", "-keyout", "c.key", "-out", "c.csr", "-utf8",
        ],
    ]
    .concat();
    let request = [&request[..], &["-multivalue-rdn", "-subj", subject]].concat();
    openssl(dir, &[&["req"][..], &request].concat());
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "c.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            serial,
            "-days",
            "2",
            "-out",
            "c.pem",
        ],
    );
    openssl(
        dir,
        &["x509", "-in", "c.pem", "-outform", "DER", "-out", "c.der"],
    );
}

/// `openssl x509 -subject -issuer -serial -dates` for `c.pem`, by field.
fn printed(dir: &Path) -> Vec<(String, String)> {
    let text = openssl(
        dir,
        &[
            "x509", "-in", "c.pem", "-noout", "-nameopt", "RFC2253", "-subject", "-issuer",
            "-serial", "-dates",
        ],
    );
    text.lines()
        .map(|line| {
            let (name, value) = line.split_once('=').unwrap();
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

fn check(name: &str, subject: &str, serial: &str) {
    let dir = scratch(name);
    issue(&dir.0, subject, serial);
    let der = CertificateDer::from(std::fs::read(dir.0.join("c.der")).unwrap());
    let described = describe(&der).expect("the certificate parses");
    let expected = printed(&dir.0);
    let field = |name: &str| {
        expected
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .unwrap_or_else(|| panic!("openssl printed no {name}: {expected:?}"))
    };
    assert_eq!(described.subject, field("subject"), "{name}: subject");
    assert_eq!(described.issuer, field("issuer"), "{name}: issuer");
    assert_eq!(described.serial, field("serial"), "{name}: serial");
    assert_eq!(
        described.not_before,
        field("notBefore"),
        "{name}: notBefore"
    );
    assert_eq!(described.not_after, field("notAfter"), "{name}: notAfter");
    let pem = std::fs::read_to_string(dir.0.join("c.pem")).unwrap();
    assert_eq!(described.pem, pem, "{name}: PEM");
}

#[test]
fn a_plain_certificate_reads_as_openssl_prints_it() {
    check("plain", "/O=Example/CN=alice", "1");
}

#[test]
fn escapes_multi_valued_rdns_non_ascii_and_unknown_attributes_read_as_openssl_prints_them() {
    // `,+"\<>;` escaped, `#` first and a space last escaped, `Zürich` as its UTF-8 bytes, a
    // multi-valued RDN (its members reversed with the rest), an attribute OpenSSL has no name
    // for (`#` and its DER), a serial with its high bit set (DER adds a zero byte).
    check(
        "escapes",
        "/DC=test/DC=example/O=Zürich+OU=R&D/CN=#alice <a@b>; \"x\" \\, y\\+z \
         /emailAddress=alice@example.test/opaque=hidden",
        "0x8A0B0C0D0E0F",
    );
}

#[test]
fn garbage_is_not_a_certificate() {
    assert_eq!(
        describe(&CertificateDer::from(&b"\x30\x03\x02\x01"[..])),
        None
    );
}

#[test]
fn times_pad_the_day_with_a_space() {
    assert_eq!(openssl_time(946_684_800), "Jan  1 00:00:00 2000 GMT");
    assert_eq!(openssl_time(1_795_608_000), "Nov 25 12:00:00 2026 GMT");
}
