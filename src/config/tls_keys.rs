//! The TLS keys: the `[tls]` table, `[tls.acme]`, and the site-only keys (`certificate`,
//! `certificate_key`, `ocsp_response`, `client_certificates`, `client_ca`, `hsts`,
//! `hsts_include_subdomains`, `hsts_preload`, `redirect_https`), with their errors.
//!
//! Owns: reading them into `TlsServer` and `SiteTls`, and the checks that need the whole file
//! (a TLS listener with no certificate to offer, `redirect_https` with nowhere to redirect to,
//! an ACME site whose challenge has no listener to arrive on).
//! Must not touch: certificate files (read when the generation is built, `tls::context`, so a
//! reload re-reads them and `ampd check` still sees them).

use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::load::{Loaded, Loader};
use super::raw::{RawAcme, RawBlock, RawListen, RawTls, RawVersion};
use super::{
    AcmeChallenge, AcmeSettings, CertificateFiles, CertificateSource, ClientCertificates, Config,
    Hsts, MinVersion, SiteTls, TlsServer,
};

/// RFC 8446 §4.6.1: a ticket's lifetime is at most seven days.
const MAX_TICKET_LIFETIME: Duration = Duration::from_secs(7 * 86_400);

/// The preload list's floor for `max-age` (hstspreload.org, "Submission Requirements").
const PRELOAD_MIN_AGE: Duration = Duration::from_secs(365 * 86_400);

/// The value of `certificate` that asks `[tls.acme]` for the site's certificate.
const ACME: &str = "acme";

