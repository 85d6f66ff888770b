//! Reading `ampd.toml` into the one typed `Config`.
//!
//! Owns: the file's schema (`Raw*` structs, `deny_unknown_fields`), turning text values into
//! typed ones (addresses, durations like `"30s"`, sizes like `"64KiB"`, host patterns, address
//! blocks, password hashes), and errors that name the file, line, column and key — with a hint
//! where one helps (the nearest known key for a typo). Relative paths in the file are taken
//! relative to the file's own directory, so a config and its site can move together.
//! Must not touch: sockets, threads. It reads the file and checks that roots, users and
//! groups exist, so `ampd check` catches what would stop `ampd run`.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

use super::merge::{self, Partial};
use super::{
    AddressRange, Arch, BasicAuth, Config, Handler, HostName, Level, Location, LogFormat, Redirect,
    Site,
};

/// A configuration that cannot be used: where, which key, what is wrong, and maybe a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based; 0 when the error is not at a place in the file (it cannot be read).
    pub line: usize,
    pub column: usize,
    pub key: String,
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(formatter, "{}: {}", self.file.display(), self.message)?;
        } else {
            write!(
                formatter,
                "{}:{}:{}: {}: {}",
                self.file.display(),
                self.line,
                self.column,
                self.key,
                self.message
            )?;
        }
        if let Some(hint) = &self.hint {
            write!(formatter, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// Read and check `path`.
///
/// # Errors
/// The file cannot be read, is not TOML, has unknown keys, wrong types, bad values or
/// conflicting settings, or names a root, user or group that does not exist.
pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError {
        file: path.to_path_buf(),
        line: 0,
        column: 0,
        key: String::new(),
        message: format!("cannot read: {}", plain(&error)),
        hint: None,
    })?;
    load_str(&text, path)
}

/// What `ampd check FILE` runs: the same as `load_file`.
///
/// # Errors
/// As `load_file`.
pub fn check_file(path: &Path) -> Result<Config, ConfigError> {
    load_file(path)
}

/// Parse `text` as if read from `file`.
///
/// # Errors
/// As `load_file`.
pub fn load_str(text: &str, file: &Path) -> Result<Config, ConfigError> {
    let loader = Loader {
        file,
        text,
        base: file
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    };
    let raw: RawFile = toml::from_str(text).map_err(|error| loader.toml_error(&error))?;
    loader.build(raw)
}

