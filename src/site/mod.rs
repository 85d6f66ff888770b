//! Virtual hosts and locations: from a request's `Host` and clean path to the `Route` that
//! answers it, and the generation of settings a request is served under.
//!
//! Owns: `Generation` (one loaded configuration: the typed `Config` plus what is built from
//! it: opened document roots, pre-rendered headers (a location's, its site's HSTS), the HTTPS
//! redirect's port, access checks) and
//! `Sites::route` (site by `Host`: exact name, then the longest `*.suffix`, then the default;
//! location by path: an exact location, then the first `extension` or `regex` location in file
//! order that matches (`script.rs`, `Route::matches_pattern`), then the longest prefix).
//! Must not touch: sockets, threads. Building a generation opens the document roots (it runs
//! at start-up and on reload, never on a loop).
//! Sources: Abyss §3 (per-server sections); nginx `server_name` and `location` matching.

pub mod access;
pub mod rate;
pub mod script;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::sync::Arc;

use crate::config::header_rules::HeaderRules;
use crate::config::{
    ClientCertificates, Config, Handler, HostName, Hsts, LocationSettings, StaticOptions,
    UpstreamAddress,
};
use crate::content::resolve::DocRoot;
use crate::programs::cgi::Launcher;
use crate::tls::{TlsContext, TlsError, TlsInfo};
use crate::upstream::Upstreams;
use access::Access;
pub use script::ScriptSplit;

/// One loaded configuration. Requests take the newest at the time their head is parsed; a
/// request already routed keeps the one it started with (through its `Arc<Route>`).
#[derive(Debug)]
pub struct Generation {
    /// Counts reloads: 1 at start-up.
    pub number: u64,
    pub config: Config,
    pub sites: Sites,
    /// The proxy's pools and what they know of their servers.
    pub upstreams: Upstreams,
    /// Starts CGI scripts: one per process, whatever the generation (`Launcher::process`).
    pub launcher: Launcher,
    /// The TLS configurations (`None`: no TLS listener).
    pub tls: Option<Arc<TlsContext>>,
    /// What deserves a word though it is no error (`config::warnings`, certificates outside
    /// their dates): `ampd check` prints them, start-up and reload log them.
    pub warnings: Vec<String>,
}

/// Building a generation failed: a document root cannot be opened, or a certificate used.
#[derive(Debug)]
pub enum BuildError {
    Root {
        root: std::path::PathBuf,
        error: io::Error,
    },
    /// A certificate, key or CA file (named in it) cannot be used.
    Tls(TlsError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Root { root, error } => write!(
                formatter,
                "document root {}: {}",
                root.display(),
                crate::config::plain(error)
            ),
            BuildError::Tls(error) => write!(formatter, "tls: {error}"),
        }
    }
}

impl std::error::Error for BuildError {}

impl Generation {
    /// # Errors
    /// A static location's root cannot be opened as a directory.
    pub fn build(config: Config, number: u64) -> Result<Generation, BuildError> {
        let sites = Sites::build(&config)?;
        let upstreams = Upstreams::new(&config.upstreams);
        let launcher = Launcher::process(&config.cgi);
        let tls = TlsContext::build(&config).map_err(BuildError::Tls)?;
        let mut warnings = crate::config::warnings(&config);
        if let Some(tls) = &tls {
            warnings.extend_from_slice(tls.warnings());
        }
        Ok(Generation {
            number,
            config,
            sites,
            upstreams,
            launcher,
            tls,
            warnings,
        })
    }
}

