//! The file's schema: what `ampd.toml` may contain, as serde reads it (`deny_unknown_fields`
//! everywhere, `Spanned` values so errors can point at the place).
//!
//! Owns: the `Raw*` structs and `Quantity` (a number or a text with a unit).
//! Must not touch: meaning (`load.rs` and `blocks.rs` turn these into `Config`).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

/// A number (`65536`, `30`) or a text with a unit (`"64KiB"`, `"30s"`).
#[derive(Clone, Debug)]
pub(super) enum Quantity {
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

pub(super) type Field<T> = Option<Spanned<T>>;

/// `listen`: one address or a list of them, each `"ADDR"` or `"ADDR tls"`. A bare port may be
/// a TOML integer (`listen = 8080`), read as the text `"8080"` is, so that the mistake every
/// reader makes once gets the meaning they meant, and anything else gets the forms to write.
pub(super) struct RawListen(Vec<String>);

impl RawListen {
    pub(super) fn entries(&self) -> Vec<&str> {
        self.0.iter().map(String::as_str).collect()
    }
}

/// What a `listen` value or element may be, for serde's "invalid type: …, expected …".
const LISTEN_EXPECTED: &str =
    "an address like \"127.0.0.1:8080\", \":8080\" or 8080, or a list of them";

impl<'de> Deserialize<'de> for RawListen {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// One address: a string, or an integer taken as the same digits in a string.
        struct Entry(String);
        struct EntryVisitor;
        impl Visitor<'_> for EntryVisitor {
            type Value = Entry;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(LISTEN_EXPECTED)
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Entry, E> {
                Ok(Entry(value.to_string()))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Entry, E> {
                Ok(Entry(value.to_string()))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Entry, E> {
                Ok(Entry(value.to_owned()))
            }
        }
        impl<'de> Deserialize<'de> for Entry {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any(EntryVisitor)
            }
        }
        struct ListenVisitor;
        impl<'de> Visitor<'de> for ListenVisitor {
            type Value = RawListen;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(LISTEN_EXPECTED)
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawListen, E> {
                EntryVisitor
                    .visit_i64(value)
                    .map(|entry| RawListen(vec![entry.0]))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawListen, E> {
                EntryVisitor
                    .visit_u64(value)
                    .map(|entry| RawListen(vec![entry.0]))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawListen, E> {
                Ok(RawListen(vec![value.to_owned()]))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<RawListen, A::Error> {
                let mut entries = Vec::new();
                while let Some(Entry(entry)) = seq.next_element()? {
                    entries.push(entry);
                }
                Ok(RawListen(entries))
            }
        }
        deserializer.deserialize_any(ListenVisitor)
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) listen: Field<RawListen>,
    pub(super) arch: Field<String>,
    pub(super) threads: Field<i64>,
    pub(super) helpers: Field<i64>,
    pub(super) helpers_max: Field<i64>,
    pub(super) helpers_mode: Field<String>,
    pub(super) user: Field<String>,
    pub(super) group: Field<String>,
    pub(super) pid_file: Field<String>,
    pub(super) grace_period: Field<Quantity>,
    pub(super) drain_delay: Field<Quantity>,
    pub(super) caches: Option<RawCaches>,
    pub(super) send: Option<RawSend>,
    pub(super) limits: Option<RawLimits>,
    pub(super) admission: Option<RawAdmission>,
    pub(super) proxy_protocol: Field<bool>,
    pub(super) proxy_protocol_from: Field<Vec<String>>,
    pub(super) log: Option<RawLog>,
    /// `[upstream.NAME]` tables; the names' spans give the file order back.
    pub(super) upstream: Option<BTreeMap<Spanned<String>, Spanned<RawUpstream>>>,
    pub(super) cgi: Option<RawCgi>,
    /// `[application.NAME]` tables; the names' spans give the file order back.
    pub(super) application: Option<BTreeMap<Spanned<String>, Spanned<RawApplication>>>,
    pub(super) site: Option<Vec<RawBlock>>,
    pub(super) tls: Option<RawTls>,
    pub(super) http2: Option<RawHttp2>,
    /// `[types]`: extension → `Content-Type` (`types_keys.rs`).
    pub(super) types: Option<Spanned<BTreeMap<String, Spanned<String>>>>,
    pub(super) types_file: Field<String>,
}

/// `min_version`: `"1.2"` or `1.2` (TOML would otherwise refuse the number people write).
#[derive(Clone, Debug)]
pub(super) enum RawVersion {
    Number(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for RawVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct VersionVisitor;
        impl Visitor<'_> for VersionVisitor {
            type Value = RawVersion;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a TLS version: \"1.2\" or \"1.3\"")
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawVersion, E> {
                Ok(RawVersion::Number(value))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawVersion, E> {
                Ok(RawVersion::Text(value.to_owned()))
            }
        }
        deserializer.deserialize_any(VersionVisitor)
    }
}

/// `[tls]`: the server-wide TLS settings (`config::TlsServer`, read in `tls_keys.rs`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub(super) min_version: Field<RawVersion>,
    pub(super) ciphers: Field<Vec<String>>,
    pub(super) session_tickets: Field<bool>,
    pub(super) ticket_rotation: Field<Quantity>,
    pub(super) session_cache: Field<i64>,
    pub(super) handshake_timeout: Field<Quantity>,
    pub(super) certificate: Field<String>,
    pub(super) certificate_key: Field<String>,
    pub(super) ocsp_response: Field<String>,
    pub(super) acme: Option<RawAcme>,
}

/// `[tls.acme]` (`config::AcmeSettings`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAcme {
    pub(super) directory: Field<String>,
    pub(super) ca_root: Field<String>,
    pub(super) email: Field<String>,
    pub(super) challenge: Field<String>,
    pub(super) state_dir: Field<String>,
    pub(super) renew_before: Field<Quantity>,
}

