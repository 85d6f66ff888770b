//! ACME HTTP-01 answers (RFC 8555 §8.3): `GET /.well-known/acme-challenge/TOKEN` with a
//! pending token is answered `200 text/plain` with its key authorization, on any site and any
//! listener, before site routing, so no site's rewrites, access rules or `redirect_https`
//! stand between the CA and the answer. Any other request (or a token nobody is waiting for)
//! is routed as usual.
//!
//! Owns: recognising such a request and writing the answer. Must not touch: the pending
//! tokens themselves (`tls::acme` reads them from its state directory).

use ampd_http::request::{split_target, Method, RequestHead};

use crate::config::{CertificateSource, Config};
use crate::conn::reply::response_context;
use crate::conn::{Conn, Context, Exchange, Job, Outcome};
use crate::content::sink::Sink;
use crate::response::{common_fields, Http1Framing};
use crate::tls::acme;

/// The key authorization `head` asks for, if it is an HTTP-01 request for a pending token.
pub(in crate::conn) fn pending(head: &RequestHead, config: &Config) -> Option<String> {
    if !matches!(head.method, Method::Get | Method::Head) {
        return None;
    }
    let (_, path, _) = split_target(&head.target)?;
    let token = path.strip_prefix(acme::HTTP_CHALLENGE_PREFIX)?;
    // Only a server with ACME sites has a state directory to look in.
    let has_acme = config
        .sites
        .iter()
        .any(|site| site.tls.certificate == Some(CertificateSource::Acme));
    if !has_acme {
        return None;
    }
    acme::http_challenge(token, &config.tls.acme)
}

impl Conn {
    /// Answer an HTTP-01 request with its key authorization.
    pub(in crate::conn) fn serve_acme_challenge(
        &mut self,
        exchange: &Exchange,
        key_authorization: &str,
        context: &mut Context<'_>,
    ) -> Option<Job> {
        let mark = self.output.mark();
        {
            let response = response_context(context, exchange.persistence, None, self.secure);
            let head = self.output.begin_head(200);
            common_fields(head, &response.head);
            head.push("Content-Type", b"text/plain");
            head.push("Cache-Control", b"no-store");
            head.push_decimal("Content-Length", key_authorization.len() as u64);
            self.output
                .end_head(Http1Framing::delimited(response.head.persistence));
            if exchange.head.method != Method::Head {
                self.output
                    .bytes()
                    .extend_from_slice(key_authorization.as_bytes());
            }
        }
        self.record(Some(exchange), 200, mark, context);
        self.settle(Outcome::Responded(exchange.persistence), context)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{CertificateSource, Config, Redirect};
    use crate::conn::harness::Harness;
    use crate::programs::test_support::TempDir;

    const TOKEN: &str = "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA";
    const ANSWER: &str =
        "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA.9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI";

    /// A server whose only site is an ACME one that redirects everything elsewhere, with
    /// `TOKEN` pending in `state`.
    fn harness(state: &Path, acme_site: bool) -> Harness {
        let pending = state.join("challenges/http-01");
        std::fs::create_dir_all(&pending).unwrap();
        std::fs::write(pending.join(TOKEN), ANSWER).unwrap();
        let state = state.to_path_buf();
        Harness::new(move |config: &mut Config| {
            config.tls.acme.state_dir = state;
            for site in &mut config.sites {
                if acme_site {
                    site.tls.certificate = Some(CertificateSource::Acme);
                }
                for location in &mut site.locations {
                    location.settings.redirect = Some(Redirect {
                        to: "https://elsewhere.test{uri}".to_owned(),
                        status: 301,
                    });
                }
            }
        })
    }

    fn request(method: &str, path: &str) -> String {
        format!("{method} {path} HTTP/1.1\r\nHost: a.test\r\n\r\n")
    }

    #[test]
    fn a_pending_token_is_answered_before_the_site_rules() {
        let state = TempDir::new("http01");
        let mut harness = harness(state.path(), true);
        let path = format!("/.well-known/acme-challenge/{TOKEN}");
        harness.feed(request("GET", &path).as_bytes());
        let responses = harness.take();
        assert_eq!(responses[0].status, 200);
        assert_eq!(responses[0].header("content-type"), Some("text/plain"));
        assert_eq!(responses[0].body, ANSWER.as_bytes());
        // HEAD: the same head, no body.
        harness.feed(request("HEAD", &path).as_bytes());
        let head = String::from_utf8(harness.take_raw()).unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(
            head.contains(&format!("Content-Length: {}\r\n", ANSWER.len())),
            "{head}"
        );
        assert!(head.ends_with("\r\n\r\n"), "{head}");
    }

    #[test]
    fn anything_else_is_routed_as_usual() {
        let state = TempDir::new("http01-other");
        let mut harness = harness(state.path(), true);
        harness.feed(request("GET", "/.well-known/acme-challenge/unknown-token").as_bytes());
        harness.feed(request("GET", "/.well-known/acme-challenge/../../account.key").as_bytes());
        harness.feed(
            format!(
                "POST /.well-known/acme-challenge/{TOKEN} HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\n\r\n"
            )
            .as_bytes(),
        );
        let statuses = harness.statuses();
        assert_eq!(statuses[..2], [301, 301]);
        assert_ne!(statuses[2], 200);
        // A server without ACME sites never looks in a state directory.
        let state = TempDir::new("http01-none");
        let mut harness = harness_without_acme(state.path());
        harness.feed(request("GET", &format!("/.well-known/acme-challenge/{TOKEN}")).as_bytes());
        assert_eq!(harness.statuses(), [301]);
    }

    fn harness_without_acme(state: &Path) -> Harness {
        harness(state, false)
    }
}