/// Where a location's requests go, with everything the request path needs pre-built.
#[derive(Debug)]
pub struct Route {
    /// `/` for a regex location.
    pub path: String,
    pub exact: bool,
    /// A regex location's pattern (`config::Location::regex`).
    pub regex: Option<regex::Regex>,
    pub settings: LocationSettings,
    /// The opened root (or alias directory) of a static location.
    pub root: Option<Arc<DocRoot>>,
    /// A FastCGI extension location's root (or alias directory), opened when scripts are
    /// checked (`fastcgi_check_script`): a request's script is looked up below it through the
    /// path cache before the application hears of it.
    pub script_root: Option<Arc<DocRoot>>,
    /// `headers` rendered as `Name: value\r\n` lines, once.
    pub extra_headers: Box<[u8]>,
    /// `headers_remove` and `headers_set`; `None` when the location has neither, so its
    /// responses keep the header cache's fast path.
    pub header_rules: Option<Arc<HeaderRules>>,
    /// The site's `Strict-Transport-Security: ...\r\n` (RFC 6797), rendered once; empty when
    /// the site has no `hsts`. Written over TLS only (§7.2).
    pub strict_transport_security: Box<[u8]>,
    /// The site sends requests that come over a plain listener to HTTPS (`redirect_https`).
    pub https_redirect: Option<HttpsRedirect>,
    pub access: Access,
}

/// A request path's location (`Sites::find`).
#[derive(Clone, Copy, Debug)]
pub struct Found<'a> {
    pub route: &'a Arc<Route>,
    /// The path is this location's without its trailing '/': the request is redirected to
    /// the path with it rather than answered.
    pub add_slash: bool,
}

impl<'a> Found<'a> {
    fn at(route: &'a Arc<Route>) -> Found<'a> {
        Found {
            route,
            add_slash: false,
        }
    }
}

/// Where a `redirect_https` site sends plain-HTTP requests: `https://HOST[:port]/target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpsRedirect {
    /// The first TLS listener's port (`None`: 443, left out of the URL).
    pub port: Option<u16>,
    /// The host for a request that names none (HTTP/1.0 without `Host`): the site's first
    /// exact name, as nginx's `$host` falls back to `server_name`.
    pub server_name: Option<String>,
}

impl HttpsRedirect {
    fn of(config: &Config, site: &crate::config::Site) -> Option<HttpsRedirect> {
        if !site.tls.redirect_https {
            return None;
        }
        let port = config
            .listen
            .iter()
            .find(|listen| listen.tls)
            .map_or(443, |listen| listen.address.port());
        let server_name = site.names.iter().find_map(|name| match name {
            HostName::Exact(name) => Some(name.clone()),
            HostName::Suffix(_) => None,
        });
        Some(HttpsRedirect {
            port: (port != 443).then_some(port),
            server_name,
        })
    }
}

/// `Strict-Transport-Security: max-age=N[; includeSubDomains][; preload]\r\n` (RFC 6797
/// §6.1; `preload` is the hstspreload.org list's token).
fn strict_transport_security(hsts: Option<&Hsts>) -> Box<[u8]> {
    let Some(hsts) = hsts else {
        return Box::default();
    };
    let mut line = format!(
        "Strict-Transport-Security: max-age={}",
        hsts.max_age.as_secs()
    );
    if hsts.include_subdomains {
        line.push_str("; includeSubDomains");
    }
    if hsts.preload {
        line.push_str("; preload");
    }
    line.push_str("\r\n");
    line.into_bytes().into_boxed_slice()
}

impl Route {
    /// The part of `path` after this location's prefix (for `alias` and `{rest}`).
    #[must_use]
    pub fn rest<'p>(&self, path: &'p str) -> &'p str {
        path.get(self.path.len()..).unwrap_or("")
    }

    /// Whether `path` is this pattern location's: its `extension` or its `regex` matches.
    fn matches_pattern(&self, path: &str) -> bool {
        match &self.regex {
            Some(regex) => regex.is_match(path),
            None => self.matches_extension(path),
        }
    }

    /// A regex location's groups as matched in `path` (the path it was routed by), for the
    /// templates of its `rewrite`, `redirect`, `return` and `try_files`; `None` for another
    /// location. Matched again rather than kept from routing: only these phases need them,
    /// and the match is linear in the path.
    #[must_use]
    pub fn captures<'p>(&self, path: &'p str) -> Option<regex::Captures<'p>> {
        self.regex.as_ref()?.captures(path)
    }
}

