//! Reading `ampd.toml` into the one typed `Config`.
//!
//! Owns: the file's schema (`Raw*` structs, `deny_unknown_fields`), turning text values into
//! typed ones (addresses, durations like `"30s"`, sizes like `"64KiB"`, host patterns, address
//! blocks, password hashes), and errors that name the file, line, column and key — with a hint
//! where one helps (the nearest known key for a typo). Relative paths in the file are taken
//! relative to the file's own directory, so a config and its site can move together.
//! Must not touch: sockets, threads. It reads the file, checks that roots, users and groups
//! exist and resolves upstream host names (`pools.rs`), so `ampd check` catches what would stop
//! `ampd run`.

use std::cell::RefCell;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use super::pool_table::PoolTable;
use super::raw::{Quantity, RawAdmission, RawCaches, RawFile, RawLimits, RawListen, RawLog};
use super::text::{
    key_at, parse_duration, parse_listen, parse_size, plain, position, size_hint,
    unknown_field_hint, LISTEN_FORMS,
};
use super::{Arch, Config, HelperMode, Level, Listen, LogFormat};

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

/// `pid_file` as `file` sets it (relative to its directory), read leniently: `ampd stop` and
/// `ampd reopen` must find a server whose file has since been broken. `None` when the file
/// cannot be read as TOML or sets none.
#[must_use]
pub fn pid_file_setting(file: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(file).ok()?;
    let table: toml::Table = text.parse().ok()?;
    let value = table.get("pid_file")?.as_str()?;
    let path = Path::new(value);
    Some(if path.is_absolute() || value.is_empty() {
        path.to_path_buf()
    } else {
        file.parent().unwrap_or(Path::new(".")).join(path)
    })
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
        pools: RefCell::default(),
    };
    let raw: RawFile = toml::from_str(text).map_err(|error| loader.toml_error(&error))?;
    loader.build(raw)
}

pub(super) struct Loader<'a> {
    file: &'a Path,
    text: &'a str,
    base: PathBuf,
    /// Filled by `[upstream.NAME]` tables first, then applications, then by `proxy_pass` and
    /// `fastcgi_pass` addresses as the sites are read (a cell: the block readers share `&self`).
    pub(super) pools: RefCell<PoolTable>,
}

pub(super) type Loaded<T> = Result<T, ConfigError>;

