//! Who may see a location: address rules, then HTTP Basic authentication (RFC 7617) against
//! bcrypt or argon2 hashes.
//!
//! Owns: the allow/deny decision, password verification (`password_matches`), and a bounded
//! cache of credentials already verified. Verifying a hash costs milliseconds of CPU by design
//! (that is what makes stolen hashes slow to crack), so `check` never does it: it answers
//! `Verify`, and the connection hands the work to a helper (`Job::Verify`) like a disk read,
//! then `remember`s a success. Failed attempts are never cached.
//! Must not touch: sockets; the response (conn writes `401`/`403`).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use argon2::PasswordVerifier;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

use crate::config::{self, AddressRange};

/// Verified credentials kept per location; past this the cache starts over.
const VERIFIED_CACHE: usize = 1024;

#[derive(Debug)]
pub enum Verdict {
    Allowed {
        user: Option<String>,
    },
    /// The address is not allowed: `403`.
    Forbidden,
    /// No or wrong credentials: `401` with this `WWW-Authenticate` value.
    Unauthorized {
        challenge: Box<[u8]>,
    },
    /// A known user with credentials not verified yet: check `password` against `hash` (off
    /// the loop), then `remember` the credentials or answer `challenge`.
    Verify {
        user: String,
        password: Box<[u8]>,
        hash: Arc<str>,
        challenge: Box<[u8]>,
    },
}

#[derive(Debug)]
pub struct Access {
    allow: Vec<AddressRange>,
    deny: Vec<AddressRange>,
    auth: Option<Authenticator>,
}

#[derive(Debug)]
struct Authenticator {
    challenge: Box<[u8]>,
    users: HashMap<String, Arc<str>>,
    verified: Mutex<HashMap<Box<[u8]>, String>>,
}

impl Access {
    #[must_use]
    pub fn new(settings: &config::Access) -> Access {
        Access {
            allow: settings.allow.clone(),
            deny: settings.deny.clone(),
            auth: settings.basic_auth.as_ref().map(|auth| Authenticator {
                challenge: format!("Basic realm=\"{}\", charset=\"UTF-8\"", auth.realm)
                    .into_bytes()
                    .into_boxed_slice(),
                users: auth
                    .users
                    .iter()
                    .map(|(user, hash)| (user.clone(), Arc::from(hash.as_str())))
                    .collect(),
                verified: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Whether nothing is checked (the common case costs one branch).
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty() && self.auth.is_none()
    }

    /// Deny wins; a non-empty allow list lets only its addresses through; then credentials.
    #[must_use]
    pub fn check(&self, peer: IpAddr, authorization: Option<&[u8]>) -> Verdict {
        if self.deny.iter().any(|range| range.contains(peer))
            || (!self.allow.is_empty() && !self.allow.iter().any(|range| range.contains(peer)))
        {
            return Verdict::Forbidden;
        }
        let Some(auth) = &self.auth else {
            return Verdict::Allowed { user: None };
        };
        let unauthorized = || Verdict::Unauthorized {
            challenge: auth.challenge.clone(),
        };
        let Some(authorization) = authorization else {
            return unauthorized();
        };
        if let Some(user) = auth.known(authorization) {
            return Verdict::Allowed { user: Some(user) };
        }
        match auth.parse(authorization) {
            Some((user, password, hash)) => Verdict::Verify {
                user,
                password,
                hash,
                challenge: auth.challenge.clone(),
            },
            None => unauthorized(),
        }
    }

    /// `authorization` was verified for `user`: later requests with it pass at once.
    pub fn remember(&self, authorization: &[u8], user: &str) {
        if let Some(auth) = &self.auth {
            let mut verified = auth.verified.lock().unwrap_or_else(PoisonError::into_inner);
            if verified.len() >= VERIFIED_CACHE {
                verified.clear();
            }
            verified.insert(authorization.into(), user.to_owned());
        }
    }
}

impl Authenticator {
    /// The user of credentials verified before.
    fn known(&self, authorization: &[u8]) -> Option<String> {
        self.verified
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(authorization)
            .cloned()
    }

    /// `Basic base64(user:password)` for a configured user: (user, password, their hash).
    fn parse(&self, authorization: &[u8]) -> Option<(String, Box<[u8]>, Arc<str>)> {
        let (scheme, encoded) = split_once(authorization, b' ')?;
        if !scheme.eq_ignore_ascii_case(b"basic") {
            return None;
        }
        let decoded = base64_decode(trim(encoded))?;
        let (user, password) = split_once(&decoded, b':')?;
        let user = std::str::from_utf8(user).ok()?;
        let hash = self.users.get(user)?.clone();
        Some((user.to_owned(), password.into(), hash))
    }
}

/// Check `password` against a bcrypt or argon2 (PHC string) hash (a `Job::Verify` runs it).
#[must_use]
pub fn password_matches(password: &[u8], hash: &str) -> bool {
    if hash.starts_with("$argon2") {
        return argon2::PasswordHash::new(hash).is_ok_and(|parsed| {
            argon2::Argon2::default()
                .verify_password(password, &parsed)
                .is_ok()
        });
    }
    bcrypt::verify(password, hash).unwrap_or(false)
}

fn split_once(bytes: &[u8], separator: u8) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|byte| *byte == separator)?;
    Some((&bytes[..at], &bytes[at + 1..]))
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| *b != b' ').unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| *b != b' ')
        .map_or(start, |at| at + 1);
    &bytes[start..end]
}

