//! Obtaining one certificate (RFC 8555 §7.1 "Overview"): account → order → for each
//! authorization, publish the chosen challenge's answer and ask the server to validate it →
//! wait for the authorizations → finalize with a CSR for a new key → wait for the order →
//! download the chain → save chain and key.
//!
//! Owns: the order of the steps, the bounded waits (`Retry-After` honoured), publishing and
//! withdrawing challenge answers. Must not touch: deciding when to renew (`manager`).

use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use super::cache::{self, RECHECK};
use super::challenge::{alpn_certificate, key_authorization};
use super::client::{Client, Order};
use super::error::{AcmeError, Step};
use super::https::Https;
use super::store::Store;
use crate::config::{AcmeChallenge, AcmeSettings};

/// The longest wait for one authorization or for the order to become ready or valid.
pub const WAIT_LIMIT: Duration = Duration::from_secs(120);
/// Polling interval when the server gives no `Retry-After`; and the most `Retry-After` is let
/// delay one poll.
const POLL: Duration = Duration::from_secs(1);
const POLL_MAX: Duration = Duration::from_secs(30);

/// A new certificate for `names`, saved in the state directory; returns its `notAfter`.
///
/// # Errors
/// Any step failed; the state directory then holds what it held before (the pending
/// challenge answers are withdrawn).
pub fn obtain(settings: &AcmeSettings, names: &[String]) -> Result<SystemTime, AcmeError> {
    if let Some(name) = names.iter().find(|name| name.starts_with("*.")) {
        return Err(AcmeError::Wildcard { name: name.clone() });
    }
    let store = Store::create(&settings.state_dir)?;
    let account_key = store.account_key()?;
    let https = Https::new(settings.ca_root.as_deref()).map_err(|reason| AcmeError::Transport {
        step: Step::Directory,
        url: settings.directory.clone(),
        reason,
    })?;
    let mut client = Client::connect(https, &settings.directory, account_key)?;
    client.account(settings.email.as_deref())?;
    let order = client.new_order(names)?;
    validate(&mut client, &store, settings.challenge, &order)?;

    let ready = wait(Step::Order, "the order", || {
        let (order, retry) = client.order(&order.url, Step::Order)?;
        Ok(if order.status == "pending" {
            Poll::Again(retry)
        } else {
            Poll::Done(order)
        })
    })?;
    require(&ready, "ready", Step::Order)?;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|error| AcmeError::Crypto(error.to_string()))?;
    let csr = csr(names, &key)?;
    client.finalize(&ready, &csr)?;
    let issued = wait(Step::Finalize, "the certificate", || {
        let (order, retry) = client.order(&ready.url, Step::Finalize)?;
        // `ready` still: the server has not taken the CSR in yet (bounded like the rest).
        Ok(if matches!(order.status.as_str(), "processing" | "ready") {
            Poll::Again(retry)
        } else {
            Poll::Done(order)
        })
    })?;
    require(&issued, "valid", Step::Finalize)?;
    let url = issued
        .certificate
        .clone()
        .ok_or_else(|| AcmeError::Protocol {
            step: Step::Finalize,
            reason: "a valid order without a certificate URL".to_owned(),
        })?;
    let chain = client.download(&url)?;
    let leaf = CertificateDer::pem_slice_iter(chain.as_bytes())
        .next()
        .and_then(Result::ok)
        .ok_or_else(|| AcmeError::Crypto("the downloaded chain has no certificate".to_owned()))?;
    let not_after = super::not_after(&leaf)
        .ok_or_else(|| AcmeError::Crypto("the certificate's validity cannot be read".to_owned()))?;
    store.save_certificate(names, &chain, &key.serialize_pem())?;
    if let Some(site) = store.site_dir(&names[0]) {
        cache::forget(&site);
    }
    Ok(not_after)
}