#[derive(Debug)]
struct SiteRoutes {
    exact: HashMap<String, Arc<Route>>,
    /// The locations (exact or prefix) whose path ends in '/', by that path without it: a
    /// request for `/api` is sent to the location `/api/` (`Found::add_slash`).
    with_slash: HashMap<String, Arc<Route>>,
    /// `extension` and `regex` locations, in file order (nginx tries its regex locations so).
    patterns: Vec<Arc<Route>>,
    /// Longest prefix first.
    prefixes: Vec<Arc<Route>>,
    /// Whether the site asks TLS clients for certificates (its handshake policy,
    /// `tls::context`), and requires one.
    client_certificates: CertificatePolicy,
}

#[derive(Debug)]
pub struct Sites {
    sites: Vec<SiteRoutes>,
    names: HashMap<String, usize>,
    /// `(".example.com", site)`, longest suffix first.
    suffixes: Vec<(String, usize)>,
    default: usize,
}

impl Sites {
    /// # Errors
    /// A static location's root cannot be opened.
    pub fn build(config: &Config) -> Result<Sites, BuildError> {
        let mut sites = Vec::new();
        let mut names = HashMap::new();
        let mut suffixes = Vec::new();
        let mut default = 0;
        // Each static location opens its own `DocRoot`, with a process-unique id: path-cache
        // entries are keyed by (root id, path), so two locations (or two generations) never
        // share a translation made under different options.
        for (index, site) in config.sites.iter().enumerate() {
            if site.default && !config.sites[..index].iter().any(|site| site.default) {
                default = index;
            }
            for name in &site.names {
                match name {
                    HostName::Exact(name) => {
                        names.entry(name.clone()).or_insert(index);
                    }
                    HostName::Suffix(suffix) => suffixes.push((suffix.clone(), index)),
                }
            }
            let strict_transport_security = strict_transport_security(site.tls.hsts.as_ref());
            let https_redirect = HttpsRedirect::of(config, site);
            let mut routes = SiteRoutes {
                exact: HashMap::new(),
                with_slash: HashMap::new(),
                patterns: Vec::new(),
                prefixes: Vec::new(),
                client_certificates: match site.tls.client_certificates {
                    ClientCertificates::Off => CertificatePolicy::Off,
                    ClientCertificates::Optional { .. } => CertificatePolicy::Optional,
                    ClientCertificates::Required { .. } => CertificatePolicy::Required,
                },
            };
            // Index files a script location of this site runs are routed there, never sent.
            let script_indexes: Vec<String> = site
                .locations
                .iter()
                .filter_map(|location| location.settings.script.extension.clone())
                .collect();
            for location in &site.locations {
                let root = match location.settings.handler {
                    Handler::Static
                        if location.settings.redirect.is_none()
                            && location.settings.rewrite.is_none()
                            && location.settings.answer.is_none() =>
                    {
                        let mut options = location.settings.static_files.clone();
                        options.script_indexes.clone_from(&script_indexes);
                        options.routed_indexes = claimed_indexes(location, &site.locations);
                        let path = options.root.clone();
                        Some(Arc::new(
                            DocRoot::open(options)
                                .map_err(|error| BuildError::Root { root: path, error })?,
                        ))
                    }
                    // The directory an upstream or a program may name in `X-Sendfile` is
                    // served as a root of its own, with the same confinement as any document
                    // root.
                    Handler::Proxy(_) | Handler::FastCgi(_) | Handler::Cgi(_) => {
                        match location.settings.handler.handback().1 {
                            Some(directory) => {
                                let options = StaticOptions {
                                    index: Vec::new(),
                                    precompressed: false,
                                    ..StaticOptions::new(directory.clone())
                                };
                                Some(Arc::new(DocRoot::open(options).map_err(|error| {
                                    BuildError::Root {
                                        root: directory.clone(),
                                        error,
                                    }
                                })?))
                            }
                            None => None,
                        }
                    }
                    _ => None,
                };
                let script_root = if checks_scripts(config, &location.settings) {
                    let directory = location.settings.static_files.root.clone();
                    Some(Arc::new(
                        DocRoot::open(script_options(directory.clone())).map_err(|error| {
                            BuildError::Root {
                                root: directory,
                                error,
                            }
                        })?,
                    ))
                } else {
                    None
                };
                let mut extra_headers = Vec::new();
                for (name, value) in &location.settings.headers {
                    extra_headers.extend_from_slice(name.as_bytes());
                    extra_headers.extend_from_slice(b": ");
                    extra_headers.extend_from_slice(value.as_bytes());
                    extra_headers.extend_from_slice(b"\r\n");
                }
                let route = Arc::new(Route {
                    path: location.path.clone(),
                    exact: location.exact,
                    regex: location.regex.clone(),
                    access: Access::new(&location.settings.access),
                    settings: location.settings.clone(),
                    root,
                    script_root,
                    extra_headers: extra_headers.into_boxed_slice(),
                    header_rules: (!location.settings.header_rules.is_empty())
                        .then(|| Arc::new(location.settings.header_rules.clone())),
                    strict_transport_security: strict_transport_security.clone(),
                    https_redirect: https_redirect.clone(),
                });
                let pattern =
                    location.settings.script.extension.is_some() || location.regex.is_some();
                if let Some(without) = location.path.strip_suffix('/') {
                    if !without.is_empty() && !pattern {
                        routes
                            .with_slash
                            .entry(without.to_owned())
                            // An exact location for the same path is asked for first.
                            .and_modify(|found| {
                                if location.exact {
                                    *found = route.clone();
                                }
                            })
                            .or_insert_with(|| route.clone());
                    }
                }
                if location.exact {
                    routes.exact.insert(location.path.clone(), route);
                } else if pattern {
                    routes.patterns.push(route);
                } else {
                    routes.prefixes.push(route);
                }
            }
            routes
                .prefixes
                .sort_by_key(|route| std::cmp::Reverse(route.path.len()));
            sites.push(routes);
        }
        suffixes.sort_by_key(|(suffix, _)| std::cmp::Reverse(suffix.len()));
        Ok(Sites {
            sites,
            names,
            suffixes,
            default,
        })
    }

