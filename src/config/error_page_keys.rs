//! The `error_pages` and `intercept_errors` keys of a `[[site]]` or `[[site.location]]`
//! (inherited site → location, the table whole, as `headers`).
//!
//! Owns: reading them, with errors naming the line and key: a key that is not a status from
//! 300 to 599 or a class (`4xx`, `5xx`), a page that is not a local URI, a stated status a page
//! cannot be sent with, `intercept_errors` where no upstream answers. Must not touch: what the
//! table means at run time (`error_pages.rs`, `conn::error_pages`).

use std::sync::Arc;

use toml::Spanned;

use super::error_pages::{ErrorKey, ErrorPage, ErrorPages};
use super::load::{Loaded, Loader};
use super::merge::Partial;
use super::raw::{RawBlock, RawErrorPage};
use super::HandlerKind;

const KEY_HINT: &str = "a status from 300 to 599 (404 = \"/errors/404.html\") or a class \
     (\"5xx\" = \"/errors/50x.html\"); an exact status wins over its class";
const URI_HINT: &str = "a path of this server from '/' (a query may follow), routed inside ampd: \
     \"/errors/404.html\"";

impl Loader<'_> {
    pub(super) fn error_page_keys(
        &self,
        block: &RawBlock,
        table: &str,
        partial: &mut Partial,
    ) -> Loaded<()> {
        partial.intercept_errors = block
            .intercept_errors
            .as_ref()
            .map(|value| *value.get_ref());
        let Some(listed) = &block.error_pages else {
            return Ok(());
        };
        let key = format!("{table}.error_pages");
        let mut pages = ErrorPages::default();
        for (name, value) in listed.get_ref() {
            let Some(status) = ErrorKey::parse(name.get_ref()) else {
                return Err(self.hinted(
                    name.span(),
                    &key,
                    format!("'{}' is not an error status or class", name.get_ref()),
                    KEY_HINT,
                ));
            };
            let page = self.error_page(value, &key)?;
            pages.insert(status, page);
        }
        partial.error_pages = Some(Arc::new(pages));
        Ok(())
    }

    fn error_page(&self, value: &Spanned<RawErrorPage>, key: &str) -> Loaded<ErrorPage> {
        let (uri, status) = match value.get_ref() {
            RawErrorPage::Uri(uri) => (Spanned::new(value.span(), uri.clone()), None),
            RawErrorPage::Table(table) => {
                let Some(uri) = &table.uri else {
                    return Err(self.hinted(
                        value.span(),
                        key,
                        "a page's table needs its uri",
                        "{ uri = \"/denied.html\", status = 200 }",
                    ));
                };
                (uri.clone(), table.status.as_ref())
            }
        };
        let text = uri.get_ref();
        if !text.starts_with('/')
            || text
                .bytes()
                .any(|byte| byte <= b' ' || byte == 0x7f || byte == b'#')
        {
            return Err(self.hinted(
                uri.span(),
                key,
                format!("'{text}' is not a local URI"),
                URI_HINT,
            ));
        }
        let status = match status {
            None => None,
            Some(status) => {
                let value = *status.get_ref();
                // A page has a body: a status that must have none would break the framing.
                let usable = u16::try_from(value)
                    .ok()
                    .filter(|code| (200..=599).contains(code) && ![204, 205, 304].contains(code));
                let Some(code) = usable else {
                    return Err(self.hinted(
                        status.span(),
                        key,
                        format!("{value} is not a status a page can be sent with"),
                        "200 to 599, but not 204, 205 or 304 (they have no body)",
                    ));
                };
                Some(code)
            }
        };
        Ok(ErrorPage {
            uri: text.clone(),
            status,
        })
    }

    /// `intercept_errors = true` needs an upstream to intercept: a proxy, FastCGI or CGI
    /// location (`handlers`: the location's, or every location of a site).
    pub(super) fn intercept_without_upstream(
        &self,
        block: &RawBlock,
        table: &str,
        handlers: &[HandlerKind],
    ) -> Loaded<()> {
        let Some(value) = &block.intercept_errors else {
            return Ok(());
        };
        let upstream = handlers.iter().any(|handler| {
            matches!(
                handler,
                HandlerKind::Proxy | HandlerKind::FastCgi | HandlerKind::Cgi
            )
        });
        if *value.get_ref() && !upstream {
            return Err(self.hinted(
                value.span(),
                &format!("{table}.intercept_errors"),
                "only for a proxy, FastCGI or CGI location: nothing here answers from upstream",
                "set it where proxy_pass, fastcgi_pass or handler = \"cgi\" is, or remove it",
            ));
        }
        Ok(())
    }
}