/// `[http2]`: whether HTTP/2 is offered and the limits of every HTTP/2 connection
/// (`config::http2::Http2`, read in `http2_keys.rs`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttp2 {
    pub(super) enabled: Field<bool>,
    pub(super) max_concurrent_streams: Field<i64>,
    pub(super) initial_window_size: Field<Quantity>,
    pub(super) connection_window_size: Field<Quantity>,
    pub(super) max_frame_size: Field<Quantity>,
    pub(super) max_header_list_size: Field<Quantity>,
    pub(super) header_table_size: Field<Quantity>,
    pub(super) max_header_block: Field<Quantity>,
    pub(super) budget_window: Field<Quantity>,
    pub(super) max_resets: Field<i64>,
    pub(super) max_settings: Field<i64>,
    pub(super) max_pings: Field<i64>,
    pub(super) max_empty_frames: Field<i64>,
    pub(super) max_upstream_streams: Field<i64>,
}

/// `[cgi]`: the server-wide limits of CGI scripts (`config::CgiLimits`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCgi {
    pub(super) max_scripts: Field<i64>,
}

/// `[application.NAME]`: a FastCGI application ampd starts and keeps (`config::Application`).
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table: command = [...], socket = \"...\" and the application's settings"
)]
pub(super) struct RawApplication {
    pub(super) command: Field<Vec<String>>,
    pub(super) processes: Field<i64>,
    pub(super) socket: Field<String>,
    pub(super) directory: Field<String>,
    pub(super) env: Field<BTreeMap<String, String>>,
    pub(super) stop_timeout: Field<Quantity>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCaches {
    pub(super) path_cache: Option<bool>,
    pub(super) header_cache: Option<bool>,
    pub(super) file_cache: Option<bool>,
    pub(super) residency_test: Option<bool>,
    pub(super) path_cache_entries: Field<i64>,
    pub(super) header_cache_entries: Field<i64>,
    pub(super) file_cache_bytes: Field<Quantity>,
    pub(super) revalidate_after: Field<Quantity>,
    pub(super) compressed_size: Field<Quantity>,
    pub(super) compressed_max_file: Field<Quantity>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSend {
    pub(super) sendfile_threshold: Field<Quantity>,
    pub(super) send_chunk: Field<Quantity>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) max_request_line: Field<Quantity>,
    pub(super) max_head_bytes: Field<Quantity>,
    pub(super) max_headers: Field<i64>,
    pub(super) max_body: Field<Quantity>,
    pub(super) max_ranges: Field<i64>,
    pub(super) max_requests_per_connection: Field<i64>,
    pub(super) header_timeout: Field<Quantity>,
    pub(super) body_timeout: Field<Quantity>,
    pub(super) keepalive_timeout: Field<Quantity>,
    pub(super) send_timeout: Field<Quantity>,
    pub(super) linger_timeout: Field<Quantity>,
    pub(super) min_send_rate: Field<Quantity>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmission {
    pub(super) max_connections: Field<i64>,
    pub(super) max_connections_per_address: Field<i64>,
    pub(super) requests_per_second: Field<f64>,
    pub(super) burst: Field<i64>,
    pub(super) retry_after: Field<Quantity>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLog {
    pub(super) access: Field<String>,
    pub(super) format: Field<String>,
    pub(super) error: Field<String>,
    pub(super) level: Field<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    pub(super) realm: Field<String>,
    pub(super) users: Spanned<BTreeMap<String, Spanned<String>>>,
}

/// A block's `return` (`config::Return`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReturn {
    pub(super) status: Spanned<i64>,
    pub(super) location: Field<String>,
    pub(super) body: Field<String>,
    pub(super) content_type: Field<String>,
}

/// `[upstream.NAME]`: a pool of servers (`config::UpstreamPool`).
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table: servers = [...] and the pool's settings"
)]
pub(super) struct RawUpstream {
    pub(super) servers: Field<Vec<Spanned<RawServer>>>,
    pub(super) balance: Field<String>,
    pub(super) keepalive: Field<i64>,
    pub(super) keepalive_timeout: Field<Quantity>,
    pub(super) connect_timeout: Field<Quantity>,
    pub(super) send_timeout: Field<Quantity>,
    pub(super) read_timeout: Field<Quantity>,
    pub(super) tries: Field<i64>,
    pub(super) max_fails: Field<i64>,
    pub(super) fail_window: Field<Quantity>,
    pub(super) fail_timeout: Field<Quantity>,
    pub(super) health_check: Option<Spanned<RawHealthCheck>>,
}

