//! The keys of a `[[site]]` or `[[site.location]]` that make or shape a proxy location
//! (`proxy_pass`, `proxy_host`, `websocket`, `x_accel_redirect`, `x_sendfile_root`,
//! `forwarded_trust`, `underscores_in_headers`), and the two any location may set for it (`max_body`, `internal`), with
//! their errors.
//!
//! Owns: reading them into a `Partial` and the checks that need the block (a proxy handler
//! without a target, a target beside another handler, a redirect or a rewrite, a proxy key
//! where nothing proxies). `x_accel_redirect` and `x_sendfile_root` serve FastCGI and CGI
//! locations too.
//! Must not touch: pools (`pools.rs`), inheritance (`merge.rs`).

use std::ops::Range;

use toml::Spanned;

use super::load::{Loaded, Loader};
use super::merge::Partial;
use super::raw::RawBlock;
use super::targets::FASTCGI_PASS_FORMS;
use super::upstream::ProxyHost;
use super::HandlerKind;

/// What `handler = "proxy"` without a target is told.
const PROXY_PASS_HINT: &str =
    "proxy_pass = \"http://NAME\" for an [upstream.NAME], or \"http://127.0.0.1:9001\"";

impl Loader<'_> {
    /// Reads the proxy keys, `max_body` and `internal` that `block` sets into `partial`
    /// (whose `handler` is already read).
    pub(super) fn proxy_keys(
        &self,
        block: &RawBlock,
        table: &str,
        partial: &mut Partial,
    ) -> Loaded<()> {
        let key = |name: &str| format!("{table}.{name}");
        if let Some(value) = &block.max_body {
            partial.max_body = Some(self.size(value, &key("max_body"))?);
        }
        partial.internal = block.internal.as_ref().map(|value| *value.get_ref());
        if let Some(value) = &block.proxy_pass {
            if let (Some(handler), Some(name)) = (partial.handler, &block.handler) {
                if handler != HandlerKind::Proxy {
                    return Err(self.hinted(
                        value.span(),
                        &key("proxy_pass"),
                        format!("conflicts with handler = \"{}\"", name.get_ref()),
                        "a location with proxy_pass is a proxy: drop one of the two",
                    ));
                }
            }
            // Both answer before the handler runs (docs/config.md, the request phases), so the
            // proxy_pass would never be used.
            for (other, set) in [
                ("redirect", block.redirect.is_some()),
                ("rewrite", block.rewrite.is_some()),
                ("return", block.return_.is_some()),
            ] {
                if set {
                    return Err(self.hinted(
                        value.span(),
                        &key("proxy_pass"),
                        format!("conflicts with {other} in the same block"),
                        format!("a request is either answered by the {other} or proxied"),
                    ));
                }
            }
            partial.proxy_pass = Some(self.proxy_pass(value, &key("proxy_pass"))?);
        }
        if let Some(value) = &block.proxy_host {
            partial.proxy_host = Some(self.proxy_host(value, &key("proxy_host"))?);
        }
        partial.websocket = block.websocket.as_ref().map(|value| *value.get_ref());
        partial.x_accel_redirect = block
            .x_accel_redirect
            .as_ref()
            .map(|value| *value.get_ref());
        if let Some(root) = &block.x_sendfile_root {
            partial.x_sendfile_root = Some(self.directory(root, &key("x_sendfile_root"))?);
        }
        if let Some(list) = &block.forwarded_trust {
            partial.forwarded_trust = Some(self.addresses(list, &key("forwarded_trust"))?);
        }
        partial.underscores_in_headers = block
            .underscores_in_headers
            .as_ref()
            .map(|value| *value.get_ref());
        Ok(())
    }

    fn proxy_host(&self, value: &Spanned<String>, key: &str) -> Loaded<ProxyHost> {
        Ok(match value.get_ref().as_str() {
            "client" => ProxyHost::Client,
            "upstream" => ProxyHost::Upstream,
            literal => {
                // What a `Host` field may hold (RFC 9110 §7.2: uri-host [":" port]), so the
                // value cannot break the request head it goes into.
                let valid = !literal.is_empty()
                    && literal.bytes().all(|byte| {
                        byte.is_ascii_alphanumeric() || b"-._~:[]!$&'()*+,;=%".contains(&byte)
                    });
                if !valid {
                    return Err(self.hinted(
                        value.span(),
                        key,
                        format!("'{literal}' is not a host"),
                        "\"client\" (the request's Host), \"upstream\" (the server's address), or a host like backend.internal:8080",
                    ));
                }
                ProxyHost::Literal(literal.to_owned())
            }
        })
    }

    /// `handler = "proxy"` or `"fastcgi"` in `block` with no target (`proxy_pass`,
    /// `fastcgi_pass`) in it or (for a location) in its site: refused where the handler is set.
    pub(super) fn handler_has_a_target(
        &self,
        block: &RawBlock,
        table: &str,
        partial: &Partial,
        site: Option<&Partial>,
    ) -> Loaded<()> {
        let Some(handler) = &block.handler else {
            return Ok(());
        };
        let (name, hint, has_target): (_, _, fn(&Partial) -> bool) = match partial.handler {
            Some(HandlerKind::Proxy) => ("proxy", PROXY_PASS_HINT.to_owned(), |partial| {
                partial.proxy_pass.is_some()
            }),
            Some(HandlerKind::FastCgi) => (
                "fastcgi",
                format!("fastcgi_pass = {FASTCGI_PASS_FORMS}"),
                |partial| partial.fastcgi_pass.is_some(),
            ),
            _ => return Ok(()),
        };
        if has_target(partial) || site.is_some_and(has_target) {
            return Ok(());
        }
        Err(self.hinted(
            handler.span(),
            &format!("{table}.handler"),
            format!("handler \"{name}\" without {name}_pass"),
            hint,
        ))
    }

    /// A key that only a proxy location reads, set in `block` where none of `handlers` proxies
    /// (or, for `x_accel_redirect` and `x_sendfile_root`, where none relays a program's or a
    /// server's response): refused rather than ignored (it would look like it does something).
    pub(super) fn proxy_key_without_proxy(
        &self,
        block: &RawBlock,
        table: &str,
        handlers: &[HandlerKind],
    ) -> Loaded<()> {
        if !handlers.contains(&HandlerKind::Proxy) {
            if let Some((span, name)) = proxy_only_key(block) {
                return Err(self.hinted(
                    span,
                    &format!("{table}.{name}"),
                    "only for a proxy location",
                    "set proxy_pass here or in the site, or remove it",
                ));
            }
        }
        let relays = handlers.iter().any(|handler| {
            matches!(
                handler,
                HandlerKind::Proxy | HandlerKind::FastCgi | HandlerKind::Cgi
            )
        });
        if !relays {
            if let Some((span, name)) = response_key(block) {
                return Err(self.hinted(
                    span,
                    &format!("{table}.{name}"),
                    "only for a proxy, FastCGI or CGI location",
                    "set proxy_pass, fastcgi_pass or handler = \"cgi\" here or in the site, or remove it",
                ));
            }
        }
        Ok(())
    }
}

/// The first key `block` sets that only a proxy location reads.
fn proxy_only_key(block: &RawBlock) -> Option<(Range<usize>, &'static str)> {
    [
        (block.proxy_host.as_ref().map(Spanned::span), "proxy_host"),
        (block.websocket.as_ref().map(Spanned::span), "websocket"),
        (
            block.forwarded_trust.as_ref().map(Spanned::span),
            "forwarded_trust",
        ),
        (
            block.underscores_in_headers.as_ref().map(Spanned::span),
            "underscores_in_headers",
        ),
    ]
    .into_iter()
    .find_map(|(span, name)| span.map(|span| (span, name)))
}

/// The first key `block` sets that only a location relaying a response (proxy, FastCGI, CGI)
/// reads.
fn response_key(block: &RawBlock) -> Option<(Range<usize>, &'static str)> {
    [
        (
            block.x_accel_redirect.as_ref().map(Spanned::span),
            "x_accel_redirect",
        ),
        (
            block.x_sendfile_root.as_ref().map(Spanned::span),
            "x_sendfile_root",
        ),
    ]
    .into_iter()
    .find_map(|(span, name)| span.map(|span| (span, name)))
}
