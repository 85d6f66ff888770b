//! Site → location inheritance (Abyss's per-directory sections; nginx `merge_loc_conf`).
//!
//! Owns: `Partial` (what one block sets) and `finish`, which fills what a location leaves
//! unset from its site, then from the defaults. A location's value always wins; lists
//! (`index`, `headers`, `error_pages`, `allow`, `deny`, `forwarded_trust`, `params`) are replaced whole, never
//! appended, so a location reads the same whatever its site says about keys it sets itself. A
//! `proxy_pass` implies `handler = "proxy"` (a `fastcgi_pass`, `handler = "fastcgi"`) in the
//! block that sets it, so a location's own handler wins over its site's `proxy_pass` (a
//! `/status` beside a proxied site). `extension` and `regex` are a location's own: they decide routing.
//! Must not touch: the file's text (errors are placed by `load`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::compression::{CompressibleTypes, Compression, Encoding};
use super::error_pages::ErrorPages;
use super::header_rules::HeaderRules;
use crate::mime::TypeOptions;

use super::gateway::{CgiSettings, FastCgiSettings, ScriptSettings};
use super::pools::ProxyPass;
use super::routing::{Return, TryFiles};
use super::upstream::{ProxyHost, ProxySettings};
use super::{AddressRange, BasicAuth, Handler, HandlerKind, LocationSettings, Redirect};

/// The settings one `[[site]]` or `[[site.location]]` block sets; `None` is "not set here".
#[derive(Clone, Debug, Default)]
pub(super) struct Partial {
    /// (directory, is an alias).
    pub root: Option<(PathBuf, bool)>,
    pub index: Option<Vec<String>>,
    pub autoindex: Option<bool>,
    pub precompressed: Option<bool>,
    pub compress: Option<bool>,
    pub compress_types: Option<CompressibleTypes>,
    pub compress_min_length: Option<u64>,
    pub compress_encodings: Option<Vec<Encoding>>,
    /// `compress_levels`: each coding set, replacing the site's table whole.
    pub compress_levels: Option<Vec<(Encoding, u32)>>,
    pub multiviews: Option<bool>,
    /// `negotiation = "strict"` (`true`) or `"lenient"`.
    pub strict_negotiation: Option<bool>,
    pub dotfiles: Option<bool>,
    pub follow_symlinks: Option<bool>,
    pub userdir: Option<String>,
    pub headers: Option<Vec<(String, String)>>,
    pub headers_set: Option<Vec<(String, String)>>,
    pub headers_remove: Option<Vec<String>>,
    pub cache_control: Option<String>,
    pub expires: Option<Duration>,
    pub redirect: Option<Redirect>,
    pub rewrite: Option<String>,
    /// `return`.
    pub answer: Option<Return>,
    pub allow: Option<Vec<AddressRange>>,
    pub deny: Option<Vec<AddressRange>>,
    pub basic_auth: Option<BasicAuth>,
    pub handler: Option<HandlerKind>,
    pub rate_limit: Option<bool>,
    pub max_body: Option<u64>,
    pub internal: Option<bool>,
    pub proxy_pass: Option<ProxyPass>,
    pub proxy_host: Option<ProxyHost>,
    pub websocket: Option<bool>,
    pub x_accel_redirect: Option<bool>,
    pub x_sendfile_root: Option<PathBuf>,
    pub forwarded_trust: Option<Vec<AddressRange>>,
    pub underscores_in_headers: Option<bool>,
    /// The pool `fastcgi_pass` names (an index into `Config::upstreams`).
    pub fastcgi_pass: Option<usize>,
    /// Never inherited (a location's routing): only a location sets it.
    pub extension: Option<String>,
    /// Never inherited (a location's routing): only a location sets it.
    pub regex: Option<regex::Regex>,
    pub script: Option<String>,
    pub params: Option<Vec<(String, String)>>,
    /// `try_files`, or what `fallback` stands for.
    pub try_files: Option<TryFiles>,
    /// Replaced whole by a location's own, as `headers`.
    pub error_pages: Option<Arc<ErrorPages>>,
    pub intercept_errors: Option<bool>,
    pub cgi_timeout: Option<Duration>,
    pub fastcgi_check_script: Option<bool>,
    pub default_type: Option<String>,
    /// `None` inside: `charset = "off"`.
    pub charset: Option<Charset>,
}

/// A block's `charset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Charset {
    Named(String),
    Off,
}