    /// The route for a request: site by `Host` (port and case ignored), location by path.
    #[must_use]
    pub fn route(&self, host: Option<&[u8]>, path: &str) -> &Arc<Route> {
        self.find(host, path).route
    }

    /// The location of a normalised request path, in this order: an exact location for the
    /// path, or for the path without its trailing '/' (`/secret.txt/` is the same resource as
    /// `/secret.txt`, and a static file answers it `404`: one resource, one set of rules); the
    /// first extension or regex location that matches; a location whose path is this one with a '/'
    /// added (`add_slash`: the request is sent there, nginx's answer for `/api` with a
    /// `location /api/`); the longest prefix.
    #[must_use]
    pub fn find(&self, host: Option<&[u8]>, path: &str) -> Found<'_> {
        let site = &self.sites[self.site_for(host)];
        let without_slash = path.strip_suffix('/').filter(|without| !without.is_empty());
        let exact = site
            .exact
            .get(path)
            .or_else(|| site.exact.get(without_slash?));
        if let Some(route) = exact {
            return Found::at(route);
        }
        if let Some(route) = site
            .patterns
            .iter()
            .find(|route| route.matches_pattern(path))
        {
            return Found::at(route);
        }
        if without_slash.is_none() && !site.with_slash.is_empty() && path != "/" {
            if let Some(route) = site.with_slash.get(path) {
                return Found {
                    route,
                    add_slash: true,
                };
            }
        }
        let route = site
            .prefixes
            .iter()
            .find(|route| path.starts_with(route.path.as_str()))
            .unwrap_or_else(|| {
                // Every site has a "/" prefix location (config::load adds one).
                site.prefixes.last().expect("every site has a / location")
            });
        Found::at(route)
    }

    /// Whether a request naming `host` may be answered on a connection whose handshake
    /// settled `tls` (`None`: plain HTTP or h2c). A site that asks for client certificates
    /// answers only connections whose handshake was made for it (its SNI chose the same site),
    /// else the check could be stepped around by naming one site in the handshake and another
    /// in the request; one that requires them answers only connections that presented a
    /// verified one. Every listener reaches every site, so this is the check that holds on
    /// all of them, for HTTP/1 and HTTP/2 alike.
    #[must_use]
    pub fn client_certificate_check(
        &self,
        host: Option<&[u8]>,
        tls: Option<&TlsInfo>,
    ) -> CertificateCheck {
        let requested = self.site_for(host);
        let policy = self.sites[requested].client_certificates;
        if policy == CertificatePolicy::Off {
            return CertificateCheck::Pass;
        }
        match tls {
            Some(tls)
                if self.site_for(tls.server_name.as_deref().map(str::as_bytes)) != requested =>
            {
                CertificateCheck::Misdirected
            }
            // rustls refuses a handshake without one; checked again all the same.
            Some(tls) if policy == CertificatePolicy::Required && tls.client.is_none() => {
                CertificateCheck::Forbidden
            }
            Some(_) => CertificateCheck::Pass,
            None if policy == CertificatePolicy::Required => CertificateCheck::Forbidden,
            // "optional" lets in a client without one; plain HTTP is such a client.
            None => CertificateCheck::Pass,
        }
    }

    fn site_for(&self, host: Option<&[u8]>) -> usize {
        if self.sites.len() == 1 {
            return 0;
        }
        let Some(host) = host.and_then(|host| std::str::from_utf8(host).ok()) else {
            return self.default;
        };
        let name = strip_port(host.trim());
        let mut lower = [0u8; 255];
        if name.len() > lower.len() {
            return self.default;
        }
        for (target, byte) in lower.iter_mut().zip(name.bytes()) {
            *target = byte.to_ascii_lowercase();
        }
        let name = std::str::from_utf8(&lower[..name.len()]).unwrap_or("");
        let name = name.strip_suffix('.').unwrap_or(name);
        if let Some(index) = self.names.get(name) {
            return *index;
        }
        self.suffixes
            .iter()
            .find(|(suffix, _)| name.ends_with(suffix.as_str()))
            .map_or(self.default, |(_, index)| *index)
    }
}