/// A number (`65536`, `30`) or a text with a unit (`"64KiB"`, `"30s"`).
#[derive(Clone, Debug)]
enum Quantity {
    Number(i64),
    Text(String),
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct QuantityVisitor;
        impl Visitor<'_> for QuantityVisitor {
            type Value = Quantity;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a number or a string with a unit")
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Quantity, E> {
                Ok(Quantity::Number(value))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Quantity, E> {
                Ok(Quantity::Number(i64::try_from(value).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Quantity, E> {
                Ok(Quantity::Text(value.to_owned()))
            }
        }
        deserializer.deserialize_any(QuantityVisitor)
    }
}

type Field<T> = Option<Spanned<T>>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    listen: Field<String>,
    arch: Field<String>,
    threads: Field<i64>,
    helpers: Field<i64>,
    user: Field<String>,
    group: Field<String>,
    pid_file: Field<String>,
    grace_period: Field<Quantity>,
    caches: Option<RawCaches>,
    send: Option<RawSend>,
    limits: Option<RawLimits>,
    admission: Option<RawAdmission>,
    log: Option<RawLog>,
    site: Option<Vec<RawBlock>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawCaches {
    path_cache: Option<bool>,
    header_cache: Option<bool>,
    file_cache: Option<bool>,
    path_cache_entries: Field<i64>,
    header_cache_entries: Field<i64>,
    file_cache_bytes: Field<Quantity>,
    revalidate_after: Field<Quantity>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSend {
    sendfile_threshold: Field<Quantity>,
    send_chunk: Field<Quantity>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_request_line: Field<Quantity>,
    max_head_bytes: Field<Quantity>,
    max_headers: Field<i64>,
    max_body: Field<Quantity>,
    max_ranges: Field<i64>,
    max_requests_per_connection: Field<i64>,
    header_timeout: Field<Quantity>,
    body_timeout: Field<Quantity>,
    keepalive_timeout: Field<Quantity>,
    send_timeout: Field<Quantity>,
    linger_timeout: Field<Quantity>,
    min_send_rate: Field<Quantity>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawAdmission {
    max_connections: Field<i64>,
    max_connections_per_address: Field<i64>,
    requests_per_second: Field<f64>,
    burst: Field<i64>,
    retry_after: Field<Quantity>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLog {
    access: Field<String>,
    format: Field<String>,
    error: Field<String>,
    level: Field<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    realm: Field<String>,
    users: Spanned<BTreeMap<String, Spanned<String>>>,
}

/// A `[[site]]` or a `[[site.location]]`: one struct for both, so that unknown keys are caught
/// by serde in either; keys valid in only one of them are checked by `Loader::block`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBlock {
    // Site only.
    server_names: Field<Vec<String>>,
    default: Field<bool>,
    location: Option<Vec<RawBlock>>,
    // Location only.
    path: Field<String>,
    exact: Field<bool>,
    alias: Field<String>,
    // Both: a location inherits what it does not set from its site.
    root: Field<String>,
    index: Field<Vec<String>>,
    autoindex: Field<bool>,
    precompressed: Field<bool>,
    dotfiles: Field<bool>,
    follow_symlinks: Field<bool>,
    userdir: Field<String>,
    headers: Field<BTreeMap<String, String>>,
    cache_control: Field<String>,
    expires: Field<Quantity>,
    redirect: Field<String>,
    redirect_status: Field<i64>,
    rewrite: Field<String>,
    allow: Field<Vec<String>>,
    deny: Field<Vec<String>>,
    basic_auth: Option<Spanned<RawAuth>>,
    handler: Field<String>,
    rate_limit: Field<bool>,
}

struct Loader<'a> {
    file: &'a Path,
    text: &'a str,
    base: PathBuf,
}

type Loaded<T> = Result<T, ConfigError>;

impl Loader<'_> {
    fn error(&self, span: Range<usize>, key: &str, message: impl Into<String>) -> ConfigError {
        let (line, column) = position(self.text, span.start);
        ConfigError {
            file: self.file.to_path_buf(),
            line,
            column,
            key: key.to_owned(),
            message: message.into(),
            hint: None,
        }
    }

    fn hinted(
        &self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            hint: Some(hint.into()),
            ..self.error(span, key, message)
        }
    }

    /// A syntax or type error from the TOML reader, placed and named from the source text.
    fn toml_error(&self, error: &toml::de::Error) -> ConfigError {
        let span = error.span().unwrap_or(0..0);
        let key = key_at(self.text, span.start);
        let message = error.message().trim().to_owned();
        let hint = unknown_field_hint(&message);
        ConfigError {
            hint,
            ..self.error(span, &key, message)
        }
    }

    fn path(&self, value: &str) -> PathBuf {
        let path = Path::new(value);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.base.join(path)
        }
    }

    fn build(&self, raw: RawFile) -> Loaded<Config> {
        let mut config = Config::new(PathBuf::new());
        if let Some(listen) = &raw.listen {
            config.listen = listen.get_ref().parse().map_err(|_| {
                self.hinted(
                    listen.span(),
                    "listen",
                    format!("'{}' is not an address", listen.get_ref()),
                    "write it like \"127.0.0.1:8080\" or \"[::]:80\"",
                )
            })?;
        }
        if let Some(arch) = &raw.arch {
            config.arch = Arch::from_name(arch.get_ref()).ok_or_else(|| {
                let names: Vec<&str> = Arch::ALL.iter().map(|arch| arch.name()).collect();
                self.hinted(
                    arch.span(),
                    "arch",
                    format!("unknown architecture '{}'", arch.get_ref()),
                    format!("one of {}", names.join(", ")),
                )
            })?;
        }
        if let Some(threads) = &raw.threads {
            config.threads = self.count(threads, "threads", 1)?;
        }
        if let Some(helpers) = &raw.helpers {
            config.helpers = self.count(helpers, "helpers", 1)?;
        }
        self.process(&raw, &mut config)?;
        self.caches(raw.caches.unwrap_or_default(), &mut config)?;
        let send = raw.send.unwrap_or_default();
        if let Some(value) = &send.sendfile_threshold {
            config.send.sendfile_threshold = self.size(value, "send.sendfile_threshold")?;
        }
        if let Some(value) = &send.send_chunk {
            config.send.send_chunk = self.size_usize(value, "send.send_chunk", 1)?;
        }
        self.limits(raw.limits.unwrap_or_default(), &mut config)?;
        self.admission(raw.admission.unwrap_or_default(), &mut config)?;
        self.logs(raw.log.unwrap_or_default(), &mut config)?;
        config.sites = self.sites(raw.site.unwrap_or_default())?;
        Ok(config)
    }