impl Partial {
    /// The handler this block sets: its own `handler`, else `proxy` if it sets `proxy_pass`.
    fn own_handler(&self) -> Option<HandlerKind> {
        self.handler
            .or_else(|| self.proxy_pass.as_ref().map(|_| HandlerKind::Proxy))
            .or_else(|| self.fastcgi_pass.map(|_| HandlerKind::FastCgi))
    }
}

/// Why a location cannot be finished.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unfinished {
    /// A static location (the default handler) that neither it nor its site gives a root.
    MissingRoot,
    /// A proxy location that neither it nor its site gives a `proxy_pass`.
    MissingProxyPass,
    /// A FastCGI location that neither it nor its site gives a `fastcgi_pass`.
    MissingFastCgiPass,
    /// A CGI location that neither it nor its site gives a root (its scripts are found there).
    CgiWithoutRoot,
}

/// The location's settings: its own, else its site's, else the defaults.
pub(super) fn finish(
    mut location: Partial,
    site: &Partial,
) -> Result<LocationSettings, Unfinished> {
    let kind = location
        .own_handler()
        .or_else(|| site.own_handler())
        .unwrap_or(HandlerKind::Static);
    let compression = compression(&location, site, kind);
    let x_accel_redirect = location.x_accel_redirect.or(site.x_accel_redirect);
    let x_sendfile_root = location
        .x_sendfile_root
        .clone()
        .or_else(|| site.x_sendfile_root.clone());
    // Without a root there are no files to find a script among (SCRIPT_FILENAME names none).
    let has_root = location.root.is_some() || site.root.is_some();
    let handler = match kind {
        HandlerKind::Static => Handler::Static,
        HandlerKind::Status => Handler::Status,
        HandlerKind::Health => Handler::Health,
        HandlerKind::Proxy => Handler::Proxy(proxy(&mut location, site)?),
        HandlerKind::FastCgi => Handler::FastCgi(FastCgiSettings {
            pool: location
                .fastcgi_pass
                .or(site.fastcgi_pass)
                .ok_or(Unfinished::MissingFastCgiPass)?,
            x_accel_redirect: x_accel_redirect.unwrap_or(true),
            x_sendfile_root,
            check_script: location
                .fastcgi_check_script
                .or(site.fastcgi_check_script)
                .or((!has_root).then_some(false)),
        }),
        HandlerKind::Cgi => {
            let defaults = CgiSettings::default();
            Handler::Cgi(CgiSettings {
                timeout: location
                    .cgi_timeout
                    .or(site.cgi_timeout)
                    .unwrap_or(defaults.timeout),
                x_accel_redirect: x_accel_redirect.unwrap_or(defaults.x_accel_redirect),
                x_sendfile_root,
            })
        }
    };
    let script = ScriptSettings {
        extension: location.extension.take(),
        script: location.script.take().or_else(|| site.script.clone()),
        params: location
            .params
            .take()
            .or_else(|| site.params.clone())
            .unwrap_or_default(),
    };
    let try_files = location.try_files.take().or_else(|| site.try_files.clone());
    let redirect = location.redirect.or_else(|| site.redirect.clone());
    let rewrite = location.rewrite.or_else(|| site.rewrite.clone());
    let answer = location.answer.or_else(|| site.answer.clone());
    let root = location.root.or_else(|| site.root.clone());
    // Only a static location that is neither redirected, rewritten nor answered by `return`
    // reads files.
    let needs_root =
        kind == HandlerKind::Static && redirect.is_none() && rewrite.is_none() && answer.is_none();
    let (root, alias) = match root {
        Some(root) => root,
        None if needs_root => return Err(Unfinished::MissingRoot),
        None if kind == HandlerKind::Cgi => return Err(Unfinished::CgiWithoutRoot),
        None => (PathBuf::from("/nonexistent"), false),
    };
    let mut settings = LocationSettings::new(root);
    settings.alias = alias;
    let files = &mut settings.static_files;
    if let Some(index) = location.index.or_else(|| site.index.clone()) {
        files.index = index;
    }
    files.autoindex = location
        .autoindex
        .or(site.autoindex)
        .unwrap_or(files.autoindex);
    files.precompressed = location
        .precompressed
        .or(site.precompressed)
        .unwrap_or(files.precompressed);
    files.multiviews = location
        .multiviews
        .or(site.multiviews)
        .unwrap_or(files.multiviews);
    files.strict_negotiation = location
        .strict_negotiation
        .or(site.strict_negotiation)
        .unwrap_or(files.strict_negotiation);
    files.dotfiles = location
        .dotfiles
        .or(site.dotfiles)
        .unwrap_or(files.dotfiles);
    files.follow_symlinks = location
        .follow_symlinks
        .or(site.follow_symlinks)
        .unwrap_or(files.follow_symlinks);
    files.userdir = location.userdir.or_else(|| site.userdir.clone());
    settings.headers = location
        .headers
        .or_else(|| site.headers.clone())
        .unwrap_or_default();
    settings.header_rules = HeaderRules {
        remove: location
            .headers_remove
            .or_else(|| site.headers_remove.clone())
            .unwrap_or_default(),
        set: location
            .headers_set
            .or_else(|| site.headers_set.clone())
            .unwrap_or_default(),
    };
    settings.compression = Arc::new(compression);
    settings.cache_control = location
        .cache_control
        .or_else(|| site.cache_control.clone());
    settings.expires = location.expires.or(site.expires);
    settings.redirect = redirect;
    settings.rewrite = rewrite;
    settings.answer = answer;
    settings.access.allow = location
        .allow
        .or_else(|| site.allow.clone())
        .unwrap_or_default();
    settings.access.deny = location
        .deny
        .or_else(|| site.deny.clone())
        .unwrap_or_default();
    settings.access.basic_auth = location.basic_auth.or_else(|| site.basic_auth.clone());
    settings.handler = handler;
    settings.rate_limit = location.rate_limit.or(site.rate_limit).unwrap_or(true);
    settings.max_body = location.max_body.or(site.max_body);
    settings.internal = location.internal.or(site.internal).unwrap_or(false);
    settings.script = script;
    settings.try_files = try_files;
    settings.error_pages = location.error_pages.or_else(|| site.error_pages.clone());
    settings.intercept_errors = location
        .intercept_errors
        .or(site.intercept_errors)
        .unwrap_or(false);
    let default_type = location.default_type.or_else(|| site.default_type.clone());
    let charset = location.charset.or_else(|| site.charset.clone());
    if default_type.is_some() || charset.is_some() {
        // The table is the configuration's, set once every location is made
        // (`Loader::type_table`).
        let types = &settings.static_files.types;
        let charset = match &charset {
            Some(Charset::Named(name)) => Some(name.as_str()),
            Some(Charset::Off) => None,
            None => types.charset(),
        };
        settings.static_files.types = TypeOptions::new(
            types.table().clone(),
            default_type.as_deref().unwrap_or(types.default_type()),
            charset,
        );
    }
    Ok(settings)
}

