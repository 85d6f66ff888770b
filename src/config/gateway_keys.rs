//! The keys of a `[[site]]` or `[[site.location]]` that make or shape a CGI or FastCGI location
//! (`fastcgi_pass`, `extension`, `script`, `params`, `fallback`, `cgi_timeout`,
//! `fastcgi_check_script`), with their errors.
//!
//! Owns: reading them into a `Partial`, resolving `fastcgi_pass` to a pool, and the checks that
//! need the block (a `fastcgi_pass` beside another handler, `proxy_pass`, a redirect or a
//! rewrite; `handler = "fastcgi"` without a target; a key where no location uses it).
//! Must not touch: pools' settings (`pools.rs`), inheritance (`merge.rs`), the proxy's keys
//! (`proxy_keys.rs`).

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::load::{Loaded, Loader};
use super::merge::Partial;
use super::pool_table::PoolUse;
use super::raw::RawBlock;
use super::targets::{parse_fastcgi_pass, FastCgiTarget, FASTCGI_PASS_FORMS};
use super::upstream::UpstreamProtocol;
use super::HandlerKind;
use ampd_http::is_token;

impl Loader<'_> {
    /// A table of names and text values (`params`, an application's `env`): every name passes
    /// `is_name` (else `'NAME' is not WHAT`, with `hint`), and no value holds a NUL byte (it
    /// could not reach a program's environment).
    pub(super) fn named_values(
        &self,
        table: &Spanned<BTreeMap<String, String>>,
        key: &str,
        is_name: impl Fn(&str) -> bool,
        what: &str,
        hint: &str,
    ) -> Loaded<Vec<(String, String)>> {
        let mut list = Vec::new();
        for (name, value) in table.get_ref() {
            if !is_name(name) {
                return Err(self.hinted(
                    table.span(),
                    key,
                    format!("'{name}' is not {what}"),
                    hint,
                ));
            }
            if value.contains('\0') {
                return Err(self.error(
                    table.span(),
                    key,
                    format!("the value of '{name}' has a NUL byte"),
                ));
            }
            list.push((name.clone(), value.clone()));
        }
        Ok(list)
    }

    /// Reads the CGI and FastCGI keys `block` sets into `partial` (whose `handler` is already
    /// read). `extension` is refused in a site by `only_in_location`.
    pub(super) fn gateway_keys(
        &self,
        block: &RawBlock,
        table: &str,
        partial: &mut Partial,
    ) -> Loaded<()> {
        let key = |name: &str| format!("{table}.{name}");
        if let Some(value) = &block.fastcgi_pass {
            self.fastcgi_pass_alone(block, value, &key("fastcgi_pass"), partial)?;
            partial.fastcgi_pass = Some(self.fastcgi_pass(value, &key("fastcgi_pass"))?);
        }
        if let Some(value) = &block.extension {
            partial.extension = Some(self.extension(value, &key("extension"))?);
            if let Some(exact) = block.exact.as_ref().filter(|exact| *exact.get_ref()) {
                return Err(self.hinted(
                    exact.span(),
                    &key("exact"),
                    "conflicts with extension in the same location",
                    "an extension location matches every path with a segment ending in it (below its path): drop exact",
                ));
            }
        }
        if let Some(value) = &block.script {
            if block.extension.is_some() {
                return Err(self.hinted(
                    value.span(),
                    &key("script"),
                    "conflicts with extension in the same location",
                    "extension runs the script the path names; script runs one script for every path: choose one",
                ));
            }
            partial.script = Some(self.url_path(value, &key("script"))?);
        }
        if let Some(params) = &block.params {
            let is_name = |name: &str| is_token(name.as_bytes());
            partial.params = Some(self.named_values(
                params,
                &key("params"),
                is_name,
                "a meta-variable name",
                "letters, digits and ! # $ % & ' * + - . ^ _ ` | ~, like APP_ENV",
            )?);
        }
        if let Some(value) = &block.fallback {
            let uri = self.url_path(value, &key("fallback"))?;
            partial.try_files = Some(crate::config::TryFiles::fallback(uri));
        }
        if let Some(value) = &block.cgi_timeout {
            partial.cgi_timeout = Some(self.duration(value, &key("cgi_timeout"), false)?);
        }
        partial.fastcgi_check_script = block
            .fastcgi_check_script
            .as_ref()
            .map(|value| *value.get_ref());
        Ok(())
    }

    /// `fastcgi_pass` makes the block a FastCGI location: refused beside a `proxy_pass`, another
    /// `handler`, or a `redirect`/`rewrite` (which answer first, so it would never be used).
    fn fastcgi_pass_alone(
        &self,
        block: &RawBlock,
        value: &Spanned<String>,
        key: &str,
        partial: &Partial,
    ) -> Loaded<()> {
        if let (Some(handler), Some(name)) = (partial.handler, &block.handler) {
            if handler != HandlerKind::FastCgi {
                return Err(self.hinted(
                    value.span(),
                    key,
                    format!("conflicts with handler = \"{}\"", name.get_ref()),
                    "a location with fastcgi_pass is a FastCGI location: drop one of the two",
                ));
            }
        }
        if block.proxy_pass.is_some() {
            return Err(self.hinted(
                value.span(),
                key,
                "conflicts with proxy_pass in the same block",
                "a location either proxies over HTTP or passes to FastCGI: drop one of the two",
            ));
        }
        for (other, set) in [
            ("redirect", block.redirect.is_some()),
            ("rewrite", block.rewrite.is_some()),
            ("return", block.return_.is_some()),
        ] {
            if set {
                return Err(self.hinted(
                    value.span(),
                    key,
                    format!("conflicts with {other} in the same block"),
                    format!("a request is either answered by the {other} or passed to FastCGI"),
                ));
            }
        }
        Ok(())
    }

    /// A `fastcgi_pass`: the pool of an `[upstream.NAME]` or `[application.NAME]`, or the
    /// implicit FastCGI pool of an address; the pool speaks FastCGI from now on.
    pub(super) fn fastcgi_pass(&self, value: &Spanned<String>, key: &str) -> Loaded<usize> {
        let text = value.get_ref();
        let target = parse_fastcgi_pass(text).map_err(|reason| {
            self.hinted(
                value.span(),
                key,
                format!("'{text}' is not a FastCGI address ({reason})"),
                FASTCGI_PASS_FORMS,
            )
        })?;
        let pool = match target {
            FastCgiTarget::Pool(name) => self.pools.borrow().named(name).ok_or_else(|| {
                self.hinted(
                    value.span(),
                    key,
                    format!("no [upstream.{name}] or [application.{name}]"),
                    format!("define [upstream.{name}] or [application.{name}], or give an address: unix:/run/php/php8.2-fpm.sock, 127.0.0.1:9000"),
                )
            })?,
            FastCgiTarget::Address(address) => {
                let addresses = self.resolve(&address, value.span(), key)?;
                self.pools
                    .borrow_mut()
                    .implicit(addresses, text, UpstreamProtocol::FastCgi)
            }
        };
        self.use_pool(
            pool,
            PoolUse {
                protocol: UpstreamProtocol::FastCgi,
                at: value.span().start,
                key: "fastcgi_pass",
            },
            value.span(),
            key,
        )?;
        Ok(pool)
    }

    fn extension(&self, value: &Spanned<String>, key: &str) -> Loaded<String> {
        let text = value.get_ref();
        let valid = text.len() > 1
            && text.starts_with('.')
            && !text
                .bytes()
                .any(|byte| byte == b'/' || byte <= b' ' || byte == 0x7f);
        if !valid {
            return Err(self.hinted(
                value.span(),
                key,
                format!("'{text}' is not an extension"),
                "a dot and a name without '/' or spaces, like \".php\" or \".cgi\"",
            ));
        }
        Ok(text.clone())
    }

    /// A path in the site's URL space (`script`, `fallback`): from `/`, without a query, a
    /// space or a control character.
    fn url_path(&self, value: &Spanned<String>, key: &str) -> Loaded<String> {
        let text = value.get_ref();
        if !text.starts_with('/') {
            return Err(self.hinted(
                value.span(),
                key,
                format!("'{text}' does not start with '/'"),
                "a path of this site, like \"/index.php\"",
            ));
        }
        if text
            .bytes()
            .any(|byte| byte <= b' ' || byte == 0x7f || byte == b'?' || byte == b'#')
        {
            return Err(self.hinted(
                value.span(),
                key,
                format!("'{text}' has a space, a control character, '?' or '#'"),
                "a plain path: the request's query is kept",
            ));
        }
        Ok(text.clone())
    }

    /// A key set in `block` that none of `handlers` (the block's own handler, or for a site
    /// every handler of its locations) reads: refused rather than ignored (it would look like it
    /// does something).
    pub(super) fn keys_without_their_handler(
        &self,
        block: &RawBlock,
        table: &str,
        handlers: &[HandlerKind],
    ) -> Loaded<()> {
        self.proxy_key_without_proxy(block, table, handlers)?;
        let gateway = handlers
            .iter()
            .any(|handler| matches!(handler, HandlerKind::FastCgi | HandlerKind::Cgi));
        let checks: [(Option<Range<usize>>, &str, bool, &str); 6] = [
            (
                block.script.as_ref().map(Spanned::span),
                "script",
                gateway,
                "only for a CGI or FastCGI location",
            ),
            (
                block.params.as_ref().map(Spanned::span),
                "params",
                gateway,
                "only for a CGI or FastCGI location",
            ),
            (
                block.cgi_timeout.as_ref().map(Spanned::span),
                "cgi_timeout",
                handlers.contains(&HandlerKind::Cgi),
                "only for a CGI location (handler = \"cgi\")",
            ),
            (
                block.fastcgi_check_script.as_ref().map(Spanned::span),
                "fastcgi_check_script",
                handlers.contains(&HandlerKind::FastCgi),
                "only for a FastCGI location (fastcgi_pass)",
            ),
            (
                block.fallback.as_ref().map(Spanned::span),
                "fallback",
                handlers.contains(&HandlerKind::Static),
                "only for a static location: it names what a request finds no file for",
            ),
            (
                block.try_files.as_ref().map(Spanned::span),
                "try_files",
                handlers.contains(&HandlerKind::Static),
                "only for a static location: it names the files a request is answered with",
            ),
        ];
        for (span, name, used, message) in checks {
            if let (Some(span), false) = (span, used) {
                return Err(self.hinted(
                    span,
                    &format!("{table}.{name}"),
                    message,
                    "set the handler here or in the site, or remove it",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use super::super::gateway::{CgiSettings, FastCgiSettings};
    use super::super::load::load_str;
    use super::super::upstream::{UpstreamAddress, UpstreamProtocol};
    use super::super::{Config, ConfigError, Handler, HandlerKind, LocationSettings};

    fn load(text: &str) -> Result<Config, ConfigError> {
        load_str(text, Path::new("/etc/ampd/ampd.toml"))
    }

    /// The one error `text` gets: (line, key, message).
    fn error(text: &str) -> (usize, String, String) {
        let error = load(text).expect_err("an error");
        assert!(error.hint.is_some(), "a hint: {error}");
        (error.line, error.key, error.message)
    }

    fn location<'c>(
        config: &'c Config,
        path: &str,
        extension: Option<&str>,
    ) -> &'c LocationSettings {
        &config.sites[0]
            .locations
            .iter()
            .find(|location| {
                location.path == path && location.settings.script.extension.as_deref() == extension
            })
            .unwrap_or_else(|| panic!("no location {path} {extension:?}"))
            .settings
    }

    const SITE: &str = "[[site]]\nroot = \"/tmp\"\n";

    #[test]
    fn fastcgi_pass_takes_a_socket_an_address_a_pool_or_an_application() {
        let config = load(&format!(
            "[upstream.php]\nservers = [\"127.0.0.1:9000\"]\n\
             [application.flask]\ncommand = [\"python3\", \"app.py\"]\nsocket = \"/tmp/flask.sock\"\n\
             {SITE}\
             [[site.location]]\nextension = \".php\"\nfastcgi_pass = \"unix:/run/php/php8.2-fpm.sock\"\n\
             [[site.location]]\npath = \"/tcp/\"\nfastcgi_pass = \"localhost:9001\"\n\
             [[site.location]]\npath = \"/again/\"\nfastcgi_pass = \"127.0.0.1:9001\"\n\
             [[site.location]]\npath = \"/http/\"\nproxy_pass = \"http://127.0.0.1:9001\"\n\
             [[site.location]]\npath = \"/shop/\"\nfastcgi_pass = \"PHP\"\nscript = \"/shop/index.php\"\n\
             [[site.location]]\npath = \"/flup/\"\nfastcgi_pass = \"flask\"\n"
        ))
        .unwrap();
        let pools: Vec<(&str, UpstreamProtocol, usize)> = config
            .upstreams
            .iter()
            .map(|pool| (pool.name.as_str(), pool.protocol, pool.keepalive))
            .collect();
        use UpstreamProtocol::{FastCgi, Http};
        // Named pools, then applications, then the implied ones: one per address AND protocol.
        assert_eq!(
            pools,
            [
                ("php", FastCgi, 0),
                ("flask", FastCgi, 0),
                ("unix:/run/php/php8.2-fpm.sock", FastCgi, 0),
                ("127.0.0.1:9001", FastCgi, 0),
                ("127.0.0.1:9001", Http, 32),
            ]
        );
        assert_eq!(
            config.upstreams[1].servers[0].address,
            UpstreamAddress::Unix(PathBuf::from("/tmp/flask.sock"))
        );
        let pool_of = |path: &str, extension: Option<&str>| {
            let settings = location(&config, path, extension);
            assert_eq!(settings.handler.kind(), HandlerKind::FastCgi, "{path}");
            settings.handler.fastcgi().unwrap().pool
        };
        assert_eq!(pool_of("/", Some(".php")), 2);
        assert_eq!(pool_of("/tcp/", None), 3);
        assert_eq!(pool_of("/again/", None), 3, "one pool per address");
        assert_eq!(pool_of("/shop/", None), 0, "names without case");
        assert_eq!(pool_of("/flup/", None), 1);
        assert_eq!(
            location(&config, "/http/", None)
                .handler
                .proxy()
                .unwrap()
                .pool,
            4
        );
        let php = location(&config, "/", Some(".php"));
        assert_eq!(
            php.handler.fastcgi(),
            Some(&FastCgiSettings {
                pool: 2,
                x_accel_redirect: true,
                x_sendfile_root: None,
                check_script: None,
            })
        );
        assert!(php.handler.cgi().is_none() && php.handler.proxy().is_none());
        assert_eq!(
            location(&config, "/shop/", None).script.script.as_deref(),
            Some("/shop/index.php")
        );
        // The extension location does not stand for the site's "/": that one is still added.
        assert_eq!(location(&config, "/", None).handler, Handler::Static);
    }

    #[test]
    fn a_fastcgi_pool_keeps_the_keepalive_it_sets() {
        let config = load(&format!(
            "[upstream.php]\nservers = [\"127.0.0.1:9000\"]\nkeepalive = 4\n\
             health_check = {{ interval = \"1s\" }}\n\
             {SITE}fastcgi_pass = \"php\"\n"
        ))
        .unwrap();
        assert_eq!(config.upstreams[0].keepalive, 4);
        assert_eq!(config.upstreams[0].protocol, UpstreamProtocol::FastCgi);
        let check = config.upstreams[0].active.as_ref().unwrap();
        assert_eq!(check.interval, Duration::from_secs(1));
        assert_eq!(check.path, "", "a FastCGI check has no path");
    }

    #[test]
    fn gateway_keys_are_inherited_from_the_site() {
        let config = load(&format!(
            "{SITE}fastcgi_pass = \"127.0.0.1:9000\"\nparams = {{ APP_ENV = \"prod\" }}\n\
             x_accel_redirect = false\nx_sendfile_root = \"/tmp\"\ncgi_timeout = \"5s\"\n\
             fallback = \"/index.php\"\n\
             [[site.location]]\nextension = \".php\"\n\
             [[site.location]]\npath = \"/own/\"\nparams = {{ OTHER = \"1\" }}\nx_accel_redirect = true\n\
             [[site.location]]\npath = \"/cgi-bin/\"\nhandler = \"cgi\"\n\
             [[site.location]]\npath = \"/cgi-fast/\"\nhandler = \"cgi\"\ncgi_timeout = 1\n\
             [[site.location]]\npath = \"/app/\"\nhandler = \"static\"\n"
        ))
        .unwrap();
        let php = location(&config, "/", Some(".php"));
        assert_eq!(php.handler.kind(), HandlerKind::FastCgi);
        assert_eq!(php.script.extension.as_deref(), Some(".php"));
        assert_eq!(
            php.script.params,
            [("APP_ENV".to_owned(), "prod".to_owned())]
        );
        let fastcgi = php.handler.fastcgi().unwrap();
        assert!(!fastcgi.x_accel_redirect);
        assert_eq!(fastcgi.x_sendfile_root, Some(PathBuf::from("/tmp")));
        let own = location(&config, "/own/", None);
        assert_eq!(own.script.params, [("OTHER".to_owned(), "1".to_owned())]);
        assert!(own.handler.fastcgi().unwrap().x_accel_redirect);
        assert_eq!(own.script.extension, None, "extension is never inherited");
        let cgi = location(&config, "/cgi-bin/", None);
        assert_eq!(cgi.handler.kind(), HandlerKind::Cgi);
        assert_eq!(
            cgi.handler.cgi(),
            Some(&CgiSettings {
                timeout: Duration::from_secs(5),
                x_accel_redirect: false,
                x_sendfile_root: Some(PathBuf::from("/tmp")),
            })
        );
        assert!(cgi.handler.fastcgi().is_none());
        assert_eq!(cgi.static_files.root, PathBuf::from("/tmp"));
        let fast = location(&config, "/cgi-fast/", None);
        assert_eq!(fast.handler.cgi().unwrap().timeout, Duration::from_secs(1));
        let app = location(&config, "/app/", None);
        assert_eq!(
            app.try_files,
            Some(crate::config::TryFiles::fallback("/index.php".to_owned()))
        );
        assert!(app.handler.fastcgi().is_none());
    }

    #[test]
    fn a_cgi_location_takes_the_defaults() {
        let config = load(&format!(
            "{SITE}[[site.location]]\nextension = \".cgi\"\npath = \"/scripts/\"\nhandler = \"cgi\"\n"
        ))
        .unwrap();
        let cgi = location(&config, "/scripts/", Some(".cgi"));
        assert_eq!(cgi.handler.cgi(), Some(&CgiSettings::default()));
        assert_eq!(cgi.handler.cgi().unwrap().timeout, Duration::from_secs(60));
        assert!(cgi.script.params.is_empty());
        assert_eq!(cgi.try_files, None);
    }

    #[test]
    fn fastcgi_pass_errors() {
        let with = |lines: &str| format!("{SITE}[[site.location]]\npath = \"/a/\"\n{lines}");
        let (line, key, message) = error(&with(
            "handler = \"static\"\nfastcgi_pass = \"127.0.0.1:9000\"\n",
        ));
        assert_eq!((line, key.as_str()), (6, "site.location.fastcgi_pass"));
        assert_eq!(message, "conflicts with handler = \"static\"");
        let (line, key, message) = error(&with(
            "proxy_pass = \"http://127.0.0.1:1\"\nfastcgi_pass = \"127.0.0.1:9000\"\n",
        ));
        assert_eq!((line, key.as_str()), (6, "site.location.fastcgi_pass"));
        assert_eq!(message, "conflicts with proxy_pass in the same block");
        let (line, _, message) = error(&with(
            "rewrite = \"/b/\"\nfastcgi_pass = \"127.0.0.1:9000\"\n",
        ));
        assert_eq!(line, 6);
        assert_eq!(message, "conflicts with rewrite in the same block");
        let (line, key, message) = error(&with("handler = \"fastcgi\"\n"));
        assert_eq!((line, key.as_str()), (5, "site.location.handler"));
        assert_eq!(message, "handler \"fastcgi\" without fastcgi_pass");
        let (line, key, message) = error(&with("fastcgi_pass = \"php\"\n"));
        assert_eq!((line, key.as_str()), (5, "site.location.fastcgi_pass"));
        assert_eq!(message, "no [upstream.php] or [application.php]");
        let (_, _, message) = error(&with("fastcgi_pass = \"http://127.0.0.1:9000\"\n"));
        assert_eq!(
            message,
            "'http://127.0.0.1:9000' is not a FastCGI address (FastCGI is not reached by URL)"
        );
        // One pool, two protocols.
        let (line, key, message) = error(&format!(
            "[upstream.app]\nservers = [\"127.0.0.1:1\"]\n{SITE}proxy_pass = \"http://app\"\n\
             [[site.location]]\npath = \"/a/\"\nfastcgi_pass = \"app\"\n"
        ));
        assert_eq!((line, key.as_str()), (8, "site.location.fastcgi_pass"));
        assert_eq!(
            message,
            "the pool 'app' is already named by proxy_pass (line 5)"
        );
        let (line, key, message) = error(&format!(
            "[application.flask]\ncommand = [\"app\"]\nsocket = \"/tmp/f.sock\"\n{SITE}\
             [[site.location]]\npath = \"/a/\"\nproxy_pass = \"http://flask\"\n"
        ));
        assert_eq!((line, key.as_str()), (8, "site.location.proxy_pass"));
        assert_eq!(
            message,
            "'flask' is an application (line 1), which speaks FastCGI"
        );
    }

    #[test]
    fn health_checks_follow_the_protocol() {
        let (line, key, message) = error(&format!(
            "[upstream.php]\nservers = [\"127.0.0.1:1\"]\nhealth_check = {{ path = \"/ping\" }}\n{SITE}fastcgi_pass = \"php\"\n"
        ));
        assert_eq!((line, key.as_str()), (3, "upstream.php.health_check.path"));
        assert_eq!(
            message,
            "a FastCGI pool (fastcgi_pass, line 6) is checked without a path"
        );
        let (line, key, message) = error(&format!(
            "[upstream.app]\nservers = [\"127.0.0.1:1\"]\nhealth_check = {{ interval = 1 }}\n{SITE}"
        ));
        assert_eq!((line, key.as_str()), (3, "upstream.app.health_check.path"));
        assert_eq!(message, "an HTTP pool's health check needs a path");
    }

    #[test]
    fn script_keys_errors() {
        let with = |lines: &str| format!("{SITE}[[site.location]]\n{lines}");
        let (line, key, message) = error(&with("extension = \"php\"\nhandler = \"cgi\"\n"));
        assert_eq!((line, key.as_str()), (4, "site.location.extension"));
        assert_eq!(message, "'php' is not an extension");
        for bad in [".", ".a/b", ". x", ""] {
            let (_, key, _) = error(&with(&format!("extension = \"{bad}\"\n")));
            assert_eq!(key, "site.location.extension", "{bad}");
        }
        let (line, key, message) = error(&with(
            "extension = \".php\"\nscript = \"/index.php\"\nfastcgi_pass = \"127.0.0.1:9000\"\n",
        ));
        assert_eq!((line, key.as_str()), (5, "site.location.script"));
        assert_eq!(message, "conflicts with extension in the same location");
        let (line, key, _) = error(&with(
            "extension = \".php\"\nexact = true\nhandler = \"cgi\"\n",
        ));
        assert_eq!((line, key.as_str()), (5, "site.location.exact"));
        let (line, key, message) = error(&with(
            "path = \"/a/\"\nhandler = \"cgi\"\nparams = { \"A B\" = \"x\" }\n",
        ));
        assert_eq!((line, key.as_str()), (6, "site.location.params"));
        assert_eq!(message, "'A B' is not a meta-variable name");
        let (line, key, message) = error(&with("path = \"/a/\"\nfallback = \"index.php\"\n"));
        assert_eq!((line, key.as_str()), (5, "site.location.fallback"));
        assert_eq!(message, "'index.php' does not start with '/'");
        let (line, key, _) = error(&with(
            "path = \"/a/\"\nhandler = \"cgi\"\nscript = \"run.cgi\"\n",
        ));
        assert_eq!((line, key.as_str()), (6, "site.location.script"));
        let zero = load(&with(
            "path = \"/a/\"\nhandler = \"cgi\"\ncgi_timeout = 0\n",
        ))
        .unwrap_err();
        assert_eq!(
            (zero.line, zero.key.as_str()),
            (6, "site.location.cgi_timeout")
        );
        let (line, key, _) = error("[[site]]\nroot = \"/tmp\"\nextension = \".php\"\n");
        assert_eq!((line, key.as_str()), (3, "site.extension"));
        // Two extension locations of one extension and path: the second would never be reached.
        let (line, key, message) = error(&with(
            "extension = \".cgi\"\nhandler = \"cgi\"\n[[site.location]]\nextension = \".cgi\"\nhandler = \"cgi\"\n",
        ));
        assert_eq!((line, key.as_str()), (7, "site.location.extension"));
        assert_eq!(message, "'/' is already a location of this site (line 4)");
        // The same extension below different paths, and another extension: different locations.
        load(&with(
            "extension = \".cgi\"\nhandler = \"cgi\"\n[[site.location]]\nextension = \".cgi\"\npath = \"/x/\"\nhandler = \"cgi\"\n[[site.location]]\nextension = \".pl\"\nhandler = \"cgi\"\n",
        ))
        .unwrap();
    }

    #[test]
    fn keys_where_no_location_uses_them_are_refused() {
        let with = |lines: &str| format!("{SITE}[[site.location]]\npath = \"/a/\"\n{lines}");
        for (lines, key, message) in [
            (
                "cgi_timeout = \"5s\"\n",
                "cgi_timeout",
                "only for a CGI location (handler = \"cgi\")",
            ),
            (
                "fastcgi_pass = \"127.0.0.1:9000\"\ncgi_timeout = \"5s\"\n",
                "cgi_timeout",
                "only for a CGI location (handler = \"cgi\")",
            ),
            (
                "script = \"/x.php\"\n",
                "script",
                "only for a CGI or FastCGI location",
            ),
            (
                "params = { A = \"1\" }\n",
                "params",
                "only for a CGI or FastCGI location",
            ),
            (
                "handler = \"cgi\"\nfallback = \"/index.php\"\n",
                "fallback",
                "only for a static location: it names what a request finds no file for",
            ),
            (
                "x_accel_redirect = false\n",
                "x_accel_redirect",
                "only for a proxy, FastCGI or CGI location",
            ),
            (
                "handler = \"cgi\"\nfastcgi_check_script = false\n",
                "fastcgi_check_script",
                "only for a FastCGI location (fastcgi_pass)",
            ),
        ] {
            let (_, found, found_message) = error(&with(lines));
            assert_eq!(found, format!("site.location.{key}"), "{lines}");
            assert_eq!(found_message, message, "{lines}");
        }
        // In a site: refused only when none of its locations reads the key.
        let (line, key, _) = error(&format!("{SITE}cgi_timeout = 3\n"));
        assert_eq!((line, key.as_str()), (3, "site.cgi_timeout"));
        load(&format!(
            "{SITE}cgi_timeout = 3\n[[site.location]]\npath = \"/cgi-bin/\"\nhandler = \"cgi\"\n"
        ))
        .unwrap();
        // x_accel_redirect and x_sendfile_root are read by CGI and FastCGI locations too.
        load(&with(
            "handler = \"cgi\"\nx_accel_redirect = false\nx_sendfile_root = \"/tmp\"\n",
        ))
        .unwrap();
    }

    /// `fastcgi_check_script` is a FastCGI location's (inherited from its site); unset, the
    /// pool's servers decide (`site::Sites::build`), except that with no root there are no
    /// files to check.
    #[test]
    fn fastcgi_check_script_is_read_and_inherited() {
        let config = load(&format!(
            "{SITE}fastcgi_pass = \"127.0.0.1:9000\"\nfastcgi_check_script = false\n\
             [[site.location]]\nextension = \".php\"\n\
             [[site.location]]\npath = \"/own/\"\nextension = \".php\"\nfastcgi_check_script = true\n"
        ))
        .unwrap();
        let check = |path: &str| {
            location(&config, path, Some(".php"))
                .handler
                .fastcgi()
                .unwrap()
                .check_script
        };
        assert_eq!(check("/"), Some(false));
        assert_eq!(check("/own/"), Some(true));
        let config = load(
            "[[site]]\nhandler = \"health\"\n[[site.location]]\nextension = \".php\"\n\
             fastcgi_pass = \"unix:/run/php.sock\"\n",
        )
        .unwrap();
        let php = location(&config, "/", Some(".php"));
        assert_eq!(
            php.handler.fastcgi().unwrap().check_script,
            Some(false),
            "no root"
        );
    }

    #[test]
    fn a_cgi_location_needs_a_root() {
        let (line, key, message) = error(
            "[[site]]\nhandler = \"health\"\n[[site.location]]\npath = \"/cgi-bin/\"\nhandler = \"cgi\"\n",
        );
        assert_eq!((line, key.as_str()), (4, "site.location.root"));
        assert_eq!(message, "no root for this CGI location's scripts");
    }
}
