//! ACME HTTP-01 answers (RFC 8555 §8.3): `GET /.well-known/acme-challenge/TOKEN` with a
//! pending token is answered `200 text/plain` with its key authorization, on any site and any
//! listener, before site routing, so no site's rewrites, access rules or `redirect_https`
//! stand between the CA and the answer. Any other request (or a token nobody is waiting for)
//! is routed as usual.
//!
//! Owns: recognising such a request and writing the answer. Must not touch: the pending
//! tokens themselves (`tls::acme` reads them from its state directory).

use ampd_http::request::{split_target, Method, RequestHead};
use ampd_http::response::{write_content_length, write_header, write_status_line};

use crate::config::{CertificateSource, Config};
use crate::conn::reply::response_context;
use crate::conn::{Conn, Context, Exchange, Job, Outcome};
use crate::content::serve::Sink;
use crate::response::common_headers;
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
            let response = response_context(context, exchange.persistence, None);
            let out = self.output.bytes();
            write_status_line(out, 200);
            common_headers(out, &response.head);
            write_header(out, "Content-Type", b"text/plain");
            out.extend_from_slice(b"Cache-Control: no-store\r\n");
            write_content_length(out, key_authorization.len() as u64);
            out.extend_from_slice(b"\r\n");
            if exchange.head.method != Method::Head {
                out.extend_from_slice(key_authorization.as_bytes());
            }
        }
        self.record(Some(exchange), 200, mark, context);
        self.settle(Outcome::Responded(exchange.persistence))
    }
}
