//! `redirect_https`: a request that comes over a plain listener to a site that wants HTTPS is
//! answered `301 Moved Permanently` to the same URL over `https`, before anything else about
//! it is decided (nginx's `return 301 https://$host$request_uri` in a port-80 server).
//!
//! Also the client-certificate check on the request path: a site that asks for client
//! certificates answers `421` to a request over a handshake made for another site, and one
//! that requires them `403` to a connection without a verified one (plain HTTP and h2c too).
//!
//! Owns: whether a request is redirected and the `Location` it gets. ACME's HTTP-01
//! challenges (`/.well-known/acme-challenge/`, RFC 8555 §8.3) are never redirected: a CA may
//! fetch them over plain HTTP only, and a certificate is what HTTPS waits for.
//! Must not touch: HSTS (`reply.rs`, on responses over TLS), routing (`route.rs`).

use std::net::IpAddr;

use ampd_http::request::{split_target, RequestHead};

use super::route::Located;
use super::{Conn, Context, Exchange, Job};
use crate::site::{strip_port, CertificateCheck, HttpsRedirect};

/// Paths an ACME CA fetches over plain HTTP (RFC 8555 §8.3).
const ACME_CHALLENGES: &str = "/.well-known/acme-challenge/";

impl Conn {
    /// The client-certificate check (`Sites::client_certificate_check`): `421` for a request
    /// over TLS whose site is not the one its handshake was made for, `403` for one without a
    /// verified client certificate to a site that requires one (plain HTTP and h2c included).
    /// Comes after `redirect_to_https`, so a `redirect_https` site sends plain requests to
    /// HTTPS, where the handshake asks for the certificate. `None` when the request goes on.
    pub(super) fn refuse_without_client_certificate(
        &mut self,
        exchange: &Exchange,
        context: &mut Context<'_>,
    ) -> Option<Option<Job>> {
        let host = exchange.head.host().map(str::as_bytes);
        let status = match context.sites.client_certificate_check(host, self.tls()) {
            CertificateCheck::Pass => return None,
            CertificateCheck::Misdirected => 421,
            CertificateCheck::Forbidden => 403,
        };
        Some(self.answer(exchange, None, status, &[], context))
    }

    /// Answer `301` to HTTPS when the located request is to be redirected (`https_location`);
    /// `None` when it goes on to be served here.
    pub(super) fn redirect_to_https(
        &mut self,
        exchange: &Exchange,
        located: &Located,
        context: &mut Context<'_>,
    ) -> Option<Option<Job>> {
        let redirect = located.route.https_redirect.as_ref()?;
        if self.is_secure() || located.clean.as_str().starts_with(ACME_CHALLENGES) {
            return None;
        }
        let location = https_location(&exchange.head, redirect, self.local_address().ip());
        Some(self.answer(
            exchange,
            Some(&located.route),
            301,
            &[("Location", location.as_bytes())],
            context,
        ))
    }
}

/// `https://HOST[:PORT]/target`: the host the request named (its port dropped, lower case),
/// else the site's first name, else the address the request came in on; the port of the first
/// TLS listener unless it is 443; the target's path and query as the client sent them.
fn https_location(head: &RequestHead, redirect: &HttpsRedirect, local: IpAddr) -> String {
    let host = match head.host().map(strip_port).filter(|host| !host.is_empty()) {
        Some(host) => host.to_ascii_lowercase(),
        None => match &redirect.server_name {
            Some(name) => name.clone(),
            None => match local {
                IpAddr::V4(v4) => v4.to_string(),
                IpAddr::V6(v6) => format!("[{v6}]"),
            },
        },
    };
    let target = match split_target(&head.target) {
        Some((_, path, Some(query))) => format!("{path}?{query}"),
        Some((_, path, None)) => path.to_owned(),
        None => "/".to_owned(),
    };
    match redirect.port {
        Some(port) => format!("https://{host}:{port}{target}"),
        None => format!("https://{host}{target}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ampd_http::request::{BodyFraming, Header, Method, Version};

    fn head(target: &str, host: Option<&str>) -> RequestHead {
        RequestHead {
            method: Method::Get,
            target: target.into(),
            version: Version::Http11,
            headers: host
                .map(|host| Header {
                    name: "Host".into(),
                    value: host.as_bytes().into(),
                })
                .into_iter()
                .collect(),
            body: BodyFraming::None,
            keep_alive: true,
            expect_continue: false,
        }
    }

    #[test]
    fn the_location_keeps_the_target_and_drops_the_clients_port() {
        let to_8443 = HttpsRedirect {
            port: Some(8443),
            server_name: Some("www.a.test".to_owned()),
        };
        let local: IpAddr = "::1".parse().unwrap();
        let location = |target, host| https_location(&head(target, host), &to_8443, local);
        assert_eq!(
            location("/a%2Fb?q=%20", Some("[::1]:8080")),
            "https://[::1]:8443/a%2Fb?q=%20"
        );
        assert_eq!(location("/", Some("A.TEST")), "https://a.test:8443/");
        assert_eq!(location("/x", None), "https://www.a.test:8443/x");
        let nameless = HttpsRedirect {
            port: None,
            server_name: None,
        };
        assert_eq!(
            https_location(&head("/x", None), &nameless, local),
            "https://[::1]/x"
        );
    }
}