impl Loader<'_> {
    /// `[tls]` and `[tls.acme]`.
    pub(super) fn tls_server(&self, raw: Option<RawTls>) -> Loaded<TlsServer> {
        let raw = raw.unwrap_or_default();
        let mut tls = TlsServer::default();
        if let Some(version) = &raw.min_version {
            tls.min_version = self.min_version(version)?;
        }
        if let Some(list) = &raw.ciphers {
            tls.ciphers = self.ciphers(list)?;
        }
        if let Some(value) = &raw.session_tickets {
            tls.session_tickets = *value.get_ref();
        }
        if let Some(value) = &raw.ticket_rotation {
            tls.ticket_rotation = self.duration(value, "tls.ticket_rotation", false)?;
            if tls.ticket_rotation > MAX_TICKET_LIFETIME {
                return Err(self.hinted(
                    value.span(),
                    "tls.ticket_rotation",
                    "more than 7 days",
                    "a ticket lives one rotation period, and RFC 8446 §4.6.1 caps that at 7 days",
                ));
            }
        }
        if let Some(value) = &raw.session_cache {
            if *value.get_ref() < 0 {
                return Err(self.hinted(
                    value.span(),
                    "tls.session_cache",
                    format!("{} is less than 0", value.get_ref()),
                    "sessions kept per process; 0 turns the cache off",
                ));
            }
            tls.session_cache = self.count(value, "tls.session_cache", 0)?;
        }
        if let Some(value) = &raw.handshake_timeout {
            tls.handshake_timeout = self.duration(value, "tls.handshake_timeout", false)?;
        }
        tls.certificate = self.default_certificate(&raw)?;
        tls.acme = self.acme(raw.acme.unwrap_or_default())?;
        Ok(tls)
    }

    fn min_version(&self, value: &Spanned<RawVersion>) -> Loaded<MinVersion> {
        let written = match value.get_ref() {
            RawVersion::Text(text) => text.clone(),
            RawVersion::Number(number) => number.to_string(),
        };
        match written.as_str() {
            "1.2" => Ok(MinVersion::Tls12),
            "1.3" => Ok(MinVersion::Tls13),
            _ => Err(self.hinted(
                value.span(),
                "tls.min_version",
                format!("'{written}' is not a TLS version ampd offers"),
                "\"1.2\" (TLS 1.2 and 1.3) or \"1.3\" (TLS 1.3 only)",
            )),
        }
    }

    /// The names are checked against the provider's suites when the generation is built
    /// (`tls::context`): the provider, not the file's schema, knows them.
    fn ciphers(&self, list: &Spanned<Vec<String>>) -> Loaded<Vec<String>> {
        let names = list.get_ref();
        if names.is_empty() {
            return Err(self.hinted(
                list.span(),
                "tls.ciphers",
                "empty list",
                "leave ciphers out for the provider's defaults",
            ));
        }
        for (index, name) in names.iter().enumerate() {
            if names[..index].contains(name) {
                return Err(self.hinted(
                    list.span(),
                    "tls.ciphers",
                    format!("'{name}' is listed twice"),
                    "the list is an order of preference: name each suite once",
                ));
            }
        }
        Ok(names.clone())
    }

    /// `[tls] certificate` and `certificate_key` (and `ocsp_response`): both or neither.
    fn default_certificate(&self, raw: &RawTls) -> Loaded<Option<CertificateFiles>> {
        if let Some(certificate) = &raw.certificate {
            if certificate.get_ref() == ACME {
                return Err(self.hinted(
                    certificate.span(),
                    "tls.certificate",
                    "\"acme\" is set per site",
                    "put certificate = \"acme\" in the [[site]] whose server_names it is for",
                ));
            }
        }
        self.certificate_files(
            "tls",
            raw.certificate.as_ref(),
            raw.certificate_key.as_ref(),
            raw.ocsp_response.as_ref(),
        )
    }

    /// A certificate and its key from files, in `table`; `None` when neither is set.
    fn certificate_files(
        &self,
        table: &str,
        certificate: Option<&Spanned<String>>,
        key: Option<&Spanned<String>>,
        ocsp_response: Option<&Spanned<String>>,
    ) -> Loaded<Option<CertificateFiles>> {
        let name = |key: &str| format!("{table}.{key}");
        let pair =
            match (certificate, key) {
                (None, None) => None,
                (Some(certificate), None) => return Err(self.hinted(
                    certificate.span(),
                    &name("certificate"),
                    "certificate without certificate_key",
                    "certificate_key = \"the-key.pem\": the private key of the certificate's leaf",
                )),
                (None, Some(key)) => {
                    return Err(self.hinted(
                        key.span(),
                        &name("certificate_key"),
                        "certificate_key without certificate",
                        "certificate = \"the-chain.pem\": the leaf first, then its intermediates",
                    ))
                }
                (Some(certificate), Some(key)) => Some((
                    self.file_path(certificate, &name("certificate"))?,
                    self.file_path(key, &name("certificate_key"))?,
                )),
            };
        let ocsp = match ocsp_response {
            Some(value) => Some(self.file_path(value, &name("ocsp_response"))?),
            None => None,
        };
        match (pair, ocsp) {
            (Some((certificate, key)), ocsp_response) => Ok(Some(CertificateFiles {
                certificate,
                key,
                ocsp_response,
            })),
            (None, Some(_)) => {
                let span = ocsp_response.map_or(0..0, Spanned::span);
                Err(self.hinted(
                    span,
                    &name("ocsp_response"),
                    "ocsp_response without certificate",
                    "the response is stapled to a certificate read from files: set certificate and certificate_key",
                ))
            }
            (None, None) => Ok(None),
        }
    }

    /// A path key: not empty, relative to the file's directory.
    fn file_path(&self, value: &Spanned<String>, key: &str) -> Loaded<PathBuf> {
        if value.get_ref().is_empty() {
            return Err(self.hinted(
                value.span(),
                key,
                "empty path",
                "a file name, relative to this configuration file's directory or absolute",
            ));
        }
        Ok(self.path(value.get_ref()))
    }

    fn acme(&self, raw: RawAcme) -> Loaded<AcmeSettings> {
        let mut acme = AcmeSettings::default();
        if let Some(directory) = &raw.directory {
            // RFC 8555 §6.1: ACME runs over HTTPS only.
            let url = directory.get_ref();
            let host = url.strip_prefix("https://").unwrap_or("");
            if host.is_empty() || host.starts_with('/') || url.bytes().any(|b| b <= b' ') {
                return Err(self.hinted(
                    directory.span(),
                    "tls.acme.directory",
                    format!("'{url}' is not an https URL"),
                    "the directory URL, like \"https://acme-v02.api.letsencrypt.org/directory\" (RFC 8555 §6.1: HTTPS only)",
                ));
            }
            acme.directory.clone_from(url);
        }
        if let Some(ca_root) = &raw.ca_root {
            acme.ca_root = Some(self.file_path(ca_root, "tls.acme.ca_root")?);
        }
        if let Some(email) = &raw.email {
            let address = email.get_ref();
            let valid = address.split_once('@').is_some_and(|(user, domain)| {
                !user.is_empty() && domain.contains('.') && !domain.contains('@')
            }) && !address.bytes().any(|b| b <= b' ' || b == b',');
            if !valid {
                return Err(self.hinted(
                    email.span(),
                    "tls.acme.email",
                    format!("'{address}' is not an email address"),
                    "the account's contact, like \"admin@example.com\" (the CA writes to it before a certificate expires)",
                ));
            }
            acme.email = Some(address.clone());
        }
        if let Some(challenge) = &raw.challenge {
            acme.challenge = match challenge.get_ref().as_str() {
                "http-01" => AcmeChallenge::Http01,
                "tls-alpn-01" => AcmeChallenge::TlsAlpn01,
                other => {
                    return Err(self.hinted(
                        challenge.span(),
                        "tls.acme.challenge",
                        format!("unknown challenge '{other}'"),
                        "\"http-01\" (answered on a plain listener) or \"tls-alpn-01\" (on a TLS listener)",
                    ))
                }
            };
        }
        if let Some(state_dir) = &raw.state_dir {
            acme.state_dir = self.file_path(state_dir, "tls.acme.state_dir")?;
        }
        if let Some(value) = &raw.renew_before {
            acme.renew_before = self.duration(value, "tls.acme.renew_before", false)?;
        }
        Ok(acme)
    }

    /// A `[[site]]`'s TLS keys.
    pub(super) fn site_tls(&self, block: &RawBlock) -> Loaded<SiteTls> {
        let mut tls = SiteTls {
            certificate: self.site_certificate(block)?,
            client_certificates: self.client_certificates(block)?,
            hsts: self.hsts(block)?,
            redirect_https: false,
        };
        if let Some(value) = &block.redirect_https {
            tls.redirect_https = *value.get_ref();
        }
        Ok(tls)
    }

    fn site_certificate(&self, block: &RawBlock) -> Loaded<Option<CertificateSource>> {
        let Some(certificate) = block
            .certificate
            .as_ref()
            .filter(|value| value.get_ref() == ACME)
        else {
            return Ok(self
                .certificate_files(
                    "site",
                    block.certificate.as_ref(),
                    block.certificate_key.as_ref(),
                    block.ocsp_response.as_ref(),
                )?
                .map(CertificateSource::Files));
        };
        for (present, key) in [
            (&block.certificate_key, "certificate_key"),
            (&block.ocsp_response, "ocsp_response"),
        ] {
            if let Some(value) = present {
                return Err(self.hinted(
                    value.span(),
                    &format!("site.{key}"),
                    "not with certificate = \"acme\"",
                    "an ACME certificate's key is made by ampd, kept in [tls.acme] state_dir",
                ));
            }
        }
        let names = block.server_names.as_ref().map(Spanned::get_ref);
        if names.is_none_or(Vec::is_empty) {
            return Err(self.hinted(
                certificate.span(),
                "site.certificate",
                "an ACME certificate needs server_names",
                "the CA issues the certificate for the site's server_names",
            ));
        }
        if let Some(wildcard) = names
            .into_iter()
            .flatten()
            .find(|name| name.starts_with("*."))
        {
            return Err(self.hinted(
                certificate.span(),
                "site.certificate",
                format!("'{wildcard}': a wildcard name cannot be validated by http-01 or tls-alpn-01"),
                "list the names themselves, or give the site a certificate from files (a wildcard one needs DNS-01, which ampd does not do)",
            ));
        }
        Ok(Some(CertificateSource::Acme))
    }

    fn client_certificates(&self, block: &RawBlock) -> Loaded<ClientCertificates> {
        let mode = block
            .client_certificates
            .as_ref()
            .map_or("off", |value| value.get_ref().as_str());
        let ca = match &block.client_ca {
            Some(value) => Some(self.file_path(value, "site.client_ca")?),
            None => None,
        };
        let span = || {
            block
                .client_certificates
                .as_ref()
                .map_or(0..0, Spanned::span)
        };
        match (mode, ca) {
            ("off", None) => Ok(ClientCertificates::Off),
            ("off", Some(_)) => Err(self.hinted(
                block.client_ca.as_ref().map_or(0..0, Spanned::span),
                "site.client_ca",
                "client_ca without client_certificates",
                "client_certificates = \"optional\" or \"required\" asks clients for a certificate this CA signed",
            )),
            ("optional" | "required", None) => Err(self.hinted(
                span(),
                "site.client_certificates",
                format!("\"{mode}\" without client_ca"),
                "client_ca = \"clients-ca.pem\": the CA (PEM) client certificates are verified against",
            )),
            ("optional", Some(ca)) => Ok(ClientCertificates::Optional { ca }),
            ("required", Some(ca)) => Ok(ClientCertificates::Required { ca }),
            (other, _) => Err(self.hinted(
                span(),
                "site.client_certificates",
                format!("unknown mode '{other}'"),
                "\"off\", \"optional\" (asked for, not needed) or \"required\"",
            )),
        }
    }

    fn hsts(&self, block: &RawBlock) -> Loaded<Option<Hsts>> {
        let include_subdomains = block.hsts_include_subdomains.as_ref();
        let preload = block.hsts_preload.as_ref();
        let Some(value) = &block.hsts else {
            for (present, key) in [
                (include_subdomains, "hsts_include_subdomains"),
                (preload, "hsts_preload"),
            ] {
                if let Some(value) = present {
                    return Err(self.hinted(
                        value.span(),
                        &format!("site.{key}"),
                        format!("{key} without hsts"),
                        "hsts = \"365d\" sends Strict-Transport-Security with that max-age",
                    ));
                }
            }
            return Ok(None);
        };
        let hsts = Hsts {
            // Zero is meaningful: it tells browsers to forget the site (RFC 6797 §6.1.1).
            max_age: self.duration(value, "site.hsts", true)?,
            include_subdomains: include_subdomains.is_some_and(|value| *value.get_ref()),
            preload: preload.is_some_and(|value| *value.get_ref()),
        };
        if let Some(preload) = preload.filter(|_| hsts.preload) {
            if !hsts.include_subdomains {
                return Err(self.hinted(
                    preload.span(),
                    "site.hsts_preload",
                    "preload without hsts_include_subdomains",
                    "the preload list takes only sites that cover their subdomains: set hsts_include_subdomains = true",
                ));
            }
            if hsts.max_age < PRELOAD_MIN_AGE {
                return Err(self.hinted(
                    preload.span(),
                    "site.hsts_preload",
                    "preload with an hsts max-age under 365d",
                    "the preload list asks for hsts = \"365d\" or more",
                ));
            }
        }
        Ok(Some(hsts))
    }

    /// A TLS key of `[[site]]` set in a location.
    pub(super) fn site_tls_key_in_location(&self, block: &RawBlock) -> Loaded<()> {
        if let Some((span, key)) = site_tls_keys(block)
            .into_iter()
            .find_map(|(span, key)| span.map(|span| (span, key)))
        {
            return Err(self.hinted(
                span,
                &format!("site.location.{key}"),
                "only valid in a [[site]]",
                "TLS is chosen per site (by the name the client asks for): move it to the site",
            ));
        }
        Ok(())
    }

    /// The checks that need the listeners and every site: run once the sites are read.
    pub(super) fn tls_fits_the_listeners(
        &self,
        listen: Option<&Spanned<RawListen>>,
        blocks: &[RawBlock],
        config: &Config,
    ) -> Loaded<()> {
        let has_tls = config.listen.iter().any(|listen| listen.tls);
        let has_plain = config.listen.iter().any(|listen| !listen.tls);
        for (block, site) in blocks.iter().zip(&config.sites) {
            if let Some(redirect) = block.redirect_https.as_ref().filter(|_| !has_tls) {
                if site.tls.redirect_https {
                    return Err(self.hinted(
                        redirect.span(),
                        "site.redirect_https",
                        "no TLS listener to redirect to",
                        "add one to listen: listen = [\"0.0.0.0:80\", \"0.0.0.0:443 tls\"]",
                    ));
                }
            }
            if site.tls.certificate == Some(CertificateSource::Acme) {
                let (needed, name, listener) = match config.tls.acme.challenge {
                    AcmeChallenge::Http01 => (has_plain, "http-01", "a plain (port 80)"),
                    AcmeChallenge::TlsAlpn01 => (has_tls, "tls-alpn-01", "a TLS (port 443)"),
                };
                if !needed {
                    let span = block.certificate.as_ref().map_or(0..0, Spanned::span);
                    return Err(self.hinted(
                        span,
                        "site.certificate",
                        format!(
                            "the {name} challenge needs {listener} listener, and listen has none"
                        ),
                        "add that listener, or choose the other [tls.acme] challenge",
                    ));
                }
            }
        }
        if !has_tls {
            return Ok(());
        }
        let default_has_one = config
            .sites
            .iter()
            .find(|site| site.default)
            .is_some_and(|site| site.tls.certificate.is_some());
        let any_acme = config
            .sites
            .iter()
            .any(|site| site.tls.certificate == Some(CertificateSource::Acme));
        if !(default_has_one || config.tls.certificate.is_some() || any_acme) {
            return Err(self.hinted(
                listen.map_or(0..0, Spanned::span),
                "listen",
                "a TLS listener needs a certificate",
                "set certificate and certificate_key in the default [[site]] or in [tls] (the certificate for clients whose name no site's certificate covers)",
            ));
        }
        Ok(())
    }
}

/// The site-only TLS keys `block` sets, with where.
fn site_tls_keys(block: &RawBlock) -> [(Option<Range<usize>>, &'static str); 9] {
    let span = |value: &Option<Spanned<String>>| value.as_ref().map(Spanned::span);
    let flag = |value: &Option<Spanned<bool>>| value.as_ref().map(Spanned::span);
    [
        (span(&block.certificate), "certificate"),
        (span(&block.certificate_key), "certificate_key"),
        (span(&block.ocsp_response), "ocsp_response"),
        (span(&block.client_certificates), "client_certificates"),
        (span(&block.client_ca), "client_ca"),
        (block.hsts.as_ref().map(Spanned::span), "hsts"),
        (
            flag(&block.hsts_include_subdomains),
            "hsts_include_subdomains",
        ),
        (flag(&block.hsts_preload), "hsts_preload"),
        (flag(&block.redirect_https), "redirect_https"),
    ]
}

#[cfg(test)]
mod tests;
