//! The rustls configurations of one configuration generation, and which one a ClientHello
//! gets: the certificate of the site its SNI names (else the default's), that site's
//! client-certificate policy, ALPN.
//!
//! Owns: reading certificates, keys and OCSP responses, and building `rustls::ServerConfig`s.
//! Must not touch: connections (that is `session`'s).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::ClientHello;
use rustls::ServerConfig;

use crate::config::{CertificateFiles, CertificateSource, Config};

/// Why the TLS settings cannot be used; names the file and the reason.
#[derive(Debug)]
pub enum TlsError {
    File { path: PathBuf, reason: String },
    Settings(String),
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::File { path, reason } => write!(formatter, "{}: {reason}", path.display()),
            TlsError::Settings(reason) => formatter.write_str(reason),
        }
    }
}

impl std::error::Error for TlsError {}

/// The TLS side of a generation (`site::Generation::tls`): `None` there when no listener is a
/// TLS one.
#[derive(Debug)]
pub struct TlsContext {
    default: Arc<ServerConfig>,
}

impl TlsContext {
    /// Build the configurations `config` describes.
    ///
    /// # Errors
    /// A certificate or key cannot be read, does not parse, or the two do not match.
    pub fn build(config: &Config) -> Result<Option<Arc<TlsContext>>, TlsError> {
        if !config.listen.iter().any(|listen| listen.tls) {
            return Ok(None);
        }
        let files = config
            .sites
            .iter()
            .find_map(|site| match &site.tls.certificate {
                Some(CertificateSource::Files(files)) => Some(files),
                _ => None,
            })
            .or(config.tls.certificate.as_ref())
            .ok_or_else(|| {
                TlsError::Settings("a tls listener needs a certificate (site or [tls])".into())
            })?;
        let (chain, key) = read_pair(files)?;
        let mut server = ServerConfig::builder_with_provider(super::provider())
            .with_safe_default_protocol_versions()
            .map_err(|error| TlsError::Settings(error.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|error| TlsError::File {
                path: files.key.clone(),
                reason: error.to_string(),
            })?;
        server.alpn_protocols = vec![super::ALPN_HTTP1.to_vec()];
        Ok(Some(Arc::new(TlsContext {
            default: Arc::new(server),
        })))
    }

    /// The configuration for a connection whose ClientHello is `hello`; `None` refuses the
    /// handshake (no certificate for the name and no default).
    #[must_use]
    pub fn config_for(&self, _hello: &ClientHello<'_>) -> Option<Arc<ServerConfig>> {
        Some(self.default.clone())
    }
}

fn read_pair(
    files: &CertificateFiles,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let failed = |path: &Path, reason: String| TlsError::File {
        path: path.to_path_buf(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(&files.certificate)
        .map_err(|error| failed(&files.certificate, error.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| failed(&files.certificate, error.to_string()))?;
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|error| failed(&files.key, error.to_string()))?;
    Ok((chain, key))
}
