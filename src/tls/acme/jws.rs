//! The ACME account key and the requests it signs: JWS (RFC 7515) in the flattened JSON
//! serialization with ES256 (ECDSA P-256, SHA-256, the 64-byte `r || s` signature of RFC 7518
//! §3.4), the public key as a JWK (RFC 7517) and its SHA-256 thumbprint (RFC 7638), which key
//! authorizations are made from (RFC 8555 §8.1).
//!
//! Owns: signing and the key's JSON forms. Must not touch: where the key is kept (`store`),
//! the conversation (`client`).

use aws_lc_rs::digest::{digest, SHA256};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

/// The account's ECDSA P-256 key.
pub struct AccountKey {
    pair: EcdsaKeyPair,
    /// PKCS#8, as stored.
    pkcs8_pem: String,
}

impl std::fmt::Debug for AccountKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "AccountKey({})", self.thumbprint())
    }
}

/// Whom a request is signed as (RFC 8555 §6.2): the key itself until the account exists
/// (`newAccount`), then the account's URL.
#[derive(Clone, Copy, Debug)]
pub enum Signer<'a> {
    Jwk,
    Kid(&'a str),
}

impl AccountKey {
    /// A new random key.
    ///
    /// # Errors
    /// The random source failed.
    pub fn generate() -> Result<AccountKey, String> {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|error| error.to_string())?;
        AccountKey::from_pem(&pair.serialize_pem())
    }

    /// The key in `pem` (PKCS#8 `PRIVATE KEY`).
    ///
    /// # Errors
    /// Not a PKCS#8 P-256 key.
    pub fn from_pem(pem: &str) -> Result<AccountKey, String> {
        let parsed = rcgen::KeyPair::from_pem(pem).map_err(|error| error.to_string())?;
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &parsed.serialize_der())
                .map_err(|error| format!("not an ECDSA P-256 key: {error}"))?;
        Ok(AccountKey {
            pair,
            pkcs8_pem: pem.to_owned(),
        })
    }

    #[must_use]
    pub fn pem(&self) -> &str {
        &self.pkcs8_pem
    }

    /// The public key's JWK members, in the lexicographic order RFC 7638 §3 hashes them in.
    fn jwk_members(&self) -> [(&'static str, String); 4] {
        // An uncompressed SEC1 point: 0x04, x (32 bytes), y (32 bytes).
        let point = self.pair.public_key().as_ref();
        [
            ("crv", "P-256".to_owned()),
            ("kty", "EC".to_owned()),
            ("x", base64url(&point[1..33])),
            ("y", base64url(&point[33..65])),
        ]
    }

    /// The public key as a JWK.
    #[must_use]
    pub fn jwk(&self) -> Value {
        let members = self.jwk_members();
        let object = members
            .into_iter()
            .map(|(name, value)| (name.to_owned(), Value::String(value)))
            .collect();
        Value::Object(object)
    }

    /// base64url(SHA-256(the canonical JWK)), RFC 7638.
    #[must_use]
    pub fn thumbprint(&self) -> String {
        let members = self.jwk_members();
        let borrowed: Vec<(&str, &str)> = members
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        thumbprint(&borrowed)
    }

    /// The body of a POST to `url` (RFC 8555 §6.2): `payload` as JSON, or `None` for a
    /// POST-as-GET (an empty payload, §6.3).
    ///
    /// # Errors
    /// The signature could not be made (the random source failed).
    pub fn sign(
        &self,
        signer: Signer<'_>,
        nonce: &str,
        url: &str,
        payload: Option<&Value>,
    ) -> Result<Vec<u8>, String> {
        let mut protected = json!({ "alg": "ES256", "nonce": nonce, "url": url });
        match signer {
            Signer::Jwk => protected["jwk"] = self.jwk(),
            Signer::Kid(account) => protected["kid"] = Value::String(account.to_owned()),
        }
        let protected = base64url(protected.to_string().as_bytes());
        let payload = payload.map_or_else(String::new, |payload| {
            base64url(payload.to_string().as_bytes())
        });
        let signing_input = format!("{protected}.{payload}");
        let signature = self
            .pair
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .map_err(|_| "ECDSA signing failed".to_owned())?;
        let body = json!({
            "protected": protected,
            "payload": payload,
            "signature": base64url(signature.as_ref()),
        });
        Ok(body.to_string().into_bytes())
    }
}

