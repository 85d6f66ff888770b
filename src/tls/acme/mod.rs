//! Automatic certificates from an ACME directory (RFC 8555), for every site with
//! `certificate = "acme"`: the account, orders, HTTP-01 (RFC 8555 §8.3) and TLS-ALPN-01
//! (RFC 8737) challenges, renewal before expiry.
//!
//! * `manager` decides when a site needs a certificate (at start, after a reload, hourly) and
//!   retries failures with a backoff; `order` obtains one (`client` speaks the protocol over
//!   `https`, signing with `jws`; `challenge` makes the answers); `process` runs the manager
//!   as a process of its own under `mp`.
//! * `store` is the state directory: the account key, each site's chain and key, the pending
//!   challenge answers. It is what the processes share: `cache` reads it for the functions
//!   below, which any thread of any `mp` worker calls (a handshake, a request).
//!
//! Owns: obtaining and renewing certificates, and answering challenges from the state
//! directory. Must not touch: sockets of the server, connection state (the TLS context asks
//! `certificate` and `challenge_certificate`; `conn` asks `http_challenge`).

mod cache;
mod challenge;
mod client;
mod error;
mod https;
mod jws;
mod manager;
mod order;
pub mod process;
mod store;

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustls::sign::CertifiedKey;
use x509_parser::prelude::{FromDer, X509Certificate};

pub use error::{AcmeError, Problem, Step};
pub use manager::Plan;

use crate::config::{AcmeSettings, Arch, Config, Level, Site};
use crate::log::error as error_log;
use crate::sync::lock;
use store::Store;

/// The path prefix of HTTP-01 answers (RFC 8555 §8.3).
pub const HTTP_CHALLENGE_PREFIX: &str = "/.well-known/acme-challenge/";

/// The current certificate of an ACME site, `None` until one has been obtained. Read from the
/// state directory (cached; a renewal is served within a second, no reload needed).
#[must_use]
pub fn certificate(site: &Site, settings: &AcmeSettings) -> Option<Arc<CertifiedKey>> {
    let names = manager::site_names(site);
    let dir = Store::at(&settings.state_dir).site_dir(names.first()?)?;
    cache::site_certificate(&dir)
}

/// The certificate answering a pending TLS-ALPN-01 challenge for `server_name`.
#[must_use]
pub fn challenge_certificate(
    server_name: &str,
    settings: &AcmeSettings,
) -> Option<Arc<CertifiedKey>> {
    cache::alpn_certificate(&Store::at(&settings.state_dir).alpn_dir(), server_name)
}

/// The key authorization of a pending HTTP-01 challenge whose token is `token`.
#[must_use]
pub fn http_challenge(token: &str, settings: &AcmeSettings) -> Option<String> {
    if !is_token(token) {
        return None;
    }
    cache::http_challenge(&Store::at(&settings.state_dir).http_dir(), token)
}

/// Obtain a certificate for `names` now, whatever is stored (what the manager does when one
/// is due); returns its `notAfter`.
///
/// # Errors
/// The step that failed, with the server's problem document when it gave one.
pub fn obtain(settings: &AcmeSettings, names: &[String]) -> Result<SystemTime, AcmeError> {
    order::obtain(settings, names)
}

/// The running manager, if any.
enum Running {
    Thread(Sender<Plan>),
    Process(process::ManagerProcess),
}

static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

/// Start the manager (once privileges are dropped: it writes the state directory as the
/// server's user). Without ACME sites nothing starts until a reload brings one.
pub fn start(config: &Config) {
    update(config);
}

/// Give the manager a reloaded configuration: every site is looked at again now.
pub fn update(config: &Config) {
    let plan = Plan::of(config);
    let mut running = lock(&RUNNING);
    let delivered = match running.as_mut() {
        Some(Running::Thread(plans)) => plans.send(plan.clone()).is_ok(),
        Some(Running::Process(manager)) => manager.send(&plan, &config.logs).is_ok(),
        None => false,
    };
    if delivered || plan.sites.is_empty() {
        return;
    }
    // An `mp` master must stay single-threaded (it forks workers): its manager is a process.
    let started = if config.arch == Arch::Mp {
        process::ManagerProcess::spawn(&plan, &config.logs).map(Running::Process)
    } else {
        let (plans, received) = mpsc::channel();
        std::thread::Builder::new()
            .name("acme".to_owned())
            .spawn(move || manager::run(plan, &received))
            .map(|_| Running::Thread(plans))
    };
    match started {
        Ok(manager) => *running = Some(manager),
        Err(failure) => error_log::log(
            Level::Error,
            format_args!("acme: cannot start the certificate manager: {failure}"),
        ),
    }
}

/// Whether `token` is made only of base64url letters (an ACME token, RFC 8555 §8.1: safe as a
/// file name and in a URL path).
fn is_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 256
        && token
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// A certificate's `notAfter` (RFC 5280 §4.1.2.5), what renewal is timed by; `None` if the DER
/// is not a certificate or the time is before 1970.
fn not_after(certificate: &[u8]) -> Option<SystemTime> {
    let (_, parsed) = X509Certificate::from_der(certificate).ok()?;
    let seconds = u64::try_from(parsed.validity().not_after.timestamp()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::{is_token, not_after};

    #[test]
    fn tokens_are_base64url_letters_only() {
        assert!(is_token("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA"));
        assert!(!is_token(""));
        assert!(!is_token("../account.key"));
        assert!(!is_token("a.b"));
        assert!(!is_token("a+b/c"));
    }

    #[test]
    fn not_after_of_a_made_certificate() {
        let mut params = rcgen::CertificateParams::new(vec!["a.test".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2031, 7, 9);
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let certificate = params.self_signed(&key).unwrap();
        // 2031-07-09T00:00:00Z
        assert_eq!(
            not_after(certificate.der()),
            Some(UNIX_EPOCH + Duration::from_secs(1_941_321_600))
        );
        assert_eq!(not_after(b"\x30\x03\x02\x01"), None);
        assert_eq!(not_after(&certificate.der()[..40]), None);
    }
}
