//! What a configuration that loads may still have wrong, said as warnings rather than refused:
//! `ampd check` prints them, start-up and each reload log them (`site::Generation::warnings`,
//! with the certificates' own from `tls::context`).
//!
//! Owns: the warnings about settings alone. Must not touch: files (a certificate's dates are
//! `tls::context`'s, read when it loads them).

use super::{ClientCertificates, Config, HostName, Site};

/// The warnings `config` deserves, each one line naming the site or key.
#[must_use]
pub fn warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    // The check on the request path (`Sites::client_certificate_check`) refuses such a site's
    // requests on a plain listener: they can only get 403 there.
    if let Some(plain) = config.listen.iter().find(|listen| !listen.tls) {
        for (index, site) in config.sites.iter().enumerate() {
            if matches!(
                site.tls.client_certificates,
                ClientCertificates::Required { .. }
            ) && !site.tls.redirect_https
            {
                warnings.push(format!(
                    "{}: client_certificates = \"required\", and on plain listener {}, where no \
                     client sends a certificate, its requests are answered 403 (hint: \
                     redirect_https = true sends them to HTTPS)",
                    site_name(site, index),
                    plain.address
                ));
            }
        }
    }
    warnings
}

/// `site admin.example.com` (its first name), or `site 2` (in file order) for one without.
fn site_name(site: &Site, index: usize) -> String {
    match site.names.first() {
        Some(HostName::Exact(name)) => format!("site {name}"),
        Some(HostName::Suffix(suffix)) => format!("site *{suffix}"),
        None => format!("site {}", index + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Listen;

    #[test]
    fn a_required_site_without_redirect_on_a_plain_listener_is_named() {
        let mut config = Config::new(std::env::temp_dir());
        config.sites[0].names = vec![HostName::Suffix(".admin.test".into())];
        config.sites[0].tls.client_certificates = ClientCertificates::Required {
            ca: "ca.pem".into(),
        };
        let plain = Listen::plain("127.0.0.1:8080".parse().unwrap());
        let tls = Listen {
            tls: true,
            ..Listen::plain("127.0.0.1:8443".parse().unwrap())
        };
        config.listen = vec![tls, plain];
        let found = warnings(&config);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(
                "site *.admin.test: client_certificates = \"required\", and on plain listener \
                 127.0.0.1:8080,"
            ),
            "{found:?}"
        );
        config.sites[0].tls.redirect_https = true;
        assert!(warnings(&config).is_empty());
        config.sites[0].tls.redirect_https = false;
        config.listen = vec![tls];
        assert!(warnings(&config).is_empty(), "TLS only");
    }
}
