//! Session resumption: the keys of stateless tickets (RFC 8446 §4.6.1, RFC 5077) and the
//! process's session cache.
//!
//! Ticket keys are derived, never stored or exchanged: HKDF-SHA256 of one random secret (made
//! the first time a ticketer is asked for, so before `mp` forks its workers, which inherit it)
//! and the number of the rotation period (`unix time / ticket_rotation`). Every loop, every
//! worker and every generation therefore agrees on the key of a period without talking. A
//! ticket sealed in period N opens in N and N+1, so it lives between one and two rotation
//! periods, and the lifetime told to clients is one period.
//!
//! Owns: `Ticketer` (rustls's `ProducesTickets`) and the session cache. Must not touch:
//! certificates, connections.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{Aad, Nonce, RandomizedNonceKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hkdf::{Salt, HKDF_SHA256};
use rustls::server::ServerSessionMemoryCache;
use rustls::server::{NoServerSessionStorage, ProducesTickets, StoresServerSessions};

use crate::config::TlsServer;

/// The secret every ticket key is derived from.
pub type Secret = [u8; 32];

/// Separates these keys from anything else the secret could ever be used for (RFC 5869 §3.1).
const KEY_SALT: &[u8] = b"ampd tls session ticket key v1";

/// A ticket: the period it was sealed in, the nonce, then the sealed state with its tag.
const PERIOD_LEN: usize = 8;
const TAG_LEN: usize = 16;

/// The ticketer the configuration asks for, `None` when `session_tickets = false`.
#[must_use]
pub fn ticketer(settings: &TlsServer) -> Option<Arc<dyn ProducesTickets>> {
    if !settings.session_tickets {
        return None;
    }
    Some(Arc::new(Ticketer::new(
        *process_secret(),
        settings.ticket_rotation,
        Arc::new(unix_seconds),
    )))
}

/// The process's secret, made on first use.
fn process_secret() -> &'static Secret {
    static SECRET: OnceLock<Secret> = OnceLock::new();
    SECRET.get_or_init(|| {
        let mut secret = [0; 32];
        // aws-lc's generator aborts the process itself when the system has no entropy to give.
        aws_lc_rs::rand::fill(&mut secret).expect("the system's random source");
        secret
    })
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// The process's session cache (sessions resumed by id in TLS 1.2, and by stateful tickets in
/// TLS 1.3 when tickets are off), kept across reloads so a reload does not cost every client a
/// full handshake; a new, empty one when `session_cache` changes. `0`: no cache.
#[must_use]
pub fn session_storage(settings: &TlsServer) -> Arc<dyn StoresServerSessions> {
    static KEPT: KeptCache = KeptCache::new();
    KEPT.for_size(settings.session_cache)
}

/// A session cache kept for as long as the size asked for stays the same.
struct KeptCache(Mutex<Option<(usize, Arc<dyn StoresServerSessions>)>>);

impl KeptCache {
    const fn new() -> KeptCache {
        KeptCache(Mutex::new(None))
    }

    fn for_size(&self, size: usize) -> Arc<dyn StoresServerSessions> {
        if size == 0 {
            return Arc::new(NoServerSessionStorage {});
        }
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match &*kept {
            Some((kept_size, cache)) if *kept_size == size => cache.clone(),
            _ => {
                let cache: Arc<dyn StoresServerSessions> = ServerSessionMemoryCache::new(size);
                *kept = Some((size, cache.clone()));
                cache
            }
        }
    }
}

/// Seals and opens tickets with the keys of the current and the previous period.
pub struct Ticketer {
    secret: Secret,
    rotation: u64,
    clock: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// The keys of the period last used and of the one before, derived once per period.
    keys: RwLock<Option<PeriodKeys>>,
}

struct PeriodKeys {
    period: u64,
    current: Arc<RandomizedNonceKey>,
    previous: Arc<RandomizedNonceKey>,
}

