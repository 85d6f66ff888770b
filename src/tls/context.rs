//! The rustls configurations of one configuration generation, and which one a ClientHello
//! gets: the site its SNI names, by the rules `Host` routing uses (the exact name, else the
//! longest `*.suffix`, else the default site; no SNI: the default site), with that site's
//! certificate (else the default certificate: the default site's, else `[tls] certificate`)
//! and that site's client-certificate policy. Every configuration offers ALPN `h2` then
//! `http/1.1` (`http/1.1` alone when `[http2] enabled = false`) and shares the process's ticket
//! keys and session cache (`tickets`). A ClientHello offering
//! `acme-tls/1` for a name with a pending TLS-ALPN-01 challenge (RFC 8737) gets a configuration
//! carrying only the challenge certificate.
//!
//! Owns: reading certificates, keys, CA files and OCSP responses (every build, so a reload
//! re-reads them), and building `rustls::ServerConfig`s. Must not touch: connections (that is
//! `session`'s), obtaining ACME certificates (`acme`'s; asked at handshake time, so a renewal
//! needs no reload).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};

use super::pem_errors::pem_reason;
use super::tickets;
use crate::config::{
    AcmeSettings, CertificateFiles, CertificateSource, ClientCertificates, Config, HostName,
    MinVersion, Site,
};

/// Why the TLS settings cannot be used; names the file (or the key) and the reason.
#[derive(Debug)]
pub enum TlsError {
    File {
        path: PathBuf,
        reason: String,
    },
    /// The file does not exist (not yet made, or a wrong path): told apart so that the
    /// command line can say how to make it.
    Missing {
        path: PathBuf,
    },
    /// The certificate's public key is not the key's.
    KeyMismatch {
        certificate: PathBuf,
        key: PathBuf,
    },
    Settings(String),
}

impl fmt::Display for TlsError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::File { path, reason } => write!(formatter, "{}: {reason}", path.display()),
            TlsError::Missing { path } => {
                write!(formatter, "{}: No such file or directory", path.display())
            }
            TlsError::KeyMismatch { certificate, key } => write!(
                formatter,
                "certificate {} does not match key {}",
                certificate.display(),
                key.display()
            ),
            TlsError::Settings(reason) => formatter.write_str(reason),
        }
    }
}

impl std::error::Error for TlsError {}

/// The TLS side of a generation (`site::Generation::tls`): `None` there when no listener is a
/// TLS one.
pub struct TlsContext {
    /// Per site (the config's order): its configuration, `None` when neither it nor the default
    /// has a certificate (such a handshake is refused).
    sites: Vec<Option<Arc<ServerConfig>>>,
    /// Exact server names, lower case.
    names: HashMap<String, usize>,
    /// `(".example.com", site)`, longest suffix first.
    suffixes: Vec<(String, usize)>,
    default: usize,
    /// Set when some site's certificate comes from ACME: TLS-ALPN-01 challenges are answered.
    acme: Option<AcmeChallenges>,
    /// Certificates read outside their dates (`validity`), each file once.
    warnings: Vec<String>,
}

impl fmt::Debug for TlsContext {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("TlsContext")
            .field("sites", &self.sites.len())
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

impl TlsContext {
    /// Build the configurations `config` describes.
    ///
    /// # Errors
    /// A certificate, key, CA or OCSP file cannot be read or does not parse, a key does not
    /// match its certificate, a cipher suite is unknown, or the versions and suites leave
    /// nothing to negotiate.
    pub fn build(config: &Config) -> Result<Option<Arc<TlsContext>>, TlsError> {
        Self::build_with(config, AcmeLookups::WIRED)
    }

