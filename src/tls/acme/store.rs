//! The state directory (`[tls.acme] state_dir`, mode 0700): what the manager obtained and what
//! every process serving requests reads.
//!
//! ```text
//! account.key                      the ACME account's key (PKCS#8 PEM, 0600)
//! sites/NAME/certificate.pem       a site's chain, leaf first (NAME: its first server name)
//! sites/NAME/key.pem               its key (0600)
//! sites/NAME/names                 the names it was issued for, one per line
//! challenges/http-01/TOKEN         a pending HTTP-01 key authorization
//! challenges/tls-alpn-01/NAME.pem  a pending TLS-ALPN-01 certificate and key (0600)
//! ```
//!
//! Every file is written to a temporary name in its directory and renamed over the old one, so
//! a reader sees the old file or the new one, never a part. A site's key is written before its
//! chain (readers load the pair only when they match).
//!
//! Owns: the layout and writing it. Must not touch: caching what is read (`cache`).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::error::AcmeError;
use super::jws::AccountKey;

pub const ACCOUNT_KEY: &str = "account.key";
pub const CERTIFICATE: &str = "certificate.pem";
pub const KEY: &str = "key.pem";
pub const NAMES: &str = "names";

/// Private files: keys and challenge certificates.
const PRIVATE: u32 = 0o600;
const PUBLIC: u32 = 0o644;

/// The state directory of one `[tls.acme]` table.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

fn state_error(path: &Path, error: &io::Error) -> AcmeError {
    AcmeError::State {
        path: path.to_path_buf(),
        reason: error.to_string(),
    }
}

/// Whether `name` can be a directory or file name here: a DNS name's letters only.
fn is_file_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.')
}

impl Store {
    /// The store at `dir`, not created yet.
    #[must_use]
    pub fn at(dir: &Path) -> Store {
        Store {
            dir: dir.to_path_buf(),
        }
    }

