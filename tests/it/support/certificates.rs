//! Certificates made at test time (rcgen): a self-signed leaf for some names, and a CA, written
//! as PEM files where a configuration names them.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};

/// `DIR/STEM.pem` and `DIR/STEM.key`: a self-signed certificate for `names` and its key.
pub fn write_self_signed(dir: &Path, stem: &str, names: &[&str]) -> (PathBuf, PathBuf) {
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let params = CertificateParams::new(names).expect("certificate names");
    write(dir, stem, &params)
}

/// As `write_self_signed`, valid from `not_before` to `not_after` (`(year, month, day)`, at
/// midnight UTC): an expired certificate, or one not valid yet.
pub fn write_self_signed_valid(
    dir: &Path,
    stem: &str,
    names: &[&str],
    not_before: (i32, u8, u8),
    not_after: (i32, u8, u8),
) -> (PathBuf, PathBuf) {
    let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
    let mut params = CertificateParams::new(names).expect("certificate names");
    params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
    params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
    write(dir, stem, &params)
}

/// `DIR/STEM.pem` (and its key): a CA certificate, for `client_ca`.
pub fn write_ca(dir: &Path, stem: &str) -> PathBuf {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("ampd test CA {stem}"));
    write(dir, stem, &params).0
}

fn write(dir: &Path, stem: &str, params: &CertificateParams) -> (PathBuf, PathBuf) {
    let key = KeyPair::generate().expect("a key");
    let certificate = params.self_signed(&key).expect("a certificate");
    std::fs::create_dir_all(dir).expect("the certificates' directory");
    let pem = dir.join(format!("{stem}.pem"));
    let key_file = dir.join(format!("{stem}.key"));
    std::fs::write(&pem, certificate.pem()).expect("write the certificate");
    std::fs::write(&key_file, key.serialize_pem()).expect("write the key");
    (pem, key_file)
}
