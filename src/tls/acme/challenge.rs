//! What a challenge is answered with: the key authorization (RFC 8555 §8.1), served as is for
//! HTTP-01 (§8.3), and for TLS-ALPN-01 (RFC 8737 §3) a self-signed certificate for the name
//! carrying the critical `acmeIdentifier` extension: the SHA-256 of the key authorization.
//!
//! Owns: making those answers. Must not touch: where they are kept (`store`) or served
//! (`conn::handler::acme_challenge`, `tls::context`).

use aws_lc_rs::digest::{digest, SHA256};

use super::error::AcmeError;
use super::jws::AccountKey;

/// `token.thumbprint` (RFC 8555 §8.1).
#[must_use]
pub fn key_authorization(token: &str, key: &AccountKey) -> String {
    format!("{token}.{}", key.thumbprint())
}

/// A TLS-ALPN-01 answer as PEM: the certificate, then its key.
///
/// # Errors
/// The certificate could not be made (`name` is not a DNS name).
pub fn alpn_certificate(name: &str, key_authorization: &str) -> Result<String, AcmeError> {
    let crypto = |error: rcgen::Error| AcmeError::Crypto(format!("{name}: {error}"));
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(crypto)?;
    // RFC 8737 §3: exactly one dNSName, the one being validated.
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).map_err(crypto)?;
    let hashed = digest(&SHA256, key_authorization.as_bytes());
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(hashed.as_ref())];
    let certificate = params.self_signed(&key).map_err(crypto)?;
    Ok(format!("{}{}", certificate.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::digest::{digest, SHA256};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;

    use super::{alpn_certificate, key_authorization};
    use x509_parser::prelude::{FromDer, X509Certificate};

    use crate::tls::acme::jws::AccountKey;

    /// id-pe-acmeIdentifier (RFC 8737 §6.1).
    const ACME_IDENTIFIER: &str = "1.3.6.1.5.5.7.1.31";

    #[test]
    fn key_authorization_is_token_dot_thumbprint() {
        let key = AccountKey::generate().unwrap();
        let made = key_authorization("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA", &key);
        let (token, thumbprint) = made.split_once('.').unwrap();
        assert_eq!(token, "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA");
        assert_eq!(thumbprint, key.thumbprint());
        assert_eq!(thumbprint.len(), 43, "base64url of 32 bytes, unpadded");
    }

    #[test]
    fn alpn_certificate_carries_the_critical_acme_identifier() {
        let pem = alpn_certificate("a.test", "token.thumb").unwrap();
        let certificate = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let (_, parsed) = X509Certificate::from_der(&certificate).unwrap();
        let extension = parsed
            .extensions()
            .iter()
            .find(|extension| extension.oid.to_id_string() == ACME_IDENTIFIER)
            .expect("the acmeIdentifier extension");
        assert!(extension.critical, "RFC 8737 §3: the extension is critical");
        // extnValue holds an OCTET STRING of the 32-byte digest.
        let mut expected = vec![0x04, 0x20];
        expected.extend_from_slice(digest(&SHA256, b"token.thumb").as_ref());
        assert_eq!(extension.value, expected);
        // The key follows the certificate in the same PEM.
        assert!(pem.contains("BEGIN PRIVATE KEY"));
        // And it names a.test (its DER holds the dNSName).
        assert!(certificate.windows(6).any(|window| window == b"a.test"));
    }
}