    fn build_with(
        config: &Config,
        lookups: AcmeLookups,
    ) -> Result<Option<Arc<TlsContext>>, TlsError> {
        if !config.listen.iter().any(|listen| listen.tls) {
            return Ok(None);
        }
        let mut files = Files::default();
        let policy = Policy::from_config(config)?;
        let default = config
            .sites
            .iter()
            .position(|site| site.default)
            .unwrap_or(0);
        let tls_default = match &config.tls.certificate {
            Some(certificate) => Some(files.certified_key(certificate, &policy.provider)?),
            None => None,
        };
        let acme = Arc::new(config.tls.acme.clone());
        let mut own = Vec::with_capacity(config.sites.len());
        for site in &config.sites {
            own.push(match &site.tls.certificate {
                Some(CertificateSource::Files(certificate)) => Some(SiteCertificate::Fixed(
                    files.certified_key(certificate, &policy.provider)?,
                )),
                Some(CertificateSource::Acme) => Some(SiteCertificate::Acme {
                    site: Arc::new(site.clone()),
                    settings: acme.clone(),
                    lookup: lookups.certificate,
                    // Until the CA has issued one: what a client whose name no site covers gets.
                    fallback: tls_default.clone(),
                }),
                None => None,
            });
        }
        // A name without a certificate of its own gets the default one.
        let fallback = own
            .get(default)
            .cloned()
            .flatten()
            .or_else(|| tls_default.clone().map(SiteCertificate::Fixed));
        let mut sites = Vec::with_capacity(config.sites.len());
        let mut names = HashMap::new();
        let mut suffixes = Vec::new();
        for (index, (site, certificate)) in config.sites.iter().zip(own).enumerate() {
            sites.push(match certificate.or_else(|| fallback.clone()) {
                Some(certificate) => Some(policy.server_config(site, certificate, &mut files)?),
                None => None,
            });
            for name in &site.names {
                match name {
                    HostName::Exact(name) => {
                        names.entry(name.clone()).or_insert(index);
                    }
                    HostName::Suffix(suffix) => suffixes.push((suffix.clone(), index)),
                }
            }
        }
        suffixes.sort_by_key(|(suffix, _)| std::cmp::Reverse(suffix.len()));
        let any_acme = config
            .sites
            .iter()
            .any(|site| site.tls.certificate == Some(CertificateSource::Acme));
        Ok(Some(Arc::new(TlsContext {
            sites,
            names,
            suffixes,
            default,
            acme: any_acme.then(|| AcmeChallenges {
                settings: acme,
                lookup: lookups.challenge,
                provider: policy.provider.clone(),
                versions: policy.versions,
            }),
            warnings: files.warnings,
        })))
    }

    /// What was read and deserves a word (a certificate outside its dates), one line each,
    /// naming the file: `ampd check` prints them, start-up and reload log them.
    #[must_use]
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The configuration for a connection whose ClientHello is `hello`; `None` refuses the
    /// handshake (no certificate for the name and no default).
    #[must_use]
    pub fn config_for(&self, hello: &ClientHello<'_>) -> Option<Arc<ServerConfig>> {
        let name = hello.server_name().map(|name| {
            let lower = name.to_ascii_lowercase();
            match lower.strip_suffix('.') {
                Some(stripped) => stripped.to_owned(),
                None => lower,
            }
        });
        if let (Some(acme), Some(name)) = (&self.acme, &name) {
            let asks_acme = hello
                .alpn()
                .is_some_and(|mut offered| offered.any(|id| id == super::ALPN_ACME));
            if asks_acme {
                if let Some(config) = acme.challenge_config(name) {
                    return Some(config);
                }
            }
        }
        self.sites[self.site_for(name.as_deref())].clone()
    }

    /// The site whose certificate a handshake for `name` gets (`site::Sites::site_for`'s rules).
    fn site_for(&self, name: Option<&str>) -> usize {
        let Some(name) = name else {
            return self.default;
        };
        if let Some(index) = self.names.get(name) {
            return *index;
        }
        self.suffixes
            .iter()
            .find(|(suffix, _)| name.ends_with(suffix.as_str()))
            .map_or(self.default, |(_, index)| *index)
    }
}

const TLS13_ONLY: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];

/// What every configuration of a generation shares: the provider (with the chosen suites),
/// the versions, the ALPN protocols, the ticketer and the session cache.
struct Policy {
    provider: Arc<CryptoProvider>,
    versions: &'static [&'static SupportedProtocolVersion],
    /// In the server's order of preference: rustls picks the first one the client offers too.
    alpn: Vec<Vec<u8>>,
    ticketer: Option<Arc<dyn rustls::server::ProducesTickets>>,
    session_storage: Arc<dyn rustls::server::StoresServerSessions>,
}