/// A proxy location's settings, each the location's, else the site's, else the default.
fn proxy(location: &mut Partial, site: &Partial) -> Result<ProxySettings, Unfinished> {
    let pass = location
        .proxy_pass
        .take()
        .or_else(|| site.proxy_pass.clone())
        .ok_or(Unfinished::MissingProxyPass)?;
    let mut proxy = ProxySettings::new(pass.pool);
    proxy.path = pass.path;
    if let Some(host) = location
        .proxy_host
        .take()
        .or_else(|| site.proxy_host.clone())
    {
        proxy.host = host;
    }
    proxy.websocket = location
        .websocket
        .or(site.websocket)
        .unwrap_or(proxy.websocket);
    proxy.x_accel_redirect = location
        .x_accel_redirect
        .or(site.x_accel_redirect)
        .unwrap_or(proxy.x_accel_redirect);
    proxy.x_sendfile_root = location
        .x_sendfile_root
        .take()
        .or_else(|| site.x_sendfile_root.clone());
    proxy.underscores = location
        .underscores_in_headers
        .or(site.underscores_in_headers)
        .unwrap_or(proxy.underscores);
    if let Some(trust) = location
        .forwarded_trust
        .take()
        .or_else(|| site.forwarded_trust.clone())
    {
        proxy.forwarded_trust = trust;
    }
    Ok(proxy)
}

/// Whether `hash` is a bcrypt (`$2a$`, `$2b$`, `$2y$`) or argon2 (PHC `$argon2id$…`) hash
/// that the verifier can read.
pub(super) fn is_password_hash(hash: &str) -> bool {
    if hash.starts_with("$2a$") || hash.starts_with("$2b$") || hash.starts_with("$2y$") {
        return hash.parse::<bcrypt::HashParts>().is_ok();
    }
    hash.starts_with("$argon2") && argon2::PasswordHash::new(hash).is_ok()
}