/// RFC 7638 §3: SHA-256 of the JSON object of `members` (the key type's required members,
/// already in lexicographic order), with no whitespace, base64url.
#[must_use]
pub fn thumbprint(members: &[(&str, &str)]) -> String {
    let mut canonical = String::from("{");
    for (at, (name, value)) in members.iter().enumerate() {
        if at > 0 {
            canonical.push(',');
        }
        // Member names and the values of these key types never need escaping (base64url,
        // `EC`, `P-256`), so the JSON is written as is.
        canonical.push_str(&format!("\"{name}\":\"{value}\""));
    }
    canonical.push('}');
    base64url(digest(&SHA256, canonical.as_bytes()).as_ref())
}

/// `bytes` in base64url without padding (RFC 7515 §2), how JWS and ACME carry every binary
/// value.
#[must_use]
pub fn base64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use aws_lc_rs::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
    use serde_json::{json, Value};

    use super::{thumbprint, AccountKey, Signer};
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;

    /// RFC 7638 §3.1: the RSA key of RFC 7517 Appendix A.1 and its thumbprint.
    #[test]
    fn thumbprint_of_rfc_7638_example() {
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
        assert_eq!(
            thumbprint(&[("e", "AQAB"), ("kty", "RSA"), ("n", n)]),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
    }

    #[test]
    fn account_key_thumbprint_hashes_its_jwk() {
        let key = AccountKey::generate().unwrap();
        let jwk = key.jwk();
        let members = [
            ("crv", jwk["crv"].as_str().unwrap()),
            ("kty", jwk["kty"].as_str().unwrap()),
            ("x", jwk["x"].as_str().unwrap()),
            ("y", jwk["y"].as_str().unwrap()),
        ];
        assert_eq!(members[0].1, "P-256");
        assert_eq!(URL_SAFE_NO_PAD.decode(members[2].1).unwrap().len(), 32);
        assert_eq!(key.thumbprint(), thumbprint(&members));
        // The same key read back from its PEM has the same thumbprint.
        let again = AccountKey::from_pem(key.pem()).unwrap();
        assert_eq!(again.thumbprint(), key.thumbprint());
    }

    fn part(body: &Value, name: &str) -> Vec<u8> {
        URL_SAFE_NO_PAD
            .decode(body[name].as_str().unwrap())
            .unwrap()
    }

    #[test]
    fn es256_jws_verifies_with_the_jwk_and_carries_the_header() {
        let key = AccountKey::generate().unwrap();
        let payload = json!({ "termsOfServiceAgreed": true });
        let body = key
            .sign(
                Signer::Jwk,
                "nonce-1",
                "https://ca.test/new-acct",
                Some(&payload),
            )
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        let protected: Value = serde_json::from_slice(&part(&body, "protected")).unwrap();
        assert_eq!(protected["alg"], "ES256");
        assert_eq!(protected["nonce"], "nonce-1");
        assert_eq!(protected["url"], "https://ca.test/new-acct");
        assert_eq!(protected["jwk"], key.jwk());
        assert!(protected.get("kid").is_none());
        let sent: Value = serde_json::from_slice(&part(&body, "payload")).unwrap();
        assert_eq!(sent, payload);
        let signature = part(&body, "signature");
        assert_eq!(signature.len(), 64, "ES256 is r || s, 32 bytes each");
        // Verify with the public key rebuilt from the JWK alone.
        let mut point = vec![4u8];
        point.extend(
            URL_SAFE_NO_PAD
                .decode(protected["jwk"]["x"].as_str().unwrap())
                .unwrap(),
        );
        point.extend(
            URL_SAFE_NO_PAD
                .decode(protected["jwk"]["y"].as_str().unwrap())
                .unwrap(),
        );
        let input = format!(
            "{}.{}",
            body["protected"].as_str().unwrap(),
            body["payload"].as_str().unwrap()
        );
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(input.as_bytes(), &signature)
            .expect("the signature verifies");
        // A changed payload does not.
        assert!(UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(format!("{input}x").as_bytes(), &signature)
            .is_err());
    }

    #[test]
    fn post_as_get_has_an_empty_payload_and_a_kid() {
        let key = AccountKey::generate().unwrap();
        let body = key
            .sign(
                Signer::Kid("https://ca.test/acct/1"),
                "n",
                "https://ca.test/o/1",
                None,
            )
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["payload"], "");
        let protected: Value = serde_json::from_slice(&part(&body, "protected")).unwrap();
        assert_eq!(protected["kid"], "https://ca.test/acct/1");
        assert!(protected.get("jwk").is_none());
    }
}
