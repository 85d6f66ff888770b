//! Whether the certificates read from a file are within their dates (RFC 5280 §4.1.2.5), said
//! as warnings naming the file, the certificate and the date. Such a certificate is still
//! served, not refused: a renewal may be on its way, and turning HTTPS off would help no one;
//! but browsers refuse it, so the operator hears of it from `ampd check`, at start-up and at
//! each reload.
//!
//! Owns: the dates check and its wording. Must not touch: reading the files (`context`).

use std::path::Path;

use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::client_certificate::{openssl_time, rfc2253};

/// One warning per certificate of `chain` (read from `path`, which `what` names: `certificate`,
/// `client_ca`) that is not valid at `now` (Unix seconds): `what PATH: SUBJECT expired on DATE`,
/// or `... not valid before DATE`.
#[must_use]
pub fn warnings(what: &str, path: &Path, chain: &[CertificateDer<'_>], now: i64) -> Vec<String> {
    chain
        .iter()
        .filter_map(|der| {
            let (_, certificate) = X509Certificate::from_der(der.as_ref()).ok()?;
            let validity = certificate.validity();
            let (not_before, not_after) = (
                validity.not_before.timestamp(),
                validity.not_after.timestamp(),
            );
            let state = if now > not_after {
                format!("expired on {}", openssl_time(not_after))
            } else if now < not_before {
                format!("not valid before {}", openssl_time(not_before))
            } else {
                return None;
            };
            Some(format!(
                "{what} {}: {} {state}",
                path.display(),
                rfc2253(certificate.subject())
            ))
        })
        .collect()
}

/// Now, in Unix seconds.
#[must_use]
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(not_before: (i32, u8, u8), not_after: (i32, u8, u8)) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(vec!["a.test".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    #[test]
    fn each_certificate_outside_its_dates_is_named_with_the_date() {
        // 2024-06-01.
        let now = 1_717_200_000;
        let chain = [
            certificate((2024, 1, 1), (2025, 1, 1)),
            certificate((2020, 1, 1), (2024, 5, 31)),
            certificate((2024, 6, 2), (2030, 1, 1)),
        ];
        let found = warnings("certificate", Path::new("/etc/a.pem"), &chain, now);
        assert_eq!(
            found,
            [
                "certificate /etc/a.pem: CN=rcgen self signed cert expired on May 31 00:00:00 2024 GMT",
                "certificate /etc/a.pem: CN=rcgen self signed cert not valid before Jun  2 00:00:00 2024 GMT",
            ]
        );
    }
}
