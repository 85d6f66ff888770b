//! `[[site]]` and `[[site.location]]` blocks: host names, locations, the settings a block sets
//! (`Partial`, merged in `merge.rs`), address blocks, redirects, password hashes; with the
//! errors (unknown handler, conflicts, keys in the wrong table, missing roots). The proxy keys
//! are read in `proxy_keys.rs`, the CGI and FastCGI keys in `gateway_keys.rs`.
//!
//! Owns: turning `RawBlock`s into `Site`s. Must not touch: server-wide keys (`load.rs`).

use std::net::IpAddr;
use std::ops::Range;
use std::path::PathBuf;

use toml::Spanned;

use super::load::{ConfigError, Loaded, Loader};
use super::merge::{self, Partial, Unfinished};
use super::raw::{RawAuth, RawBlock};
use super::targets::FASTCGI_PASS_FORMS;
use super::text::{plain, position};
use super::{AddressRange, BasicAuth, HandlerKind, HostName, Location, Redirect, Site};

impl Loader<'_> {
    pub(super) fn sites(&self, raw: &[RawBlock]) -> Loaded<Vec<Site>> {
        if raw.is_empty() {
            return Err(self.hinted(
                0..0,
                "site",
                "no [[site]]: nothing to serve",
                "add a [[site]] with a root",
            ));
        }
        let mut sites = Vec::new();
        let mut seen_names: Vec<(HostName, Range<usize>)> = Vec::new();
        let mut default_span: Option<Range<usize>> = None;
        for block in raw {
            self.only_in_location(block, "site")?;
            let mut names = Vec::new();
            if let Some(list) = &block.server_names {
                for name in list.get_ref() {
                    let host = self.host_name(name, list.span())?;
                    if seen_names.iter().any(|(seen, _)| *seen == host) {
                        return Err(self.hinted(
                            list.span(),
                            "site.server_names",
                            format!("'{name}' is already a name of another site"),
                            "each host name belongs to one site",
                        ));
                    }
                    seen_names.push((host.clone(), list.span()));
                    names.push(host);
                }
            }
            let default = block.default.as_ref().is_some_and(|value| *value.get_ref());
            if default {
                if default_span.is_some() {
                    let span = block.default.as_ref().map_or(0..0, Spanned::span);
                    return Err(self.hinted(
                        span,
                        "site.default",
                        "a second default site",
                        "only one [[site]] may have default = true",
                    ));
                }
                default_span = block.default.as_ref().map(Spanned::span);
            }
            if names.is_empty() && !default && !sites.is_empty() {
                let span = block.root.as_ref().map_or(0..0, Spanned::span);
                return Err(self.hinted(
                    span,
                    "site.server_names",
                    "this site has no server_names and is not the default: it can never be chosen",
                    "give it server_names, or default = true",
                ));
            }
            let site_settings = self.settings(block, "site")?;
            self.handler_has_a_target(block, "site", &site_settings, None)?;
            let tls = self.site_tls(block)?;
            let mut locations = Vec::new();
            let mut seen_paths: Vec<SeenPath<'_>> = Vec::new();
            for location in block.location.as_deref().unwrap_or_default() {
                self.not_a_second_location(location, &mut seen_paths)?;
                locations.push(self.location(location, &site_settings)?);
            }
            if !locations.iter().any(|location| {
                location.path == "/"
                    && !location.exact
                    && location.regex.is_none()
                    && location.settings.script.extension.is_none()
            }) {
                let settings = merge::finish(Partial::default(), &site_settings)
                    .map_err(|unfinished| self.unfinished(block, &unfinished))?;
                locations.push(Location {
                    path: "/".to_owned(),
                    exact: false,
                    regex: None,
                    settings,
                });
            }
            let handlers: Vec<HandlerKind> = locations
                .iter()
                .map(|location| location.settings.handler.kind())
                .collect();
            self.keys_without_their_handler(block, "site", &handlers)?;
            self.intercept_without_upstream(block, "site", &handlers)?;
            sites.push(Site {
                names,
                default,
                locations,
                tls,
            });
        }
        if default_span.is_none() {
            sites[0].default = true;
        }
        Ok(sites)
    }

    fn location(&self, block: &RawBlock, site: &Partial) -> Loaded<Location> {
        for (present, key) in [
            (
                block.server_names.as_ref().map(Spanned::span),
                "server_names",
            ),
            (block.default.as_ref().map(Spanned::span), "default"),
        ] {
            if let Some(span) = present {
                return Err(self.hinted(
                    span,
                    &format!("site.location.{key}"),
                    "only valid in a [[site]]",
                    "move it to the site this location belongs to",
                ));
            }
        }
        if block.location.is_some() {
            return Err(self.error(0..0, "site.location.location", "locations do not nest"));
        }
        self.site_tls_key_in_location(block)?;
        // An extension location matches below "/" unless it says otherwise; a regex location
        // has no prefix.
        let path = match (&block.path, &block.extension) {
            (None, _) if block.regex.is_some() => "/".to_owned(),
            (Some(path), _) => {
                if !path.get_ref().starts_with('/') {
                    return Err(self.error(
                        path.span(),
                        "site.location.path",
                        format!("'{}' does not start with '/'", path.get_ref()),
                    ));
                }
                path.get_ref().clone()
            }
            (None, Some(_)) => "/".to_owned(),
            (None, None) => {
                return Err(self.hinted(
                    first_span(block),
                    "site.location.path",
                    "a location needs a path (or an extension, or a regex)",
                    "path = \"/static/\" (a prefix), with exact = true for one path only; extension = \".php\"; or regex = \"^/img/[0-9]+\\\\.png$\"",
                ));
            }
        };
        let mut partial = self.settings(block, "site.location")?;
        let regex = partial.regex.take();
        self.handler_has_a_target(block, "site.location", &partial, Some(site))?;
        if let Some(alias) = &block.alias {
            if block.root.is_some() {
                return Err(self.hinted(
                    alias.span(),
                    "site.location.alias",
                    "conflicts with root in the same location",
                    "root looks up the whole path below it; alias replaces the location's path: choose one",
                ));
            }
        }
        let settings = merge::finish(partial, site)
            .map_err(|unfinished| self.unfinished(block, &unfinished))?;
        self.keys_without_their_handler(block, "site.location", &[settings.handler.kind()])?;
        self.intercept_without_upstream(block, "site.location", &[settings.handler.kind()])?;
        Ok(Location {
            path,
            exact: block.exact.as_ref().is_some_and(|exact| *exact.get_ref()),
            regex,
            settings,
        })
    }

    /// A second location with the same path and kind (prefix, exact, or extension with the same
    /// extension) as an earlier one in the same site would replace it in the routing table, or
    /// never be reached, and silently drop its rules (a `deny`, a `basic_auth`): refused,
    /// pointing at the second and naming the first's line. An exact, a prefix and an extension
    /// location of one path are different locations and may coexist.
    fn not_a_second_location<'b>(
        &self,
        block: &'b RawBlock,
        seen: &mut Vec<SeenPath<'b>>,
    ) -> Loaded<()> {
        let exact = block.exact.as_ref().is_some_and(|exact| *exact.get_ref());
        let extension = block
            .extension
            .as_ref()
            .map(|value| value.get_ref().as_str());
        let (path, span) = match (&block.path, &block.extension) {
            (Some(path), _) => (path.get_ref().as_str(), path.span()),
            (None, Some(value)) => ("/", value.span()),
            (None, None) => return Ok(()),
        };
        if let Some(first) = seen
            .iter()
            .find(|seen| seen.path == path && seen.exact == exact && seen.extension == extension)
        {
            let (line, _) = position(self.text(), first.at);
            let kind = match (exact, extension) {
                (_, Some(extension)) => {
                    format!("an extension location of '{extension}' below a path")
                }
                (true, None) => "an exact location".to_owned(),
                (false, None) => "a prefix location".to_owned(),
            };
            let key = if block.path.is_some() {
                "site.location.path"
            } else {
                "site.location.extension"
            };
            return Err(self.hinted(
                span,
                key,
                format!("'{path}' is already a location of this site (line {line})"),
                format!("{kind} appears once per site: merge the two blocks"),
            ));
        }
        seen.push(SeenPath {
            path,
            exact,
            extension,
            at: span.start,
        });
        Ok(())
    }

    fn unfinished(&self, block: &RawBlock, unfinished: &Unfinished) -> ConfigError {
        let table = if block.path.is_some() {
            "site.location"
        } else {
            "site"
        };
        let span = block
            .path
            .as_ref()
            .map_or_else(|| first_span(block), Spanned::span);
        match unfinished {
            Unfinished::MissingRoot => self.hinted(
                span,
                &format!("{table}.root"),
                "no root for static files here",
                "set root in the site (or root/alias in the location), or a handler that needs none",
            ),
            // `handler_has_a_target` refuses this where the handler is set; this is what
            // a block that sets neither would be told.
            Unfinished::MissingProxyPass => self.hinted(
                span,
                &format!("{table}.proxy_pass"),
                "a proxy location without proxy_pass",
                "proxy_pass = \"http://NAME\" for an [upstream.NAME], or \"http://127.0.0.1:9001\"",
            ),
            Unfinished::MissingFastCgiPass => self.hinted(
                span,
                &format!("{table}.fastcgi_pass"),
                "a FastCGI location without fastcgi_pass",
                format!("fastcgi_pass = {FASTCGI_PASS_FORMS}"),
            ),
            Unfinished::CgiWithoutRoot => self.hinted(
                span,
                &format!("{table}.root"),
                "no root for this CGI location's scripts",
                "set root in the site, or root/alias in the location: scripts are found below it",
            ),
        }
    }

    fn only_in_location(&self, block: &RawBlock, table: &str) -> Loaded<()> {
        for (present, key) in [
            (block.path.as_ref().map(Spanned::span), "path"),
            (block.exact.as_ref().map(Spanned::span), "exact"),
            (block.alias.as_ref().map(Spanned::span), "alias"),
            (block.extension.as_ref().map(Spanned::span), "extension"),
            (block.regex.as_ref().map(Spanned::span), "regex"),
        ] {
            if let Some(span) = present {
                return Err(self.hinted(
                    span,
                    &format!("{table}.{key}"),
                    "only valid in a [[site.location]]",
                    "a site uses root; put path/exact/alias/extension/regex in a [[site.location]]",
                ));
            }
        }
        Ok(())
    }

    /// The settings a block sets itself (inheritance happens in `merge`).
    fn settings(&self, block: &RawBlock, table: &str) -> Loaded<Partial> {
        let key = |name: &str| format!("{table}.{name}");
        let mut partial = Partial {
            regex: self.location_regex(block, table)?,
            ..Partial::default()
        };
        if let Some(root) = &block.root {
            partial.root = Some((self.directory(root, &key("root"))?, false));
        }
        if let Some(alias) = &block.alias {
            partial.root = Some((self.directory(alias, &key("alias"))?, true));
        }
        partial.index = block.index.as_ref().map(|value| value.get_ref().clone());
        partial.autoindex = block.autoindex.as_ref().map(|value| *value.get_ref());
        partial.precompressed = block.precompressed.as_ref().map(|value| *value.get_ref());
        partial.dotfiles = block.dotfiles.as_ref().map(|value| *value.get_ref());
        partial.follow_symlinks = block.follow_symlinks.as_ref().map(|value| *value.get_ref());
        partial.userdir = block.userdir.as_ref().map(|value| value.get_ref().clone());
        if let Some(headers) = &block.headers {
            let mut list = Vec::new();
            for (name, value) in headers.get_ref() {
                if !ampd_http::is_token(name.as_bytes()) {
                    return Err(self.error(
                        headers.span(),
                        &key("headers"),
                        format!("'{name}' is not a header name"),
                    ));
                }
                if value
                    .bytes()
                    .any(|byte| byte == b'\r' || byte == b'\n' || byte == 0)
                {
                    return Err(self.error(
                        headers.span(),
                        &key("headers"),
                        format!("the value of '{name}' has a line break"),
                    ));
                }
                list.push((name.clone(), value.clone()));
            }
            partial.headers = Some(list);
        }
        if let Some(value) = &block.cache_control {
            if value
                .get_ref()
                .bytes()
                .any(|byte| byte == b'\r' || byte == b'\n' || byte == 0)
            {
                return Err(self.error(value.span(), &key("cache_control"), "has a line break"));
            }
            partial.cache_control = Some(value.get_ref().clone());
        }
        if let Some(value) = &block.expires {
            partial.expires = Some(self.duration(value, &key("expires"), true)?);
        }
        partial.redirect = self.redirect(block, table)?;
        if let Some(rewrite) = &block.rewrite {
            if !rewrite.get_ref().starts_with('/') {
                return Err(self.error(
                    rewrite.span(),
                    &key("rewrite"),
                    format!("'{}' does not start with '/'", rewrite.get_ref()),
                ));
            }
            if block.redirect.is_some() {
                return Err(self.hinted(
                    rewrite.span(),
                    &key("rewrite"),
                    "conflicts with redirect in the same block",
                    "a request is either redirected or rewritten",
                ));
            }
            partial.rewrite = Some(rewrite.get_ref().clone());
        }
        if let Some(list) = &block.allow {
            partial.allow = Some(self.addresses(list, &key("allow"))?);
        }
        if let Some(list) = &block.deny {
            partial.deny = Some(self.addresses(list, &key("deny"))?);
        }
        if let Some(auth) = &block.basic_auth {
            partial.basic_auth = Some(self.basic_auth(auth, &key("basic_auth"))?);
        }
        if let Some(handler) = &block.handler {
            partial.handler = Some(match handler.get_ref().as_str() {
                "static" => HandlerKind::Static,
                "status" => HandlerKind::Status,
                "health" => HandlerKind::Health,
                "proxy" => HandlerKind::Proxy,
                "fastcgi" => HandlerKind::FastCgi,
                "cgi" => HandlerKind::Cgi,
                other => {
                    return Err(self.hinted(
                        handler.span(),
                        &key("handler"),
                        format!("unknown handler '{other}'"),
                        "static, status, health, proxy, fastcgi or cgi",
                    ))
                }
            });
        }
        partial.rate_limit = block.rate_limit.as_ref().map(|value| *value.get_ref());
        self.proxy_keys(block, table, &mut partial)?;
        self.gateway_keys(block, table, &mut partial)?;
        self.type_keys(block, table, &mut partial)?;
        self.routing_keys(block, table, &mut partial)?;
        self.negotiation_keys(block, table, &mut partial)?;
        self.header_keys(block, table, &mut partial)?;
        self.compression_keys(block, table, &mut partial)?;
        self.error_page_keys(block, table, &mut partial)?;
        Ok(partial)
    }

    fn redirect(&self, block: &RawBlock, table: &str) -> Loaded<Option<Redirect>> {
        let status = match &block.redirect_status {
            Some(status) => {
                let code = *status.get_ref();
                if ![301, 302, 303, 307, 308].contains(&code) {
                    return Err(self.hinted(
                        status.span(),
                        &format!("{table}.redirect_status"),
                        format!("{code} is not a redirect status"),
                        "301, 302, 303, 307 or 308",
                    ));
                }
                if block.redirect.is_none() {
                    return Err(self.hinted(
                        status.span(),
                        &format!("{table}.redirect_status"),
                        "redirect_status without redirect",
                        "set redirect = \"https://…\" too",
                    ));
                }
                u16::try_from(code).unwrap_or(302)
            }
            None => 302,
        };
        Ok(block.redirect.as_ref().map(|to| Redirect {
            to: to.get_ref().clone(),
            status,
        }))
    }

    pub(super) fn directory(&self, value: &Spanned<String>, key: &str) -> Loaded<PathBuf> {
        let path = self.path(value.get_ref());
        let canonical = std::fs::canonicalize(&path).map_err(|error| {
            self.error(
                value.span(),
                key,
                format!("{}: {}", path.display(), plain(&error)),
            )
        })?;
        if !canonical.is_dir() {
            return Err(self.error(
                value.span(),
                key,
                format!("{}: not a directory", path.display()),
            ));
        }
        Ok(canonical)
    }

    fn host_name(&self, name: &str, span: Range<usize>) -> Loaded<HostName> {
        let lower = name.to_ascii_lowercase();
        let (body, wildcard) = match lower.strip_prefix("*.") {
            Some(rest) => (rest.to_owned(), true),
            None => (lower.clone(), false),
        };
        let valid = !body.is_empty()
            && body.len() <= 253
            && body
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.')
            && !body.starts_with('.')
            && !body.ends_with('.');
        if !valid {
            return Err(self.hinted(
                span,
                "site.server_names",
                format!("'{name}' is not a host name"),
                "a name like example.com, or *.example.com for its subdomains",
            ));
        }
        Ok(if wildcard {
            HostName::Suffix(format!(".{body}"))
        } else {
            HostName::Exact(body)
        })
    }

    pub(super) fn addresses(
        &self,
        list: &Spanned<Vec<String>>,
        key: &str,
    ) -> Loaded<Vec<AddressRange>> {
        let mut ranges = Vec::new();
        for text in list.get_ref() {
            if text == "all" {
                ranges.push(AddressRange {
                    network: IpAddr::from([0, 0, 0, 0]),
                    prefix: 0,
                });
                ranges.push(AddressRange {
                    network: IpAddr::from([0u16; 8]),
                    prefix: 0,
                });
                continue;
            }
            let (address, prefix) = match text.split_once('/') {
                Some((address, prefix)) => (address, Some(prefix)),
                None => (text.as_str(), None),
            };
            let bad = || {
                self.hinted(
                    list.span(),
                    key,
                    format!("'{text}' is not an address or block"),
                    "like 127.0.0.1, 10.0.0.0/8, ::1, fd00::/8 or all",
                )
            };
            let network: IpAddr = address.parse().map_err(|_| bad())?;
            let bits = if network.is_ipv4() { 32 } else { 128 };
            let prefix = match prefix {
                Some(prefix) => prefix
                    .parse::<u8>()
                    .ok()
                    .filter(|p| *p <= bits)
                    .ok_or_else(bad)?,
                None => bits,
            };
            ranges.push(AddressRange { network, prefix });
        }
        Ok(ranges)
    }

    fn basic_auth(&self, auth: &Spanned<RawAuth>, key: &str) -> Loaded<BasicAuth> {
        let raw = auth.get_ref();
        let realm = raw
            .realm
            .as_ref()
            .map_or_else(|| "ampd".to_owned(), |realm| realm.get_ref().clone());
        if realm.contains('"') || realm.contains('\\') || realm.bytes().any(|byte| byte < 0x20) {
            let span = raw.realm.as_ref().map_or(auth.span(), Spanned::span);
            return Err(self.error(
                span,
                &format!("{key}.realm"),
                "may not contain quotes, backslashes or control characters",
            ));
        }
        if raw.users.get_ref().is_empty() {
            return Err(self.hinted(
                raw.users.span(),
                &format!("{key}.users"),
                "no users",
                "users = { alice = \"$2b$…\" }",
            ));
        }
        let mut users = Vec::new();
        for (user, hash) in raw.users.get_ref() {
            if user.contains(':') || user.is_empty() {
                return Err(self.error(
                    hash.span(),
                    &format!("{key}.users"),
                    format!("'{user}' is not a user name (no ':' allowed)"),
                ));
            }
            if !crate::config::merge::is_password_hash(hash.get_ref()) {
                return Err(self.hinted(
                    hash.span(),
                    &format!("{key}.users.{user}"),
                    "not a bcrypt or argon2 hash",
                    "make one with `htpasswd -nbB USER PASSWORD` (bcrypt) or the argon2 tool ($argon2id$…)",
                ));
            }
            users.push((user.clone(), hash.get_ref().clone()));
        }
        Ok(BasicAuth { realm, users })
    }
}

/// The span of some key a block sets, to point at the block in an error.
fn first_span(block: &RawBlock) -> Range<usize> {
    block
        .root
        .as_ref()
        .map(Spanned::span)
        .or_else(|| block.handler.as_ref().map(Spanned::span))
        .or_else(|| block.alias.as_ref().map(Spanned::span))
        .or_else(|| block.proxy_pass.as_ref().map(Spanned::span))
        .or_else(|| block.fastcgi_pass.as_ref().map(Spanned::span))
        .or_else(|| block.extension.as_ref().map(Spanned::span))
        .unwrap_or(0..0)
}

/// A location already read, to refuse a second of the same kind.
struct SeenPath<'b> {
    path: &'b str,
    exact: bool,
    extension: Option<&'b str>,
    /// Byte offset of its `path` (or `extension`).
    at: usize,
}