/// Whether a FastCGI location checks that a request's script exists before passing it on:
/// only where the request path names the script (an `extension` location; a front
/// controller's `script` is the configuration's, a mounted application's path names no file),
/// as `fastcgi_check_script` says, by default where every server of its pool sees ampd's
/// files: a unix socket or a loopback address (a server elsewhere may have other files at the
/// same paths).
fn checks_scripts(config: &Config, settings: &LocationSettings) -> bool {
    let Handler::FastCgi(fastcgi) = &settings.handler else {
        return false;
    };
    settings.script.extension.is_some()
        && fastcgi.check_script.unwrap_or_else(|| {
            config.upstreams.get(fastcgi.pool).is_some_and(|pool| {
                pool.servers.iter().all(|server| match &server.address {
                    UpstreamAddress::Unix(_) => true,
                    UpstreamAddress::Tcp(address) => address.ip().is_loopback(),
                })
            })
        })
}

/// How scripts are looked up below a FastCGI location's root: as the application will open
/// them, symlinks followed (a deployment's `current -> releases/7` is common) and no index,
/// listing or sibling looked for (the path names one file).
fn script_options(root: std::path::PathBuf) -> StaticOptions {
    StaticOptions {
        index: Vec::new(),
        dotfiles: true,
        follow_symlinks: true,
        precompressed: false,
        ..StaticOptions::new(root)
    }
}

/// The index files of static `location` that, appended to a directory path it answers, could
/// be answered by another location: every one for an exact location (it answers the
/// directory alone), else those that a longer location below it names (an exact one by its
/// last segment, a prefix one by a last segment the name begins with: `/docs/index.html`,
/// `/docs/ind`), and every one where the site has a regex location (a pattern may match any
/// such path: the index is routed as a path of its own rather than guessed). Extension
/// locations are `script_indexes`' business.
fn claimed_indexes(
    location: &crate::config::Location,
    all: &[crate::config::Location],
) -> Vec<String> {
    let claims = |other: &crate::config::Location, index: &str| {
        if other.regex.is_some() {
            return !std::ptr::eq(other, location);
        }
        if other.settings.script.extension.is_some()
            || other.path.len() <= location.path.len()
            || !other.path.starts_with(location.path.as_str())
        {
            return false;
        }
        let last = other.path.rsplit('/').next().unwrap_or("");
        if other.exact {
            last == index
        } else {
            !last.is_empty() && index.starts_with(last)
        }
    };
    location
        .settings
        .static_files
        .index
        .iter()
        .filter(|index| location.exact || all.iter().any(|other| claims(other, index)))
        .cloned()
        .collect()
}

