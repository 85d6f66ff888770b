//! The certificate manager: for each site with `certificate = "acme"`, keep a valid
//! certificate in the state directory. At start, after a reload and every hour it looks at the
//! stored certificate: kept while more than `renew_before` of its validity is left, obtained
//! anew otherwise (or when the site's names changed). A failure leaves the stored certificate
//! serving, goes to the error log, and is retried after a backoff (1 min, doubling to 1 h).
//!
//! It runs on a thread of its own (an `mp` master, which must stay single-threaded, runs it in
//! a process of its own: `process`); nothing here runs on an event loop.
//!
//! Owns: when to obtain. Must not touch: how (`order`), serving (`cache`).

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use super::store::{Store, CERTIFICATE};
use crate::config::{AcmeSettings, CertificateSource, Config, HostName, Level, Site};
use crate::log::error;

/// How often stored certificates are looked at.
pub const CHECK_EVERY: Duration = Duration::from_secs(3600);
const BACKOFF_FIRST: Duration = Duration::from_secs(60);
const BACKOFF_MAX: Duration = Duration::from_secs(3600);

/// What the manager looks after: the account settings and each ACME site's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub settings: AcmeSettings,
    pub sites: Vec<Vec<String>>,
}

/// A site's names as a certificate lists them: `*.a.test` for a suffix.
#[must_use]
pub fn site_names(site: &Site) -> Vec<String> {
    site.names
        .iter()
        .map(|name| match name {
            HostName::Exact(name) => name.to_ascii_lowercase(),
            HostName::Suffix(suffix) => format!("*{}", suffix.to_ascii_lowercase()),
        })
        .collect()
}

impl Plan {
    #[must_use]
    pub fn of(config: &Config) -> Plan {
        Plan {
            settings: config.tls.acme.clone(),
            sites: config
                .sites
                .iter()
                .filter(|site| site.tls.certificate == Some(CertificateSource::Acme))
                .map(site_names)
                .filter(|names| !names.is_empty())
                .collect(),
        }
    }
}

/// Why a certificate is to be obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    Missing,
    NamesChanged,
    /// Less than `renew_before` is left before `not_after`.
    Expiring {
        not_after: SystemTime,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The stored certificate serves; look again by `renew_at` at the latest.
    Keep {
        renew_at: SystemTime,
    },
    Obtain(Why),
}

/// Whether the stored certificate for `names` will do at `now`.
#[must_use]
pub fn decide(
    store: &Store,
    names: &[String],
    renew_before: Duration,
    now: SystemTime,
) -> Decision {
    let leaf = store
        .site_dir(&names[0])
        .and_then(|site| std::fs::read(site.join(CERTIFICATE)).ok())
        .and_then(|pem| CertificateDer::pem_slice_iter(&pem).next()?.ok());
    let Some(not_after) = leaf.as_deref().and_then(super::not_after) else {
        return Decision::Obtain(Why::Missing);
    };
    if store.stored_names(&names[0]) != names {
        return Decision::Obtain(Why::NamesChanged);
    }
    let renew_at = not_after
        .checked_sub(renew_before)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    if now >= renew_at {
        Decision::Obtain(Why::Expiring { not_after })
    } else {
        Decision::Keep { renew_at }
    }
}

/// The pause after the `failures`-th failure in a row: 1 min, doubling, at most 1 h.
#[must_use]
pub fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    (BACKOFF_FIRST * 2u32.pow(doublings)).min(BACKOFF_MAX)
}

/// One site as the manager tends it.
struct Tended {
    names: Vec<String>,
    next: Instant,
    failures: u32,
}

