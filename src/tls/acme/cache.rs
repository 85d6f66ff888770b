//! What request-serving code reads from the state directory, cached per process: a site's
//! certificate, the pending challenges. Any thread of any `mp` worker may ask; each cached
//! value is re-validated against its file's (or directory's) identity and mtime at most once
//! a second (`RECHECK`), so a renewal written by the manager is served within a second
//! everywhere, and a handshake costs a lock and a clock read.
//!
//! Owns: the caches and loading from the files `store` lays out. Must not touch: writing them.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::store::{CERTIFICATE, KEY};
use crate::sync::lock;

/// How long a cached value is used before its file is looked at again. The manager waits
/// longer than this between publishing a challenge and asking the CA to validate it.
pub const RECHECK: Duration = Duration::from_secs(1);

/// Which version of a file or directory a value was loaded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    modified: i64,
    modified_nanos: i64,
    size: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let metadata = fs::metadata(path).ok()?;
    Some(Stamp {
        inode: metadata.ino(),
        modified: metadata.mtime(),
        modified_nanos: metadata.mtime_nsec(),
        size: metadata.size(),
    })
}

struct Entry<T> {
    checked: Instant,
    stamp: Option<Stamp>,
    value: T,
}

/// Values loaded from files, by path.
struct Cache<T> {
    entries: LazyLock<Mutex<HashMap<PathBuf, Entry<T>>>>,
}

impl<T: Clone> Cache<T> {
    const fn new() -> Cache<T> {
        Cache {
            entries: LazyLock::new(|| Mutex::new(HashMap::new())),
        }
    }

    /// The value of `path`: cached, or (once `RECHECK` has passed and the file changed)
    /// `load(path, previous)`.
    fn get(&self, path: &Path, load: impl FnOnce(&Path, Option<&T>) -> T) -> T {
        let mut entries = lock(&self.entries);
        let now = Instant::now();
        if let Some(entry) = entries.get_mut(path) {
            if now.duration_since(entry.checked) < RECHECK {
                return entry.value.clone();
            }
            let current = stamp(path);
            if current == entry.stamp {
                entry.checked = now;
                return entry.value.clone();
            }
        }
        let current = stamp(path);
        let previous = entries.get(path).map(|entry| &entry.value);
        let value = load(path, previous);
        entries.insert(
            path.to_path_buf(),
            Entry {
                checked: now,
                stamp: current,
                value: value.clone(),
            },
        );
        value
    }

    /// Drop what is cached of `path` (the manager of this process just wrote it).
    fn forget(&self, path: &Path) {
        lock(&self.entries).remove(path);
    }
}

static SITES: Cache<Option<Arc<CertifiedKey>>> = Cache::new();
static HTTP: Cache<Arc<HashMap<String, String>>> = Cache::new();
static ALPN: Cache<Arc<HashMap<String, Arc<CertifiedKey>>>> = Cache::new();

/// The certificate kept in `site_dir`.
pub fn site_certificate(site_dir: &Path) -> Option<Arc<CertifiedKey>> {
    SITES.get(&site_dir.join(CERTIFICATE), |chain, previous| {
        // The key is written before the chain; a pair that does not match (or cannot be
        // read) leaves the previous certificate serving.
        certified_key(
            &fs::read(chain).ok()?,
            &fs::read(site_dir.join(KEY)).ok()?,
            Pairing::Checked,
        )
        .map(Arc::new)
        .or_else(|| previous.cloned().flatten())
    })
}

/// The pending HTTP-01 key authorization for `token` in `http_dir`.
pub fn http_challenge(http_dir: &Path, token: &str) -> Option<String> {
    let pending = HTTP.get(http_dir, |dir, _| {
        Arc::new(read_entries(dir, |bytes| String::from_utf8(bytes).ok()))
    });
    pending.get(token).cloned()
}

/// The pending TLS-ALPN-01 certificate for `name` in `alpn_dir`.
pub fn alpn_certificate(alpn_dir: &Path, name: &str) -> Option<Arc<CertifiedKey>> {
    let pending = ALPN.get(alpn_dir, |dir, _| {
        Arc::new(read_entries(dir, |pem| {
            certified_key(&pem, &pem, Pairing::OneFile).map(Arc::new)
        }))
    });
    pending
        .get(&format!("{}.pem", name.to_ascii_lowercase()))
        .cloned()
}

/// Drop the cached values under `path` (a site's directory or a challenge directory).
pub fn forget(path: &Path) {
    SITES.forget(&path.join(CERTIFICATE));
    HTTP.forget(path);
    ALPN.forget(path);
}

/// Each file of `dir` (not the temporary ones) by name, parsed by `parse`.
fn read_entries<T>(dir: &Path, parse: impl Fn(Vec<u8>) -> Option<T>) -> HashMap<String, T> {
    let Ok(entries) = fs::read_dir(dir) else {
        return HashMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            if name.starts_with('.') {
                return None;
            }
            Some((name, parse(fs::read(entry.path()).ok()?)?))
        })
        .collect()
}

/// Whether a chain's leaf is checked against its key when loaded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pairing {
    /// A site's chain and key, written one after the other: a pair that does not match is a
    /// renewal half written, and is not used.
    Checked,
    /// A TLS-ALPN-01 certificate and its key, one file: the check would parse the certificate
    /// with webpki, which refuses the critical `acmeIdentifier` extension it does not know.
    OneFile,
}

/// A chain (PEM, leaf first) and its key (PEM).
fn certified_key(chain_pem: &[u8], key_pem: &[u8], pairing: Pairing) -> Option<CertifiedKey> {
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    if chain.is_empty() {
        return None;
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).ok()?;
    let key = super::super::provider()
        .key_provider
        .load_private_key(key)
        .ok()?;
    let certified = CertifiedKey::new(chain, key);
    (pairing == Pairing::OneFile || certified.keys_match().is_ok()).then_some(certified)
}

#[cfg(test)]
mod tests {
    use crate::programs::test_support::TempDir;
    use crate::tls::acme::challenge::alpn_certificate;
    use crate::tls::acme::store::Store;

    #[test]
    fn pending_answers_are_read_back() {
        let temporary = TempDir::new("cache");
        let store = Store::create(temporary.path()).unwrap();
        store
            .put_alpn("b.test", &alpn_certificate("b.test", "t.k").unwrap())
            .unwrap();
        assert!(super::alpn_certificate(&store.alpn_dir(), "B.test").is_some());
        store.put_http("tok", "tok.thumb").unwrap();
        assert_eq!(
            super::http_challenge(&store.http_dir(), "tok").as_deref(),
            Some("tok.thumb")
        );
    }
}