    fn process(&self, raw: &RawFile, config: &mut Config) -> Loaded<()> {
        if let Some(user) = &raw.user {
            match ampd_sys::process::user_ids(user.get_ref()) {
                Ok(Some(_)) => config.process.user = Some(user.get_ref().clone()),
                _ => {
                    return Err(self.error(
                        user.span(),
                        "user",
                        format!("no such user '{}'", user.get_ref()),
                    ))
                }
            }
        }
        if let Some(group) = &raw.group {
            if raw.user.is_none() {
                return Err(self.hinted(
                    group.span(),
                    "group",
                    "group without user",
                    "set user too; group alone does not drop privileges",
                ));
            }
            match ampd_sys::process::group_id(group.get_ref()) {
                Ok(Some(_)) => config.process.group = Some(group.get_ref().clone()),
                _ => {
                    return Err(self.error(
                        group.span(),
                        "group",
                        format!("no such group '{}'", group.get_ref()),
                    ))
                }
            }
        }
        if let Some(pid_file) = &raw.pid_file {
            config.process.pid_file = Some(self.path(pid_file.get_ref()));
        }
        if let Some(grace) = &raw.grace_period {
            config.process.grace_period = self.duration(grace, "grace_period", true)?;
        }
        Ok(())
    }

    fn caches(&self, raw: RawCaches, config: &mut Config) -> Loaded<()> {
        let caches = &mut config.caches;
        caches.path_cache = raw.path_cache.unwrap_or(caches.path_cache);
        caches.header_cache = raw.header_cache.unwrap_or(caches.header_cache);
        caches.file_cache = raw.file_cache.unwrap_or(caches.file_cache);
        if let Some(value) = &raw.path_cache_entries {
            caches.path_cache_entries = self.count(value, "caches.path_cache_entries", 1)? as u64;
        }
        if let Some(value) = &raw.header_cache_entries {
            caches.header_cache_entries =
                self.count(value, "caches.header_cache_entries", 1)? as u64;
        }
        if let Some(value) = &raw.file_cache_bytes {
            caches.file_cache_bytes = self.size(value, "caches.file_cache_bytes")?;
        }
        if let Some(value) = &raw.revalidate_after {
            caches.revalidate_after = self.duration(value, "caches.revalidate_after", false)?;
        }
        Ok(())
    }

    fn limits(&self, raw: RawLimits, config: &mut Config) -> Loaded<()> {
        let limits = &mut config.limits;
        if let Some(value) = &raw.max_request_line {
            limits.max_request_line = self.size_usize(value, "limits.max_request_line", 16)?;
        }
        if let Some(value) = &raw.max_head_bytes {
            limits.max_head_bytes = self.size_usize(value, "limits.max_head_bytes", 64)?;
        }
        if let Some(value) = &raw.max_headers {
            limits.max_headers = self.count(value, "limits.max_headers", 1)?;
        }
        if let Some(value) = &raw.max_body {
            limits.max_body = self.size(value, "limits.max_body")?;
        }
        if let Some(value) = &raw.max_ranges {
            limits.max_ranges = self.count(value, "limits.max_ranges", 1)?;
        }
        if let Some(value) = &raw.max_requests_per_connection {
            let count = self.count(value, "limits.max_requests_per_connection", 1)?;
            limits.max_requests_per_connection = u32::try_from(count).unwrap_or(u32::MAX);
        }
        let timeouts = [
            (
                &raw.header_timeout,
                "limits.header_timeout",
                &mut limits.header_timeout,
            ),
            (
                &raw.body_timeout,
                "limits.body_timeout",
                &mut limits.body_timeout,
            ),
            (
                &raw.keepalive_timeout,
                "limits.keepalive_timeout",
                &mut limits.keepalive_timeout,
            ),
            (
                &raw.send_timeout,
                "limits.send_timeout",
                &mut limits.send_timeout,
            ),
            (
                &raw.linger_timeout,
                "limits.linger_timeout",
                &mut limits.linger_timeout,
            ),
        ];
        for (value, key, target) in timeouts {
            if let Some(value) = value {
                *target = self.duration(value, key, false)?;
            }
        }
        if let Some(value) = &raw.min_send_rate {
            limits.min_send_rate = self.size(value, "limits.min_send_rate")?;
        }
        if limits.max_head_bytes < limits.max_request_line {
            let span = raw
                .max_head_bytes
                .as_ref()
                .or(raw.max_request_line.as_ref())
                .map_or(0..0, Spanned::span);
            return Err(self.hinted(
                span,
                "limits.max_head_bytes",
                "smaller than limits.max_request_line",
                "a head holds its request line, so allow at least as much",
            ));
        }
        Ok(())
    }