/// Answer every pending authorization of `order` with the chosen challenge and wait until
/// each is valid.
fn validate(
    client: &mut Client,
    store: &Store,
    challenge: AcmeChallenge,
    order: &Order,
) -> Result<(), AcmeError> {
    let kind = match challenge {
        AcmeChallenge::Http01 => "http-01",
        AcmeChallenge::TlsAlpn01 => "tls-alpn-01",
    };
    let mut published = Published {
        store,
        files: Vec::new(),
    };
    let mut pending = Vec::new();
    for url in &order.authorizations {
        let (authorization, _) = client.authorization(url)?;
        match authorization.status.as_str() {
            "valid" => continue,
            "pending" => {}
            _ => {
                return Err(AcmeError::Invalid {
                    step: Step::Authorization,
                    what: authorization.name,
                    problem: None,
                })
            }
        }
        if authorization.wildcard {
            return Err(AcmeError::Wildcard {
                name: format!("*.{}", authorization.name),
            });
        }
        let chosen = authorization
            .challenges
            .iter()
            .find(|offered| offered.kind == kind)
            .ok_or_else(|| AcmeError::NoChallenge {
                name: authorization.name.clone(),
                kind,
            })?;
        let answer = key_authorization(&chosen.token, client.key());
        match challenge {
            AcmeChallenge::Http01 => published.add(store.put_http(&chosen.token, &answer)?),
            AcmeChallenge::TlsAlpn01 => {
                let pem = alpn_certificate(&authorization.name, &answer)?;
                published.add(store.put_alpn(&authorization.name, &pem)?);
            }
        }
        pending.push((url.clone(), chosen.url.clone(), authorization.name));
    }
    if pending.is_empty() {
        return Ok(());
    }
    // Every process serving requests (each `mp` worker caches for `RECHECK`) must see the
    // answers before the server comes to look.
    cache::forget(&store.http_dir());
    cache::forget(&store.alpn_dir());
    thread::sleep(RECHECK + Duration::from_millis(100));
    for (_, challenge_url, _) in &pending {
        client.respond(challenge_url)?;
    }
    for (url, _, name) in &pending {
        let authorization = wait(Step::Authorization, name, || {
            let (authorization, retry) = client.authorization(url)?;
            Ok(if authorization.status == "pending" {
                Poll::Again(retry)
            } else {
                Poll::Done(authorization)
            })
        })?;
        if authorization.status != "valid" {
            let problem = authorization
                .challenges
                .iter()
                .find(|offered| offered.kind == kind)
                .and_then(|offered| offered.error.clone());
            return Err(AcmeError::Invalid {
                step: Step::Challenge,
                what: format!("{kind} for {name}"),
                problem,
            });
        }
    }
    Ok(())
}

/// The challenge answers published for one order, withdrawn when it is done either way.
struct Published<'a> {
    store: &'a Store,
    files: Vec<PathBuf>,
}

impl Published<'_> {
    fn add(&mut self, file: PathBuf) {
        self.files.push(file);
    }
}

impl Drop for Published<'_> {
    fn drop(&mut self) {
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
        cache::forget(&self.store.http_dir());
        cache::forget(&self.store.alpn_dir());
    }
}

/// One look at something the server is working on.
enum Poll<T> {
    Done(T),
    /// Not yet; the server's `Retry-After` in seconds, if it gave one.
    Again(Option<u64>),
}

/// Poll until done, sleeping as `Retry-After` says (at least `POLL`, at most `POLL_MAX`),
/// for at most `WAIT_LIMIT` in all.
fn wait<T>(
    step: Step,
    what: &str,
    mut poll: impl FnMut() -> Result<Poll<T>, AcmeError>,
) -> Result<T, AcmeError> {
    let started = Instant::now();
    loop {
        match poll()? {
            Poll::Done(value) => return Ok(value),
            Poll::Again(retry) => {
                let waited = started.elapsed();
                if waited >= WAIT_LIMIT {
                    return Err(AcmeError::TimedOut {
                        step,
                        what: what.to_owned(),
                        waited,
                    });
                }
                let pause = retry
                    .map_or(POLL, Duration::from_secs)
                    .clamp(POLL, POLL_MAX)
                    .min(WAIT_LIMIT - waited);
                thread::sleep(pause);
            }
        }
    }
}

/// A CSR (RFC 2986) for `names`, signed by `key`, DER.
fn csr(names: &[String], key: &rcgen::KeyPair) -> Result<Vec<u8>, AcmeError> {
    let crypto = |error: rcgen::Error| AcmeError::Crypto(format!("CSR: {error}"));
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(crypto)?;
    // The common name, if any, must be one of the names (RFC 8555 §7.4: the CA checks it).
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, names[0].clone());
    let request = params.serialize_request(key).map_err(crypto)?;
    Ok(request.der().to_vec())
}

fn require(order: &Order, status: &str, step: Step) -> Result<(), AcmeError> {
    if order.status == status {
        return Ok(());
    }
    Err(AcmeError::Invalid {
        step,
        what: format!("the order ({})", order.status),
        problem: order.error.clone(),
    })
}