/// The manager's loop: tend every site when due; a new plan (a reload) makes every site due.
/// Returns when the sender is gone.
pub fn run(mut plan: Plan, plans: &Receiver<Plan>) {
    loop {
        let mut sites: Vec<Tended> = plan
            .sites
            .iter()
            .map(|names| Tended {
                names: names.clone(),
                next: Instant::now(),
                failures: 0,
            })
            .collect();
        loop {
            for site in &mut sites {
                if Instant::now() >= site.next {
                    tend(&plan.settings, site);
                }
            }
            let next = sites.iter().map(|site| site.next).min();
            let timeout = next.map_or(CHECK_EVERY, |next| {
                next.saturating_duration_since(Instant::now())
            });
            match plans.recv_timeout(timeout) {
                Ok(new) => {
                    plan = new;
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

fn tend(settings: &AcmeSettings, site: &mut Tended) {
    let names = site.names.join(", ");
    let now = SystemTime::now();
    let why = match decide(
        &Store::at(&settings.state_dir),
        &site.names,
        settings.renew_before,
        now,
    ) {
        Decision::Keep { renew_at } => {
            site.failures = 0;
            let until_renewal = renew_at.duration_since(now).unwrap_or_default();
            site.next = Instant::now() + until_renewal.min(CHECK_EVERY);
            return;
        }
        Decision::Obtain(why) => why,
    };
    let reason = match why {
        Why::Missing => "none is stored".to_owned(),
        Why::NamesChanged => "the site's names changed".to_owned(),
        Why::Expiring { not_after } => format!(
            "it expires in {} h",
            not_after.duration_since(now).unwrap_or_default().as_secs() / 3600
        ),
    };
    error::log(
        Level::Info,
        format_args!("acme: obtaining a certificate for {names} ({reason})"),
    );
    match super::order::obtain(settings, &site.names) {
        Ok(not_after) => {
            site.failures = 0;
            site.next = Instant::now() + CHECK_EVERY;
            let left = not_after
                .duration_since(SystemTime::now())
                .unwrap_or_default();
            error::log(
                Level::Info,
                format_args!(
                    "acme: certificate for {names} obtained, valid for {} more days",
                    left.as_secs() / 86_400
                ),
            );
        }
        Err(failure) => {
            site.failures += 1;
            let pause = backoff(site.failures);
            site.next = Instant::now() + pause;
            error::log(
                Level::Error,
                format_args!(
                    "acme: {names}: {failure}; the stored certificate (if any) keeps serving; retrying in {} s",
                    pause.as_secs()
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::{backoff, decide, Decision, Why};
    use crate::tls::acme::store::Store;

    const DAY: Duration = Duration::from_secs(86_400);

    /// Save a certificate for `names` valid until 2040-01-01, and return that time.
    fn stored(store: &Store, names: &[String]) -> SystemTime {
        let mut params = rcgen::CertificateParams::new(names.to_vec()).unwrap();
        params.not_after = rcgen::date_time_ymd(2040, 1, 1);
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let certificate = params.self_signed(&key).unwrap();
        store
            .save_certificate(names, &certificate.pem(), &key.serialize_pem())
            .unwrap();
        SystemTime::UNIX_EPOCH + Duration::from_secs(2_208_988_800)
    }

    #[test]
    fn renewal_decision() {
        let temporary = crate::programs::test_support::TempDir::new("decide");
        let store = Store::create(temporary.path()).unwrap();
        let names = vec!["a.test".to_owned(), "b.test".to_owned()];
        let not_after = SystemTime::UNIX_EPOCH + Duration::from_secs(2_208_988_800);
        let now = not_after - 90 * DAY;
        assert_eq!(
            decide(&store, &names, 30 * DAY, now),
            Decision::Obtain(Why::Missing)
        );

        assert_eq!(stored(&store, &names), not_after);
        assert_eq!(
            decide(&store, &names, 30 * DAY, now),
            Decision::Keep {
                renew_at: not_after - 30 * DAY
            }
        );
        // Within renew_before of the end: renew.
        let expiring = Decision::Obtain(Why::Expiring { not_after });
        assert_eq!(decide(&store, &names, 100 * DAY, now), expiring);
        assert_eq!(decide(&store, &names, 30 * DAY, now + 60 * DAY), expiring);
        assert_eq!(decide(&store, &names, 30 * DAY, not_after + DAY), expiring);
        // A name added to the site: a new certificate.
        let more = vec![
            "a.test".to_owned(),
            "b.test".to_owned(),
            "c.test".to_owned(),
        ];
        assert_eq!(
            decide(&store, &more, 30 * DAY, now),
            Decision::Obtain(Why::NamesChanged)
        );
    }

    #[test]
    fn backoff_doubles_from_a_minute_to_an_hour() {
        let minutes: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs() / 60).collect();
        assert_eq!(minutes, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(1000), Duration::from_secs(3600));
    }
}