/// One entry of `servers`: `"127.0.0.1:9001"`, or `{ address = "…", weight = 3, backup = true }`.
pub(super) enum RawServer {
    Address(String),
    Table(RawServerTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServerTable {
    pub(super) address: Spanned<String>,
    pub(super) weight: Field<i64>,
    pub(super) backup: Field<bool>,
}

impl<'de> Deserialize<'de> for RawServer {
    /// By hand rather than `#[serde(untagged)]`, which would answer a typo inside the table
    /// with "data did not match any variant" instead of naming the unknown key.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ServerVisitor;
        impl<'de> Visitor<'de> for ServerVisitor {
            type Value = RawServer;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(
                    "an address like \"127.0.0.1:9001\" or a table { address, weight, backup }",
                )
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawServer, E> {
                Ok(RawServer::Address(value.to_owned()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawServer, A::Error> {
                RawServerTable::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawServer::Table)
            }
        }
        deserializer.deserialize_any(ServerVisitor)
    }
}

/// One value of `error_pages`: `"/errors/404.html"`, or `{ uri = "…", status = 200 }`.
pub(super) enum RawErrorPage {
    Uri(String),
    Table(RawErrorPageTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawErrorPageTable {
    pub(super) uri: Field<String>,
    pub(super) status: Field<i64>,
}

impl<'de> Deserialize<'de> for RawErrorPage {
    /// By hand, as `RawServer`: a typo inside the table is named, not "no variant matched".
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PageVisitor;
        impl<'de> Visitor<'de> for PageVisitor {
            type Value = RawErrorPage;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter
                    .write_str("a local URI like \"/errors/404.html\" or a table { uri, status }")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawErrorPage, E> {
                Ok(RawErrorPage::Uri(value.to_owned()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<RawErrorPage, A::Error> {
                RawErrorPageTable::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawErrorPage::Table)
            }
        }
        deserializer.deserialize_any(PageVisitor)
    }
}

/// `health_check = { path, interval, timeout, expect, rise, fall }`.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { path = \"/health\", interval = \"5s\" }"
)]
pub(super) struct RawHealthCheck {
    /// Required for an HTTP pool, refused for a FastCGI one (its check is `FCGI_GET_VALUES`).
    pub(super) path: Field<String>,
    pub(super) interval: Field<Quantity>,
    pub(super) timeout: Field<Quantity>,
    pub(super) expect: Field<i64>,
    pub(super) rise: Field<i64>,
    pub(super) fall: Field<i64>,
}

/// A `[[site]]` or a `[[site.location]]`: one struct for both, so that unknown keys are caught
/// by serde in either; keys valid in only one of them are checked in `blocks.rs`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBlock {
    // Site only.
    pub(super) server_names: Field<Vec<String>>,
    pub(super) default: Field<bool>,
    pub(super) location: Option<Vec<RawBlock>>,
    // Site only, TLS (`tls_keys.rs`).
    pub(super) certificate: Field<String>,
    pub(super) certificate_key: Field<String>,
    pub(super) ocsp_response: Field<String>,
    pub(super) client_certificates: Field<String>,
    pub(super) client_ca: Field<String>,
    pub(super) hsts: Field<Quantity>,
    pub(super) hsts_include_subdomains: Field<bool>,
    pub(super) hsts_preload: Field<bool>,
    pub(super) redirect_https: Field<bool>,
    // Location only.
    pub(super) path: Field<String>,
    pub(super) exact: Field<bool>,
    pub(super) alias: Field<String>,
    pub(super) regex: Field<String>,
    // Both: a location inherits what it does not set from its site.
    pub(super) root: Field<String>,
    pub(super) index: Field<Vec<String>>,
    pub(super) autoindex: Field<bool>,
    pub(super) precompressed: Field<bool>,
    pub(super) compress: Field<bool>,
    pub(super) compress_types: Field<Vec<String>>,
    pub(super) compress_min_length: Field<Quantity>,
    pub(super) compress_encodings: Field<Vec<String>>,
    pub(super) compress_levels: Field<BTreeMap<String, i64>>,
    pub(super) multiviews: Field<bool>,
    pub(super) negotiation: Field<String>,
    pub(super) dotfiles: Field<bool>,
    pub(super) follow_symlinks: Field<bool>,
    pub(super) userdir: Field<String>,
    pub(super) headers: Field<BTreeMap<String, String>>,
    pub(super) headers_set: Field<BTreeMap<String, String>>,
    pub(super) headers_remove: Field<Vec<String>>,
    pub(super) cache_control: Field<String>,
    pub(super) expires: Field<Quantity>,
    pub(super) redirect: Field<String>,
    pub(super) redirect_status: Field<i64>,
    pub(super) rewrite: Field<String>,
    #[serde(rename = "return")]
    pub(super) return_: Option<Spanned<RawReturn>>,
    pub(super) try_files: Field<Vec<String>>,
    pub(super) error_pages: Field<BTreeMap<Spanned<String>, Spanned<RawErrorPage>>>,
    pub(super) intercept_errors: Field<bool>,
    pub(super) allow: Field<Vec<String>>,
    pub(super) deny: Field<Vec<String>>,
    pub(super) basic_auth: Option<Spanned<RawAuth>>,
    pub(super) handler: Field<String>,
    pub(super) rate_limit: Field<bool>,
    pub(super) max_body: Field<Quantity>,
    pub(super) internal: Field<bool>,
    pub(super) default_type: Field<String>,
    pub(super) charset: Field<String>,
    // Both, for a proxy location.
    pub(super) proxy_pass: Field<String>,
    pub(super) proxy_host: Field<String>,
    pub(super) websocket: Field<bool>,
    pub(super) x_accel_redirect: Field<bool>,
    pub(super) x_sendfile_root: Field<String>,
    pub(super) forwarded_trust: Field<Vec<String>>,
    pub(super) underscores_in_headers: Field<bool>,
    // Both, for CGI and FastCGI locations (`gateway_keys.rs`); `extension` in a location only.
    pub(super) fastcgi_pass: Field<String>,
    pub(super) extension: Field<String>,
    pub(super) script: Field<String>,
    pub(super) params: Field<BTreeMap<String, String>>,
    pub(super) fallback: Field<String>,
    pub(super) cgi_timeout: Field<Quantity>,
    pub(super) fastcgi_check_script: Field<bool>,
}