/// A location's compression: each key its own, else its site's, else the default. On by
/// default only where ampd serves files itself (as static-web-server); a proxied, FastCGI or
/// CGI response is the program's to shape unless the location turns compression on (as nginx,
/// whose `gzip` is off for everything until asked).
fn compression(location: &Partial, site: &Partial, kind: HandlerKind) -> Compression {
    let enabled = location
        .compress
        .or(site.compress)
        .unwrap_or(kind == HandlerKind::Static);
    let mut compression = Compression::new(enabled);
    if let Some(encodings) = location
        .compress_encodings
        .as_ref()
        .or(site.compress_encodings.as_ref())
    {
        compression.encodings.clone_from(encodings);
    }
    if let Some(levels) = location
        .compress_levels
        .as_ref()
        .or(site.compress_levels.as_ref())
    {
        for &(encoding, level) in levels {
            compression.set_level(encoding, level);
        }
    }
    if let Some(min_length) = location.compress_min_length.or(site.compress_min_length) {
        compression.min_length = min_length;
    }
    if let Some(types) = location
        .compress_types
        .as_ref()
        .or(site.compress_types.as_ref())
    {
        compression.types = types.clone();
    }
    compression
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_keeps_what_it_sets_and_inherits_the_rest() {
        let site = Partial {
            root: Some((PathBuf::from("/srv/site"), false)),
            autoindex: Some(true),
            headers: Some(vec![("X-Site".into(), "1".into())]),
            ..Partial::default()
        };
        let location = Partial {
            autoindex: Some(false),
            expires: Some(Duration::from_secs(60)),
            ..Partial::default()
        };
        let settings = finish(location, &site).unwrap();
        assert_eq!(settings.static_files.root, PathBuf::from("/srv/site"));
        assert!(!settings.static_files.autoindex);
        assert_eq!(
            settings.headers,
            vec![("X-Site".to_owned(), "1".to_owned())]
        );
        assert_eq!(settings.expires, Some(Duration::from_secs(60)));
        assert!(finish(Partial::default(), &Partial::default()).is_err());
        let status = Partial {
            handler: Some(HandlerKind::Status),
            ..Partial::default()
        };
        assert!(finish(status, &Partial::default()).is_ok());
    }

    fn pass(pool: usize, path: Option<&str>) -> Option<ProxyPass> {
        Some(ProxyPass {
            pool,
            path: path.map(str::to_owned),
        })
    }

    #[test]
    fn a_proxy_pass_makes_a_proxy_location_unless_the_location_says_otherwise() {
        let site = Partial {
            proxy_pass: pass(0, Some("/v1/")),
            websocket: Some(true),
            forwarded_trust: Some(Vec::new()),
            max_body: Some(5),
            ..Partial::default()
        };
        // Inherited whole: no root needed.
        let settings = finish(Partial::default(), &site).unwrap();
        let Handler::Proxy(proxy) = settings.handler else {
            panic!("{:?}", settings.handler)
        };
        assert_eq!((proxy.pool, proxy.path.as_deref()), (0, Some("/v1/")));
        assert!(proxy.websocket);
        assert!(proxy.x_accel_redirect, "the default");
        assert_eq!(proxy.host, ProxyHost::Client);
        assert_eq!(settings.max_body, Some(5));
        // The location's own proxy_pass and keys win.
        let location = Partial {
            proxy_pass: pass(1, None),
            websocket: Some(false),
            proxy_host: Some(ProxyHost::Upstream),
            internal: Some(true),
            ..Partial::default()
        };
        let settings = finish(location, &site).unwrap();
        let Handler::Proxy(proxy) = settings.handler else {
            panic!("{:?}", settings.handler)
        };
        assert_eq!((proxy.pool, proxy.path), (1, None));
        assert!(!proxy.websocket);
        assert_eq!(proxy.host, ProxyHost::Upstream);
        assert!(settings.internal);
        // A handler set here wins over the site's proxy_pass.
        let status = Partial {
            handler: Some(HandlerKind::Status),
            ..Partial::default()
        };
        let settings = finish(status, &site).unwrap();
        assert_eq!(settings.handler, Handler::Status);
        // `handler = "proxy"` here takes the site's proxy_pass; with none anywhere it cannot.
        let proxy_handler = Partial {
            handler: Some(HandlerKind::Proxy),
            ..Partial::default()
        };
        assert!(matches!(
            finish(proxy_handler.clone(), &site).unwrap().handler,
            Handler::Proxy(ProxySettings { pool: 0, .. })
        ));
        assert_eq!(
            finish(proxy_handler, &Partial::default()).err(),
            Some(Unfinished::MissingProxyPass)
        );
        assert_eq!(
            finish(Partial::default(), &Partial::default()).err(),
            Some(Unfinished::MissingRoot)
        );
    }
}