    /// The store at `dir`, created (0700, and its subdirectories) if missing.
    ///
    /// # Errors
    /// It cannot be created.
    pub fn create(dir: &Path) -> Result<Store, AcmeError> {
        let store = Store::at(dir);
        for sub in [
            store.dir.clone(),
            store.http_dir(),
            store.alpn_dir(),
            store.dir.join("sites"),
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&sub)
                .map_err(|error| state_error(&sub, &error))?;
        }
        // An existing directory is tightened too when it is ours to change (one made by root
        // for the server's user may not be); the keys in it are 0600 either way.
        let _ = fs::set_permissions(&store.dir, fs::Permissions::from_mode(0o700));
        Ok(store)
    }

    /// The directory of the site whose first name is `name`; `None` if that cannot be a file
    /// name.
    #[must_use]
    pub fn site_dir(&self, name: &str) -> Option<PathBuf> {
        let name = name.to_ascii_lowercase();
        is_file_name(&name).then(|| self.dir.join("sites").join(name))
    }

    #[must_use]
    pub fn http_dir(&self) -> PathBuf {
        self.dir.join("challenges").join("http-01")
    }

    #[must_use]
    pub fn alpn_dir(&self) -> PathBuf {
        self.dir.join("challenges").join("tls-alpn-01")
    }

    /// The account key, made and saved the first time.
    ///
    /// # Errors
    /// It cannot be read, parsed or saved.
    pub fn account_key(&self) -> Result<AccountKey, AcmeError> {
        let path = self.dir.join(ACCOUNT_KEY);
        match fs::read_to_string(&path) {
            Ok(pem) => AccountKey::from_pem(&pem).map_err(|reason| AcmeError::State {
                path: path.clone(),
                reason,
            }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                let key = AccountKey::generate().map_err(AcmeError::Crypto)?;
                write_atomic(&path, key.pem().as_bytes(), PRIVATE)?;
                Ok(key)
            }
            Err(error) => Err(state_error(&path, &error)),
        }
    }

    /// Save a site's new chain and key, and the names they cover.
    ///
    /// # Errors
    /// The files cannot be written.
    pub fn save_certificate(
        &self,
        names: &[String],
        chain_pem: &str,
        key_pem: &str,
    ) -> Result<(), AcmeError> {
        let site = self
            .site_dir(&names[0])
            .ok_or_else(|| AcmeError::Crypto(format!("{}: not a DNS name", names[0])))?;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&site)
            .map_err(|error| state_error(&site, &error))?;
        write_atomic(&site.join(KEY), key_pem.as_bytes(), PRIVATE)?;
        write_atomic(&site.join(NAMES), names.join("\n").as_bytes(), PUBLIC)?;
        // Last: readers look at the chain's file to know something changed.
        write_atomic(&site.join(CERTIFICATE), chain_pem.as_bytes(), PUBLIC)
    }

    /// The names the stored certificate of the site named first `name` was issued for.
    #[must_use]
    pub fn stored_names(&self, name: &str) -> Vec<String> {
        self.site_dir(name)
            .and_then(|site| fs::read_to_string(site.join(NAMES)).ok())
            .map(|text| text.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Publish a pending HTTP-01 answer.
    ///
    /// # Errors
    /// It cannot be written, or `token` is not a token.
    pub fn put_http(&self, token: &str, key_authorization: &str) -> Result<PathBuf, AcmeError> {
        if !super::is_token(token) {
            return Err(AcmeError::Crypto(format!("{token:?} is not an ACME token")));
        }
        let path = self.http_dir().join(token);
        write_atomic(&path, key_authorization.as_bytes(), PUBLIC)?;
        Ok(path)
    }

    /// Publish a pending TLS-ALPN-01 certificate for `name`.
    ///
    /// # Errors
    /// It cannot be written, or `name` cannot be a file name.
    pub fn put_alpn(&self, name: &str, pem: &str) -> Result<PathBuf, AcmeError> {
        let name = name.to_ascii_lowercase();
        if !is_file_name(&name) {
            return Err(AcmeError::Crypto(format!("{name}: not a DNS name")));
        }
        let path = self.alpn_dir().join(format!("{name}.pem"));
        write_atomic(&path, pem.as_bytes(), PRIVATE)?;
        Ok(path)
    }
}

/// Write `bytes` to `path` through a temporary file in the same directory and a rename.
///
/// # Errors
/// Creating, writing, syncing or renaming failed (the temporary file is removed).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<(), AcmeError> {
    let file_name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&temporary)?;
        // `mode` is masked by the umask when the file is made: set it exactly.
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    written.map_err(|error| {
        let _ = fs::remove_file(&temporary);
        state_error(path, &error)
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::{Store, KEY};

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn layout_modes_and_round_trip() {
        let temporary = crate::programs::test_support::TempDir::new("store");
        let dir = temporary.path().join("state");
        let store = Store::create(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let key = store.account_key().unwrap();
        assert_eq!(mode(&dir.join("account.key")), 0o600);
        // Read back, not made again.
        assert_eq!(store.account_key().unwrap().thumbprint(), key.thumbprint());

        let names = vec!["a.test".to_owned(), "www.a.test".to_owned()];
        store.save_certificate(&names, "CHAIN", "KEY").unwrap();
        let site = store.site_dir("A.test").unwrap();
        assert_eq!(
            std::fs::read_to_string(site.join("certificate.pem")).unwrap(),
            "CHAIN"
        );
        assert_eq!(mode(&site.join(KEY)), 0o600);
        assert_eq!(store.stored_names("a.test"), names);
        // Replaced whole; no temporary file is left behind.
        store.save_certificate(&names, "CHAIN 2", "KEY 2").unwrap();
        assert_eq!(std::fs::read_to_string(site.join(KEY)).unwrap(), "KEY 2");
        assert_eq!(std::fs::read_dir(&site).unwrap().count(), 3);

        store.put_http("tok-en_1", "tok-en_1.thumb").unwrap();
        assert!(store.put_http("../account.key", "x").is_err());
        assert!(store.put_alpn("../x", "x").is_err());
        assert!(store.site_dir("..").is_none());
    }
}