    fn admission(&self, raw: RawAdmission, config: &mut Config) -> Loaded<()> {
        let admission = &mut config.admission;
        if let Some(value) = &raw.max_connections {
            admission.max_connections = self.count(value, "admission.max_connections", 1)?;
        }
        if let Some(value) = &raw.max_connections_per_address {
            admission.max_connections_per_address =
                self.count(value, "admission.max_connections_per_address", 0)?;
        }
        if let Some(value) = &raw.requests_per_second {
            let rate = *value.get_ref();
            if !(rate >= 0.0 && rate.is_finite()) {
                return Err(self.hinted(
                    value.span(),
                    "admission.requests_per_second",
                    format!("{rate} is not a rate"),
                    "a number of requests per second, 0 for no limit",
                ));
            }
            admission.requests_per_second = rate;
        }
        if let Some(value) = &raw.burst {
            let burst = self.count(value, "admission.burst", 1)?;
            admission.burst = u32::try_from(burst).unwrap_or(u32::MAX);
        }
        if let Some(value) = &raw.retry_after {
            admission.retry_after = self.duration(value, "admission.retry_after", false)?;
        }
        Ok(())
    }

    fn logs(&self, raw: RawLog, config: &mut Config) -> Loaded<()> {
        let logs = &mut config.logs;
        if let Some(access) = &raw.access {
            logs.access = match access.get_ref().as_str() {
                "off" => None,
                "" => {
                    return Err(self.hinted(
                        access.span(),
                        "log.access",
                        "empty path",
                        "a file, or \"off\"",
                    ))
                }
                path => Some(self.path(path)),
            };
        }
        if let Some(format) = &raw.format {
            logs.format = match format.get_ref().as_str() {
                "common" => LogFormat::Common,
                "combined" => LogFormat::Combined,
                "json" => LogFormat::Json,
                other => {
                    return Err(self.hinted(
                        format.span(),
                        "log.format",
                        format!("unknown format '{other}'"),
                        "common, combined or json",
                    ))
                }
            };
        }
        if let Some(error) = &raw.error {
            logs.error = match error.get_ref().as_str() {
                "stderr" => None,
                "" => {
                    return Err(self.hinted(
                        error.span(),
                        "log.error",
                        "empty path",
                        "a file, or \"stderr\"",
                    ))
                }
                path => Some(self.path(path)),
            };
        }
        if let Some(level) = &raw.level {
            logs.level = match level.get_ref().as_str() {
                "error" => Level::Error,
                "warn" => Level::Warn,
                "info" => Level::Info,
                "debug" => Level::Debug,
                other => {
                    return Err(self.hinted(
                        level.span(),
                        "log.level",
                        format!("unknown level '{other}'"),
                        "error, warn, info or debug",
                    ))
                }
            };
        }
        Ok(())
    }