/// A site's client-certificate policy, as the request path needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CertificatePolicy {
    Off,
    Optional,
    Required,
}

/// What `Sites::client_certificate_check` decided about a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertificateCheck {
    Pass,
    /// `421 Misdirected Request` (RFC 9110 §15.5.20): the connection's handshake was made for
    /// another site; a new connection naming this one gets its check.
    Misdirected,
    /// `403`: no verified client certificate on this connection.
    Forbidden,
}

/// `example.com:8080` → `example.com`; `[::1]:80` → `[::1]`.
#[must_use]
pub fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rfind(':') {
        Some(at) if host[at + 1..].bytes().all(|byte| byte.is_ascii_digit()) => &host[..at],
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HandlerKind, Location, Site};

    fn location(path: &str, exact: bool, root: &std::path::Path) -> Location {
        Location {
            path: path.to_owned(),
            exact,
            regex: None,
            settings: LocationSettings::new(root.to_path_buf()),
        }
    }

    #[test]
    fn hosts_and_paths_pick_the_most_specific() {
        let dir = std::env::temp_dir();
        let mut config = Config::new(dir.clone());
        config.sites = vec![
            Site {
                names: vec![HostName::Exact("a.test".into())],
                default: false,
                locations: vec![
                    location("/", false, &dir),
                    location("/static/", false, &dir),
                    location("/static/img/", false, &dir),
                    location("/x", true, &dir),
                ],
                tls: crate::config::SiteTls::default(),
            },
            Site {
                names: vec![HostName::Suffix(".b.test".into())],
                default: true,
                locations: vec![location("/", false, &dir)],
                tls: crate::config::SiteTls::default(),
            },
        ];
        let sites = Sites::build(&config).unwrap();
        let route = |host: &str, path: &str| sites.route(Some(host.as_bytes()), path).path.clone();
        assert_eq!(route("a.test", "/static/img/1.png"), "/static/img/");
        assert_eq!(route("A.TEST:8080", "/static/x"), "/static/");
        assert_eq!(route("a.test", "/x"), "/x");
        assert_eq!(route("a.test", "/x/"), "/x", "the same resource as /x");
        assert_eq!(route("a.test", "/xy"), "/");
        assert_eq!(route("a.test", "/xy/"), "/");
        let find = |path: &str| {
            let found = sites.find(Some(b"a.test"), path);
            (found.route.path.clone(), found.add_slash)
        };
        assert_eq!(find("/static"), ("/static/".to_owned(), true));
        assert_eq!(find("/static/img"), ("/static/img/".to_owned(), true));
        assert_eq!(find("/static/im"), ("/static/".to_owned(), false));
        assert_eq!(
            find("/x"),
            ("/x".to_owned(), false),
            "an exact location first"
        );
        assert_eq!(find("/"), ("/".to_owned(), false));
        assert_eq!(sites.site_for(Some(b"www.b.test")), 1);
        assert_eq!(sites.site_for(Some(b"other")), 1);
        assert_eq!(sites.site_for(None), 1);
        assert_eq!(strip_port("[::1]:80"), "[::1]");
    }

    /// A location of `handler` matching `extension` below `path`.
    fn extension(
        path: &str,
        extension: &str,
        handler: HandlerKind,
        root: &std::path::Path,
    ) -> Location {
        let mut location = location(path, false, root);
        location.settings.handler = Handler::with_defaults(handler);
        location.settings.script.extension = Some(extension.to_owned());
        location
    }

    #[test]
    fn extension_locations_come_after_exact_ones_and_before_prefixes_in_file_order() {
        let dir = std::env::temp_dir();
        let mut config = Config::new(dir.clone());
        let mut php = extension("/", ".php", HandlerKind::FastCgi, &dir);
        php.settings.static_files.index = vec!["index.php".into(), "index.html".into()];
        config.sites[0].locations = vec![
            location("/", false, &dir),
            location("/static/", false, &dir),
            location("/static/exact.php", true, &dir),
            extension("/cgi/", ".php", HandlerKind::Cgi, &dir),
            php,
            extension("/", ".cgi", HandlerKind::Cgi, &dir),
        ];
        let sites = Sites::build(&config).unwrap();
        let route = |path: &str| {
            let route = sites.route(None, path);
            let extension = route.settings.script.extension.clone();
            (route.path.clone(), extension.unwrap_or_default())
        };
        let at = |path: &str, extension: &str| (path.to_owned(), extension.to_owned());
        assert_eq!(route("/index.php"), at("/", ".php"));
        assert_eq!(
            route("/a/index.php/x/y"),
            at("/", ".php"),
            "a segment ends with it"
        );
        assert_eq!(
            route("/static/a.php"),
            at("/", ".php"),
            "before a longer prefix"
        );
        assert_eq!(
            route("/static/exact.php"),
            at("/static/exact.php", ""),
            "exact first"
        );
        assert_eq!(route("/cgi/run.php"), at("/cgi/", ".php"), "in file order");
        assert_eq!(route("/cgi-bin/run.cgi/more"), at("/", ".cgi"));
        assert_eq!(
            route("/static/a.phpx"),
            at("/static/", ""),
            "the segment must end with it"
        );
        assert_eq!(
            route("/static/.php"),
            at("/static/", ""),
            "a name before the extension"
        );
        assert_eq!(
            route("/static/a.PHP"),
            at("/static/", ""),
            "case counts, as on the disk"
        );
        assert_eq!(route("/static/a.html"), at("/static/", ""));
        // A directory goes to the extension location whose first index file has its extension
        // (nginx's index directive, without serving the script's source as a file).
        assert_eq!(route("/docs/"), at("/", ".php"));
        assert_eq!(route("/"), at("/", ".php"));
        assert_eq!(route("/docs"), at("/", ""));
    }

    #[test]
    fn index_files_another_location_names_are_routed_again() {
        let dir = std::env::temp_dir();
        let with_index = |path: &str, exact: bool| {
            let mut location = location(path, exact, &dir);
            location.settings.static_files.index = vec!["index.html".into(), "home.htm".into()];
            location
        };
        let all = vec![
            with_index("/", false),
            with_index("/docs/", false),
            location("/docs/index.html", true, &dir),
            location("/a/b/hom", false, &dir),
            with_index("/exact/", true),
            location("/other/index.htmlx", true, &dir),
            location("/x/", false, &dir),
        ];
        let claimed = |index: usize| claimed_indexes(&all[index], &all);
        assert_eq!(
            claimed(0),
            ["index.html", "home.htm"],
            "below /: both named"
        );
        assert_eq!(claimed(1), ["index.html"], "/docs/index.html is exact");
        assert_eq!(
            claimed(4),
            ["index.html", "home.htm"],
            "an exact location: every one"
        );
        let alone = vec![with_index("/", false), location("/x/", false, &dir)];
        assert!(
            claimed_indexes(&alone[0], &alone).is_empty(),
            "nothing names them"
        );
    }

    #[test]
    fn a_program_s_x_sendfile_root_is_opened_as_a_root() {
        let dir = std::env::temp_dir();
        let mut config = Config::new(dir.clone());
        let mut php = extension("/", ".php", HandlerKind::FastCgi, &dir);
        php.settings.handler = Handler::FastCgi(crate::config::FastCgiSettings {
            pool: 0,
            x_accel_redirect: true,
            x_sendfile_root: Some(dir.clone()),
            check_script: None,
        });
        let mut cgi = location("/cgi-bin/", false, &dir);
        cgi.settings.handler = Handler::Cgi(crate::config::CgiSettings::default());
        config.sites[0].locations.extend([php, cgi]);
        let sites = Sites::build(&config).unwrap();
        assert!(sites.route(None, "/a.php").root.is_some());
        let cgi = sites.route(None, "/cgi-bin/x");
        assert_eq!(cgi.settings.handler.kind(), HandlerKind::Cgi);
        assert!(cgi.root.is_none(), "no x_sendfile_root");
    }
}