impl Policy {
    fn from_config(config: &Config) -> Result<Policy, TlsError> {
        let mut provider = (*super::provider()).clone();
        if !config.tls.ciphers.is_empty() {
            provider.cipher_suites = choose_suites(&provider, &config.tls.ciphers)?;
        }
        let versions: &'static [&'static SupportedProtocolVersion] = match config.tls.min_version {
            MinVersion::Tls12 => rustls::ALL_VERSIONS,
            MinVersion::Tls13 => TLS13_ONLY,
        };
        let provider = Arc::new(provider);
        // Refused here, with the reason, rather than by every handshake.
        ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|error| {
                TlsError::Settings(format!(
                    "[tls] ciphers and min_version leave nothing to negotiate: {error}"
                ))
            })?;
        Ok(Policy {
            provider,
            versions,
            alpn: alpn_protocols(config),
            ticketer: tickets::ticketer(&config.tls),
            session_storage: tickets::session_storage(&config.tls),
        })
    }

    /// One site's configuration: its certificate and its client-certificate policy.
    fn server_config(
        &self,
        site: &Site,
        certificate: SiteCertificate,
        files: &mut Files,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let builder = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(self.versions)
            .map_err(|error| TlsError::Settings(error.to_string()))?;
        let builder = match &site.tls.client_certificates {
            ClientCertificates::Off => builder.with_no_client_auth(),
            ClientCertificates::Optional { ca } => {
                let roots = files.roots(ca)?;
                builder.with_client_cert_verifier(
                    WebPkiClientVerifier::builder_with_provider(roots, self.provider.clone())
                        .allow_unauthenticated()
                        .build()
                        .map_err(|error| file_error(ca, error))?,
                )
            }
            ClientCertificates::Required { ca } => {
                let roots = files.roots(ca)?;
                builder.with_client_cert_verifier(
                    WebPkiClientVerifier::builder_with_provider(roots, self.provider.clone())
                        .build()
                        .map_err(|error| file_error(ca, error))?,
                )
            }
        };
        let mut server = builder.with_cert_resolver(Arc::new(certificate));
        server.alpn_protocols.clone_from(&self.alpn);
        // The server's order of suites wins (the provider's, or `ciphers`): a client that
        // prefers a weaker suite it also offers does not get it (testssl rates a server
        // without an order of its own HIGH).
        server.ignore_client_order = true;
        server.session_storage = self.session_storage.clone();
        if let Some(ticketer) = &self.ticketer {
            server.ticketer = ticketer.clone();
        }
        Ok(Arc::new(server))
    }
}

/// The ALPN protocols a site's configuration offers: `h2` first when `[http2]` is enabled (RFC
/// 9113 §3.2; a client offering both is served HTTP/2), then `http/1.1` for the rest.
fn alpn_protocols(config: &Config) -> Vec<Vec<u8>> {
    let mut protocols = Vec::with_capacity(2);
    if config.http2.enabled {
        protocols.push(ampd_http::h2::ALPN_H2.to_vec());
    }
    protocols.push(super::ALPN_HTTP1.to_vec());
    protocols
}

/// The provider's suites named in `names`, in that order.
fn choose_suites(
    provider: &CryptoProvider,
    names: &[String],
) -> Result<Vec<rustls::SupportedCipherSuite>, TlsError> {
    names
        .iter()
        .map(|name| {
            provider
                .cipher_suites
                .iter()
                .find(|suite| suite.suite().as_str() == Some(name.as_str()))
                .copied()
                .ok_or_else(|| {
                    let known: Vec<&str> = provider
                        .cipher_suites
                        .iter()
                        .filter_map(|suite| suite.suite().as_str())
                        .collect();
                    TlsError::Settings(format!(
                        "[tls] ciphers: unknown cipher suite '{name}' (hint: one of {})",
                        known.join(", ")
                    ))
                })
        })
        .collect()
}

/// Where a site's certificate comes from at handshake time.
#[derive(Clone)]
enum SiteCertificate {
    Fixed(Arc<CertifiedKey>),
    Acme {
        site: Arc<Site>,
        settings: Arc<AcmeSettings>,
        lookup: AcmeCertificate,
        fallback: Option<Arc<CertifiedKey>>,
    },
}

impl fmt::Debug for SiteCertificate {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            SiteCertificate::Fixed(_) => "SiteCertificate::Fixed",
            SiteCertificate::Acme { .. } => "SiteCertificate::Acme",
        })
    }
}

impl ResolvesServerCert for SiteCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        match self {
            SiteCertificate::Fixed(key) => Some(key.clone()),
            SiteCertificate::Acme {
                site,
                settings,
                lookup,
                fallback,
            } => lookup(site, settings).or_else(|| fallback.clone()),
        }
    }
}

type AcmeCertificate = fn(&Site, &AcmeSettings) -> Option<Arc<CertifiedKey>>;
type AcmeChallenge = fn(&str, &AcmeSettings) -> Option<Arc<CertifiedKey>>;