    fn sites(&self, raw: Vec<RawBlock>) -> Loaded<Vec<Site>> {
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
            self.only_in_location(&block, "site")?;
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
            let site_settings = self.settings(&block, "site")?;
            let mut locations = Vec::new();
            for location in block.location.as_deref().unwrap_or_default() {
                locations.push(self.location(location, &site_settings)?);
            }
            if !locations
                .iter()
                .any(|location| location.path == "/" && !location.exact)
            {
                let settings = merge::finish(Partial::default(), &site_settings)
                    .map_err(|missing| self.no_root(&block, missing))?;
                locations.push(Location {
                    path: "/".to_owned(),
                    exact: false,
                    settings,
                });
            }
            sites.push(Site {
                names,
                default,
                locations,
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
        let Some(path) = &block.path else {
            let span = first_span(block);
            return Err(self.hinted(
                span,
                "site.location.path",
                "a location needs a path",
                "path = \"/static/\" (a prefix), with exact = true for one path only",
            ));
        };
        if !path.get_ref().starts_with('/') {
            return Err(self.error(
                path.span(),
                "site.location.path",
                format!("'{}' does not start with '/'", path.get_ref()),
            ));
        }
        let partial = self.settings(block, "site.location")?;
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
        let settings =
            merge::finish(partial, site).map_err(|missing| self.no_root(block, missing))?;
        Ok(Location {
            path: path.get_ref().clone(),
            exact: block.exact.as_ref().is_some_and(|exact| *exact.get_ref()),
            settings,
        })
    }

    fn no_root(&self, block: &RawBlock, missing: merge::MissingRoot) -> ConfigError {
        let (span, key) = match &block.path {
            Some(path) => (path.span(), "site.location.root"),
            None => (first_span(block), "site.root"),
        };
        let _ = missing;
        self.hinted(
            span,
            key,
            "no root for static files here",
            "set root in the site (or root/alias in the location), or a handler that needs none",
        )
    }

    fn only_in_location(&self, block: &RawBlock, table: &str) -> Loaded<()> {
        for (present, key) in [
            (block.path.as_ref().map(Spanned::span), "path"),
            (block.exact.as_ref().map(Spanned::span), "exact"),
            (block.alias.as_ref().map(Spanned::span), "alias"),
        ] {
            if let Some(span) = present {
                return Err(self.hinted(
                    span,
                    &format!("{table}.{key}"),
                    "only valid in a [[site.location]]",
                    "a site uses root; put path/exact/alias in a [[site.location]]",
                ));
            }
        }
        Ok(())
    }

    /// The settings a block sets itself (inheritance happens in `merge`).
    fn settings(&self, block: &RawBlock, table: &str) -> Loaded<Partial> {
        let key = |name: &str| format!("{table}.{name}");
        let mut partial = Partial::default();
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
                if name.is_empty() || !name.bytes().all(is_token_byte) {
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
                "static" => Handler::Static,
                "status" => Handler::Status,
                "health" => Handler::Health,
                name @ ("cgi" | "fastcgi" | "proxy") => {
                    return Err(self.hinted(
                        handler.span(),
                        &key("handler"),
                        format!("handler '{name}' is not built yet"),
                        "static, status or health",
                    ))
                }
                other => {
                    return Err(self.hinted(
                        handler.span(),
                        &key("handler"),
                        format!("unknown handler '{other}'"),
                        "static, status or health",
                    ))
                }
            });
        }
        partial.rate_limit = block.rate_limit.as_ref().map(|value| *value.get_ref());
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

    fn directory(&self, value: &Spanned<String>, key: &str) -> Loaded<PathBuf> {
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

    fn addresses(&self, list: &Spanned<Vec<String>>, key: &str) -> Loaded<Vec<AddressRange>> {
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

    fn count(&self, value: &Spanned<i64>, key: &str, min: i64) -> Loaded<usize> {
        let number = *value.get_ref();
        if number < min {
            return Err(self.error(value.span(), key, format!("{number} is less than {min}")));
        }
        usize::try_from(number)
            .map_err(|_| self.error(value.span(), key, format!("{number} is too large")))
    }

    fn size_usize(&self, value: &Spanned<Quantity>, key: &str, min: u64) -> Loaded<usize> {
        let size = self.size(value, key)?;
        if size < min {
            return Err(self.error(
                value.span(),
                key,
                format!("{size} bytes is less than {min}"),
            ));
        }
        usize::try_from(size).map_err(|_| self.error(value.span(), key, "too large"))
    }

    fn size(&self, value: &Spanned<Quantity>, key: &str) -> Loaded<u64> {
        let bad = |what: &str| {
            self.hinted(
                value.span(),
                key,
                format!("{what} is not a size"),
                "bytes as a number, or text like \"64KiB\", \"1MiB\", \"2GiB\"",
            )
        };
        match value.get_ref() {
            Quantity::Number(number) => {
                u64::try_from(*number).map_err(|_| bad(&number.to_string()))
            }
            Quantity::Text(text) => parse_size(text).ok_or_else(|| bad(&format!("'{text}'"))),
        }
    }

    fn duration(&self, value: &Spanned<Quantity>, key: &str, zero_ok: bool) -> Loaded<Duration> {
        let bad = |what: &str| {
            self.hinted(
                value.span(),
                key,
                format!("{what} is not a duration"),
                "seconds as a number, or text like \"500ms\", \"30s\", \"5m\", \"1h\", \"1d\"",
            )
        };
        let duration = match value.get_ref() {
            Quantity::Number(number) => {
                Duration::from_secs(u64::try_from(*number).map_err(|_| bad(&number.to_string()))?)
            }
            Quantity::Text(text) => {
                parse_duration(text).ok_or_else(|| bad(&format!("'{text}'")))?
            }
        };
        if duration.is_zero() && !zero_ok {
            return Err(self.error(value.span(), key, "must be more than zero"));
        }
        Ok(duration)
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
        .unwrap_or(0..0)
}

/// RFC 9110 §5.6.2 `tchar`: what a header name is made of.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// `"64KiB"`, `"1MiB"`, `"512"`, `"2G"`: binary units, as nginx reads `k` and `m`.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    number.checked_mul(1u64 << shift)
}

/// `"500ms"`, `"30s"`, `"5m"`, `"1h"`, `"1d"`, or a bare number of seconds.
fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: u64 = digits.parse().ok()?;
    let millis = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1000,
        "m" | "min" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    Some(Duration::from_millis(number.checked_mul(millis)?))
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// The dotted key at byte `offset`: the table header above it plus the key on its line.
fn key_at(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or("");
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |at| line_start + at);
    let line = &text[line_start..line_end];
    let mut table = String::new();
    for previous in text[..line_start].lines() {
        let trimmed = previous.trim();
        if trimmed.starts_with('[') {
            table = trimmed
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_owned();
        }
    }
    let trimmed = line.trim();
    if trimmed.starts_with('[') {
        return trimmed
            .trim_matches(|c| c == '[' || c == ']')
            .trim()
            .to_owned();
    }
    let key = line
        .split_once('=')
        .map_or(trimmed, |(key, _)| key.trim())
        .trim_matches('"')
        .to_owned();
    match (table.is_empty(), key.is_empty()) {
        (_, true) => table,
        (true, false) => key,
        (false, false) => format!("{table}.{key}"),
    }
}

/// For serde's "unknown field `x`, expected one of `a`, `b`": the closest known key.
fn unknown_field_hint(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    let (unknown, expected) = rest.split_once('`')?;
    let best = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|candidate| (edit_distance(unknown, candidate), candidate))
        .min()?;
    (best.0 <= 3).then(|| format!("did you mean `{}`?", best.1))
}

fn edit_distance(left: &str, right: &str) -> usize {
    let right: Vec<char> = right.chars().collect();
    let mut row: Vec<usize> = (0..=right.len()).collect();
    for (i, a) in left.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, b) in right.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(a != *b));
            diagonal = above;
        }
    }
    row[right.len()]
}