impl Loader<'_> {
    pub(super) fn error(
        &self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> ConfigError {
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

    pub(super) fn hinted(
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

    /// The configuration's source text (to place a second mention against a first).
    pub(super) fn text(&self) -> &str {
        self.text
    }

    /// The configuration file's directory (relative paths in the file are relative to it).
    pub(super) fn base(&self) -> &Path {
        &self.base
    }

    pub(super) fn path(&self, value: &str) -> PathBuf {
        let path = Path::new(value);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.base.join(path)
        }
    }

    /// `listen`: one entry or a list, each an address `parse_listen` takes, with ` tls` after
    /// it for a TLS listener or ` h2c` for cleartext HTTP/2 with prior knowledge; no address
    /// twice.
    fn listen(&self, listen: &Spanned<RawListen>) -> Loaded<Vec<Listen>> {
        let entries = listen.get_ref().entries();
        if entries.is_empty() {
            return Err(self.error(listen.span(), "listen", "needs at least one address"));
        }
        let mut parsed: Vec<Listen> = Vec::new();
        for entry in entries {
            let (address, tls, h2c) = self.listen_entry(entry, listen.span())?;
            let address = parse_listen(address).map_err(|reason| {
                self.hinted(
                    listen.span(),
                    "listen",
                    format!("'{address}' is not an address ({reason})"),
                    format!("write it like {LISTEN_FORMS}"),
                )
            })?;
            for listener in address.listeners(tls, h2c) {
                let address = listener.address;
                if address.port() != 0 && parsed.iter().any(|seen| seen.address == address) {
                    return Err(self.error(
                        listen.span(),
                        "listen",
                        format!("{address} is listed twice"),
                    ));
                }
                parsed.push(listener);
            }
        }
        Ok(parsed)
    }

    /// One `listen` entry split into its address and its options: (address, tls, h2c).
    fn listen_entry<'e>(
        &self,
        entry: &'e str,
        span: Range<usize>,
    ) -> Loaded<(&'e str, bool, bool)> {
        let mut words = entry.split_whitespace();
        let address = words.next().unwrap_or("");
        let (mut tls, mut h2c) = (false, false);
        for option in words {
            let seen = match option {
                "tls" => &mut tls,
                "h2c" => &mut h2c,
                other => {
                    return Err(self.hinted(
                        span,
                        "listen",
                        format!("'{entry}': unknown option '{other}'"),
                        "the options are `tls` (\"0.0.0.0:443 tls\", HTTP/2 offered by ALPN) \
                         and `h2c` (\"127.0.0.1:8080 h2c\", cleartext HTTP/2 with prior \
                         knowledge beside HTTP/1.1)",
                    ))
                }
            };
            if *seen {
                return Err(self.hinted(
                    span,
                    "listen",
                    format!("'{entry}': `{option}` twice"),
                    "name each option once",
                ));
            }
            *seen = true;
        }
        if tls && h2c {
            return Err(self.hinted(
                span,
                "listen",
                format!("'{entry}': `tls` and `h2c` together"),
                "a TLS listener offers HTTP/2 by ALPN already; `h2c` is HTTP/2 in cleartext: \
                 write \"ADDR tls\" or \"ADDR h2c\"",
            ));
        }
        Ok((address, tls, h2c))
    }

    fn build(&self, raw: RawFile) -> Loaded<Config> {
        let mut config = Config::new(PathBuf::new());
        if let Some(listen) = &raw.listen {
            config.listen = self.listen(listen)?;
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
            config.threads = Some(self.count(threads, "threads", 1)?);
        }
        if let Some(helpers) = &raw.helpers {
            config.helpers = self.count(helpers, "helpers", 1)?;
        }
        match &raw.helpers_max {
            Some(max) => {
                config.helpers_max = self.count(max, "helpers_max", 1)?;
                if config.helpers_max < config.helpers {
                    return Err(self.hinted(
                        max.span(),
                        "helpers_max",
                        format!(
                            "{} is less than helpers ({})",
                            config.helpers_max, config.helpers
                        ),
                        "helpers is how many start; helpers_max how many there may grow to",
                    ));
                }
            }
            None => config.helpers_max = config.helpers_max.max(config.helpers),
        }
        if let Some(mode) = &raw.helpers_mode {
            config.helper_mode = HelperMode::from_name(mode.get_ref()).ok_or_else(|| {
                self.hinted(
                    mode.span(),
                    "helpers_mode",
                    format!("unknown helper mode '{}'", mode.get_ref()),
                    "one of threads, process",
                )
            })?;
        }
        self.process(&raw, &mut config)?;
        self.proxy_protocol(&raw, &mut config)?;
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
        self.upstreams(raw.upstream)?;
        config.cgi = self.cgi_limits(raw.cgi)?;
        config.applications = self.applications(raw.application)?;
        config.tls = self.tls_server(raw.tls)?;
        config.http2 = self.http2(raw.http2, &config.listen)?;
        let sites = raw.site.unwrap_or_default();
        config.sites = self.sites(&sites)?;
        self.type_table(
            raw.types.as_ref(),
            raw.types_file.as_ref(),
            &mut config.sites,
        )?;
        self.tls_fits_the_listeners(raw.listen.as_ref(), &sites, &config)?;
        config.upstreams = self.finish_pools()?;
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
        if let Some(delay) = &raw.drain_delay {
            config.process.drain_delay = self.duration(delay, "drain_delay", true)?;
        }
        Ok(())
    }

    fn caches(&self, raw: RawCaches, config: &mut Config) -> Loaded<()> {
        let caches = &mut config.caches;
        caches.path_cache = raw.path_cache.unwrap_or(caches.path_cache);
        caches.header_cache = raw.header_cache.unwrap_or(caches.header_cache);
        caches.file_cache = raw.file_cache.unwrap_or(caches.file_cache);
        caches.residency_test = raw.residency_test.unwrap_or(caches.residency_test);
        if let Some(value) = &raw.path_cache_entries {
            caches.path_cache_entries = self.count(value, "caches.path_cache_entries", 1)? as u64;
        }
        if let Some(value) = &raw.header_cache_entries {
            caches.header_cache_entries =
                self.count(value, "caches.header_cache_entries", 1)? as u64;
        }
        if let Some(value) = &raw.file_cache_bytes {
            caches.file_cache_bytes = Some(self.size(value, "caches.file_cache_bytes")?);
        }
        if let Some(value) = &raw.revalidate_after {
            caches.revalidate_after = self.duration(value, "caches.revalidate_after", false)?;
        }
        if let Some(value) = &raw.compressed_size {
            caches.compressed_size = self.size(value, "caches.compressed_size")?;
        }
        if let Some(value) = &raw.compressed_max_file {
            caches.compressed_max_file = self.size(value, "caches.compressed_max_file")?;
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

    pub(super) fn count(&self, value: &Spanned<i64>, key: &str, min: i64) -> Loaded<usize> {
        let number = *value.get_ref();
        if number < min {
            return Err(self.error(value.span(), key, format!("{number} is less than {min}")));
        }
        usize::try_from(number)
            .map_err(|_| self.error(value.span(), key, format!("{number} is too large")))
    }

    pub(super) fn size_usize(
        &self,
        value: &Spanned<Quantity>,
        key: &str,
        min: u64,
    ) -> Loaded<usize> {
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

    pub(super) fn size(&self, value: &Spanned<Quantity>, key: &str) -> Loaded<u64> {
        let bad = |what: &str, text: &str| {
            self.hinted(
                value.span(),
                key,
                format!("{what} is not a size"),
                size_hint(text),
            )
        };
        match value.get_ref() {
            Quantity::Number(number) => {
                u64::try_from(*number).map_err(|_| bad(&number.to_string(), &number.to_string()))
            }
            Quantity::Text(text) => parse_size(text).ok_or_else(|| bad(&format!("'{text}'"), text)),
        }
    }

    pub(super) fn duration(
        &self,
        value: &Spanned<Quantity>,
        key: &str,
        zero_ok: bool,
    ) -> Loaded<Duration> {
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
            return Err(self.hinted(
                value.span(),
                key,
                "must be more than zero",
                "a duration like \"500ms\", \"30s\", \"5m\" or \"12h\"",
            ));
        }
        Ok(duration)
    }
}