/// Standard base64 (RFC 4648 §4), padding optional: RFC 7617 §2 says padded, some clients
/// leave it out.
const CREDENTIALS: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    CREDENTIALS.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_rfc_4648_vectors() {
        assert_eq!(base64_decode(b"Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(base64_decode(b"Zm9vYg==").unwrap(), b"foob");
        assert_eq!(base64_decode(b"Zm9vYmE=").unwrap(), b"fooba");
        assert_eq!(base64_decode(b"Zm9vYg").unwrap(), b"foob");
        assert!(base64_decode(b"Zm9v!").is_none());
        assert!(
            base64_decode(b"Zm9vY").is_none(),
            "a lone sextet ends no byte"
        );
        assert!(
            base64_decode(b"Zm9v-_8").is_none(),
            "the url-safe letters are not standard"
        );
    }

    #[test]
    fn rules_and_passwords() {
        let hash = bcrypt::hash("secret", 4).unwrap();
        let settings = config::Access {
            allow: vec![AddressRange {
                network: "127.0.0.0".parse().unwrap(),
                prefix: 8,
            }],
            deny: vec![AddressRange {
                network: "127.0.0.2".parse().unwrap(),
                prefix: 32,
            }],
            basic_auth: Some(config::BasicAuth {
                realm: "r".into(),
                users: vec![("alice".into(), hash)],
            }),
        };
        let access = Access::new(&settings);
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(matches!(
            access.check("10.0.0.1".parse().unwrap(), None),
            Verdict::Forbidden
        ));
        assert!(matches!(
            access.check("127.0.0.2".parse().unwrap(), None),
            Verdict::Forbidden
        ));
        assert!(matches!(
            access.check(local, None),
            Verdict::Unauthorized { .. }
        ));
        // alice:secret, alice:wrong
        let good = b"Basic YWxpY2U6c2VjcmV0";
        let bad = b"Basic YWxpY2U6d3Jvbmc=";
        for (authorization, expected) in [(&bad[..], false), (&good[..], true)] {
            match access.check(local, Some(authorization)) {
                Verdict::Verify {
                    user,
                    password,
                    hash,
                    ..
                } => {
                    assert_eq!(user, "alice");
                    assert_eq!(password_matches(&password, &hash), expected);
                    if expected {
                        access.remember(authorization, &user);
                    }
                }
                other => panic!("{other:?}"),
            }
        }
        match access.check(local, Some(good)) {
            Verdict::Allowed { user } => assert_eq!(user.as_deref(), Some("alice")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            access.check(local, Some(b"Basic Ym9iOng=")),
            Verdict::Unauthorized { .. }
        ));
    }
}