fn plain(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("64KiB"), Some(64 << 10));
        assert_eq!(parse_size("1m"), Some(1 << 20));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("1 parsec"), None);
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("soon"), None);
    }

    #[test]
    fn key_and_position_come_from_the_text() {
        let text = "listen = \"x\"\n[limits]\nheader_timeout = 3\n";
        let offset = text.find("header_timeout").unwrap();
        assert_eq!(position(text, offset), (3, 1));
        assert_eq!(key_at(text, offset + 5), "limits.header_timeout");
        assert_eq!(key_at(text, 2), "listen");
    }

    #[test]
    fn typos_get_the_nearest_key() {
        let hint = unknown_field_hint("unknown field `listn`, expected one of `listen`, `arch`");
        assert_eq!(hint.as_deref(), Some("did you mean `listen`?"));
        assert_eq!(
            unknown_field_hint("unknown field `zzzzzzzz`, expected `listen`"),
            None
        );
    }

    #[test]
    fn address_ranges_match() {
        let range = AddressRange {
            network: "10.0.0.0".parse().unwrap(),
            prefix: 8,
        };
        assert!(range.contains("10.1.2.3".parse().unwrap()));
        assert!(!range.contains("11.0.0.1".parse().unwrap()));
        assert!(range.contains("::ffff:10.0.0.1".parse().unwrap()));
        let all = AddressRange {
            network: "0.0.0.0".parse().unwrap(),
            prefix: 0,
        };
        assert!(all.contains("192.0.2.1".parse().unwrap()));
    }
}