impl std::fmt::Debug for Ticketer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Ticketer")
            .field("rotation", &self.rotation)
            .finish_non_exhaustive()
    }
}

impl Ticketer {
    /// Keys from `secret`, a new period every `rotation`, time in Unix seconds from `clock`.
    #[must_use]
    pub fn new(
        secret: Secret,
        rotation: Duration,
        clock: Arc<dyn Fn() -> u64 + Send + Sync>,
    ) -> Ticketer {
        Ticketer {
            secret,
            rotation: rotation.as_secs().max(1),
            clock,
            keys: RwLock::new(None),
        }
    }

    fn period_now(&self) -> u64 {
        (self.clock)() / self.rotation
    }

    /// The key of `period` (now's or the one before), deriving the pair when the period moved.
    fn key(&self, now: u64, period: u64) -> Option<Arc<RandomizedNonceKey>> {
        let pick = |keys: &PeriodKeys| {
            if period == keys.period {
                Some(keys.current.clone())
            } else if period.checked_add(1) == Some(keys.period) {
                Some(keys.previous.clone())
            } else {
                None
            }
        };
        if let Some(keys) = &*self.keys.read().unwrap_or_else(PoisonError::into_inner) {
            if keys.period == now {
                return pick(keys);
            }
        }
        let keys = PeriodKeys {
            period: now,
            current: Arc::new(derive(&self.secret, now)?),
            previous: Arc::new(derive(&self.secret, now.wrapping_sub(1))?),
        };
        let key = pick(&keys);
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Some(keys);
        key
    }
}

/// HKDF-SHA256 (RFC 5869) of the secret, the period number as its info.
fn derive(secret: &Secret, period: u64) -> Option<RandomizedNonceKey> {
    let info = period.to_be_bytes();
    let info = [info.as_slice()];
    let pseudo_random = Salt::new(HKDF_SHA256, KEY_SALT).extract(secret);
    let okm = pseudo_random.expand(&info, &AES_256_GCM).ok()?;
    let mut key = [0; 32];
    okm.fill(&mut key).ok()?;
    RandomizedNonceKey::new(&AES_256_GCM, &key).ok()
}