/// Where ACME certificates come from (the tests give their own).
#[derive(Clone, Copy)]
struct AcmeLookups {
    certificate: AcmeCertificate,
    challenge: AcmeChallenge,
}

impl AcmeLookups {
    const WIRED: AcmeLookups = AcmeLookups {
        certificate: super::acme::certificate,
        challenge: super::acme::challenge_certificate,
    };
}

/// TLS-ALPN-01 (RFC 8737 §3): a handshake offering `acme-tls/1` for a name with a pending
/// challenge gets the challenge certificate, that protocol only, and no session to resume.
struct AcmeChallenges {
    settings: Arc<AcmeSettings>,
    lookup: AcmeChallenge,
    provider: Arc<CryptoProvider>,
    versions: &'static [&'static SupportedProtocolVersion],
}

impl AcmeChallenges {
    fn challenge_config(&self, name: &str) -> Option<Arc<ServerConfig>> {
        let key = (self.lookup)(name, &self.settings)?;
        let mut server = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(self.versions)
            .ok()?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(SiteCertificate::Fixed(key)));
        server.alpn_protocols = vec![super::ALPN_ACME.to_vec()];
        Some(Arc::new(server))
    }
}

fn file_error(path: &Path, reason: impl fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => TlsError::Missing {
            path: path.to_path_buf(),
        },
        _ => file_error(path, crate::config::plain(&error)),
    })
}

/// Reads the certificate, key and CA files of a generation, noting the warnings they deserve.
#[derive(Default)]
struct Files {
    warnings: Vec<String>,
}

impl Files {
    /// A chain, its key (checked against the leaf) and the OCSP response to staple.
    fn certified_key(
        &mut self,
        files: &CertificateFiles,
        provider: &CryptoProvider,
    ) -> Result<Arc<CertifiedKey>, TlsError> {
        let chain = read_chain(&files.certificate)?;
        self.note_dates("certificate", &files.certificate, &chain);
        let key_pem = read(&files.key)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|error| {
            file_error(
                &files.key,
                match error {
                    pem::Error::NoItemsFound => {
                        "no private key in PEM (PKCS#8, PKCS#1 RSA or SEC1 EC)".to_owned()
                    }
                    error => pem_reason(&error),
                },
            )
        })?;
        let signing_key = provider
            .key_provider
            .load_private_key(key)
            .map_err(|error| {
                file_error(&files.key, format!("not a usable private key: {error}"))
            })?;
        let mut certified = CertifiedKey::new(chain, signing_key);
        match certified.keys_match() {
            Ok(()) => {}
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
                return Err(TlsError::KeyMismatch {
                    certificate: files.certificate.clone(),
                    key: files.key.clone(),
                })
            }
            // The provider cannot tell (no public key for it): the handshake's signature is
            // the check then, as in rustls's own `CertifiedKey::from_der`.
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
            Err(error) => {
                return Err(file_error(
                    &files.certificate,
                    format!("the first certificate is not a usable leaf: {error}"),
                ))
            }
        }
        if let Some(path) = &files.ocsp_response {
            let response = read(path)?;
            // An OCSPResponse is a DER SEQUENCE (RFC 6960 §4.2.1); a PEM or empty file is not.
            if response.first() != Some(&0x30) {
                return Err(file_error(path, "not a DER OCSP response"));
            }
            certified.ocsp = Some(response);
        }
        Ok(Arc::new(certified))
    }

    /// A CA file as trust anchors for client certificates.
    fn roots(&mut self, path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
        let chain = read_chain(path)?;
        self.note_dates("client_ca", path, &chain);
        let mut roots = RootCertStore::empty();
        for certificate in chain {
            roots
                .add(certificate)
                .map_err(|error| file_error(path, format!("not a CA certificate: {error}")))?;
        }
        Ok(Arc::new(roots))
    }

    /// A file named by several sites is warned about once.
    fn note_dates(&mut self, what: &str, path: &Path, chain: &[CertificateDer<'_>]) {
        for warning in super::validity::warnings(what, path, chain, super::validity::now()) {
            if !self.warnings.contains(&warning) {
                self.warnings.push(warning);
            }
        }
    }
}

/// The certificates of a PEM file, at least one.
fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| file_error(path, pem_reason(&error)))?;
    if chain.is_empty() {
        return Err(file_error(
            path,
            "no certificate in it (PEM, BEGIN CERTIFICATE)",
        ));
    }
    Ok(chain)
}

#[cfg(test)]
mod tests;