impl ProducesTickets for Ticketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        u32::try_from(self.rotation).unwrap_or(u32::MAX)
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let period = self.period_now();
        let key = self.key(period, period)?;
        let header = period.to_be_bytes();
        let mut sealed = plain.to_vec();
        // The period is authenticated: a ticket cannot be moved to another period's key.
        let nonce = key
            .seal_in_place_append_tag(Aad::from(header), &mut sealed)
            .ok()?;
        let mut ticket = Vec::with_capacity(PERIOD_LEN + NONCE_LEN + sealed.len());
        ticket.extend_from_slice(&header);
        ticket.extend_from_slice(nonce.as_ref());
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < PERIOD_LEN + NONCE_LEN + TAG_LEN {
            return None;
        }
        let (header, rest) = ticket.split_at(PERIOD_LEN);
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let header: [u8; PERIOD_LEN] = header.try_into().ok()?;
        let key = self.key(self.period_now(), u64::from_be_bytes(header))?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut opened = sealed.to_vec();
        let plain_len = key
            .open_in_place(nonce, Aad::from(header), &mut opened)
            .ok()?
            .len();
        opened.truncate(plain_len);
        Some(opened)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    /// A ticketer whose clock the test moves.
    fn at(secret: Secret, clock: &Arc<AtomicU64>) -> Ticketer {
        let clock = clock.clone();
        Ticketer::new(
            secret,
            HOUR,
            Arc::new(move || clock.load(Ordering::Relaxed)),
        )
    }

    fn clock(seconds: u64) -> Arc<AtomicU64> {
        Arc::new(AtomicU64::new(seconds))
    }

    #[test]
    fn a_ticket_opens_in_another_ticketer_with_the_same_secret() {
        // What two mp workers (or two loops, or two generations) are.
        let now = clock(1_000_000 * 3600 + 10);
        let sealer = at([7; 32], &now);
        let opener = at([7; 32], &now);
        let ticket = sealer.encrypt(b"session state").unwrap();
        assert_ne!(&ticket[PERIOD_LEN + NONCE_LEN..], b"session state");
        assert_eq!(
            opener.decrypt(&ticket).as_deref(),
            Some(&b"session state"[..])
        );
        // Another secret (another server) cannot.
        assert_eq!(at([8; 32], &now).decrypt(&ticket), None);
    }

    #[test]
    fn a_ticket_opens_in_its_period_and_the_next_only() {
        let now = clock(5 * 3600 + 3599);
        let ticketer = at([1; 32], &now);
        let ticket = ticketer.encrypt(b"state").unwrap();
        now.store(6 * 3600, Ordering::Relaxed);
        let later = at([1; 32], &now);
        assert_eq!(later.decrypt(&ticket).as_deref(), Some(&b"state"[..]));
        assert_eq!(ticketer.decrypt(&ticket).as_deref(), Some(&b"state"[..]));
        // Two periods on, its key is gone.
        now.store(7 * 3600, Ordering::Relaxed);
        assert_eq!(ticketer.decrypt(&ticket), None);
        assert_eq!(at([1; 32], &now).decrypt(&ticket), None);
        // And one from the future (another clock) is not taken either.
        let future = ticketer.encrypt(b"state").unwrap();
        now.store(6 * 3600, Ordering::Relaxed);
        assert_eq!(ticketer.decrypt(&future), None);
    }

    #[test]
    fn a_tampered_ticket_is_refused() {
        let now = clock(42 * 3600);
        let ticketer = at([3; 32], &now);
        let ticket = ticketer.encrypt(b"some session state").unwrap();
        for at in 0..ticket.len() {
            let mut tampered = ticket.clone();
            tampered[at] ^= 0x01;
            assert_eq!(ticketer.decrypt(&tampered), None, "byte {at} flipped");
        }
        assert_eq!(ticketer.decrypt(&ticket[..ticket.len() - 1]), None);
        assert_eq!(ticketer.decrypt(&[]), None);
        assert_eq!(
            ticketer.decrypt(&[0; PERIOD_LEN + NONCE_LEN + TAG_LEN]),
            None
        );
    }

    #[test]
    fn the_lifetime_is_one_rotation_period() {
        let ticketer = at([0; 32], &clock(0));
        assert!(ticketer.enabled());
        assert_eq!(ticketer.lifetime(), 3600);
    }

    #[test]
    fn the_process_secret_is_made_once() {
        let settings = TlsServer::default();
        let first = ticketer(&settings).unwrap();
        let second = ticketer(&settings).unwrap();
        let ticket = first.encrypt(b"state").unwrap();
        assert_eq!(second.decrypt(&ticket).as_deref(), Some(&b"state"[..]));
        let off = TlsServer {
            session_tickets: false,
            ..TlsServer::default()
        };
        assert!(ticketer(&off).is_none());
    }

    #[test]
    fn the_session_cache_is_kept_while_its_size_is() {
        let kept = KeptCache::new();
        let first = kept.for_size(123);
        assert!(first.put(b"id".to_vec(), b"session".to_vec()));
        // A reload with the same size: the same cache, sessions and all.
        assert_eq!(
            kept.for_size(123).get(b"id").as_deref(),
            Some(&b"session"[..])
        );
        assert_eq!(kept.for_size(124).get(b"id"), None);
        assert!(kept.for_size(124).can_cache());
        assert!(!kept.for_size(0).can_cache());
        // The process's one follows the configuration.
        assert!(session_storage(&TlsServer::default()).can_cache());
        let off = TlsServer {
            session_cache: 0,
            ..TlsServer::default()
        };
        assert!(!session_storage(&off).can_cache());
    }
}
