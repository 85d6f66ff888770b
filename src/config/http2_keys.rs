//! The `[http2]` keys (docs/config.md "HTTP/2"), with their errors.
//!
//! Owns: reading `RawHttp2` into `Http2`, the ranges RFC 9113 §6.5.2 and §6.9 put on the
//! values ampd advertises in SETTINGS and WINDOW_UPDATE, and the one check that needs the
//! listeners (an `h2c` listener with HTTP/2 turned off).
//! Must not touch: what the limits do (`ampd_http::h2`), ALPN (`tls::context`).

use std::fmt::Display;

use ampd_http::h2::frame::{DEFAULT_MAX_FRAME_SIZE, MAX_FRAME_SIZE_LIMIT};
use toml::Spanned;

use super::http2::{Http2, MAX_UPSTREAM_STREAMS};
use super::load::{Loaded, Loader};
use super::raw::{Quantity, RawHttp2};
use super::Listen;

/// RFC 9113 §6.9.1: a flow-control window never exceeds 2^31-1 bytes; SETTINGS_INITIAL_WINDOW_SIZE
/// above it is a FLOW_CONTROL_ERROR (§6.5.2).
const MAX_WINDOW: u64 = (1 << 31) - 1;

/// RFC 9113 §6.9.2: the connection window starts at 65,535 and only WINDOW_UPDATE changes it,
/// which can raise it but never lower it.
const INITIAL_CONNECTION_WINDOW: u64 = 65_535;

/// The floor of the header sizes, as `limits.max_head_bytes` has: below it no request fits.
const MIN_HEADER_BYTES: u64 = 64;

/// A SETTINGS value is 32 bits (RFC 9113 §6.5.1).
const MAX_SETTING: u64 = u32::MAX as u64;

const BUDGET_HINT: &str = "frames of that kind per budget_window before the connection is \
     closed with GOAWAY ENHANCE_YOUR_CALM: 1 to 4294967295";

impl Loader<'_> {
    /// `[http2]`, read once `listen` is (`enabled = false` beside an `h2c` listener is refused).
    pub(super) fn http2(&self, raw: Option<RawHttp2>, listen: &[Listen]) -> Loaded<Http2> {
        let raw = raw.unwrap_or_default();
        let mut http2 = Http2::default();
        if let Some(enabled) = &raw.enabled {
            http2.enabled = *enabled.get_ref();
            if !http2.enabled && listen.iter().any(|listen| listen.h2c) {
                return Err(self.hinted(
                    enabled.span(),
                    "http2.enabled",
                    "false, and listen has an h2c listener",
                    "an `h2c` listener serves HTTP/2: take `h2c` off it, or leave HTTP/2 enabled",
                ));
            }
        }
        let limits = &mut http2.limits;
        if let Some(value) = &raw.max_concurrent_streams {
            limits.max_concurrent_streams = self.setting(
                value,
                "http2.max_concurrent_streams",
                "streams one client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS): \
                 1 to 4294967295",
            )?;
        }
        if let Some(value) = &raw.initial_window_size {
            limits.initial_window_size = self.bounded_size(
                value,
                "http2.initial_window_size",
                1..=MAX_WINDOW,
                "request body bytes a stream may send before ampd credits more: 1 to \
                 2147483647 (RFC 9113 §6.5.2), like \"64k\" or \"1m\"",
            )?;
        }
        if let Some(value) = &raw.connection_window_size {
            limits.connection_window_size = self.bounded_size(
                value,
                "http2.connection_window_size",
                INITIAL_CONNECTION_WINDOW..=MAX_WINDOW,
                "65535 to 2147483647: the connection window starts at 65535 and WINDOW_UPDATE \
                 can only raise it (RFC 9113 §6.9.2)",
            )?;
        }
        if let Some(value) = &raw.max_frame_size {
            limits.max_frame_size = self.bounded_size(
                value,
                "http2.max_frame_size",
                u64::from(DEFAULT_MAX_FRAME_SIZE)..=u64::from(MAX_FRAME_SIZE_LIMIT),
                "16384 (\"16k\") to 16777215 (RFC 9113 §6.5.2)",
            )?;
        }
        if let Some(value) = &raw.max_header_list_size {
            limits.max_header_list_size = self.bounded_size(
                value,
                "http2.max_header_list_size",
                MIN_HEADER_BYTES..=MAX_SETTING,
                "decoded field bytes of one request (a request past it is answered 431): 64 to \
                 4294967295, like \"64k\"",
            )?;
        }
        if let Some(value) = &raw.header_table_size {
            limits.header_table_size = self.bounded_size(
                value,
                "http2.header_table_size",
                0..=MAX_SETTING,
                "the HPACK dynamic table each connection keeps for its client: 0 (none) to \
                 4294967295, like \"4k\"",
            )?;
        }
        if let Some(value) = &raw.max_header_block {
            limits.max_header_block = self.bounded_size(
                value,
                "http2.max_header_block",
                MIN_HEADER_BYTES..=MAX_SETTING,
                "compressed bytes of one HEADERS + CONTINUATION block: 64 to 4294967295, like \
                 \"64k\"",
            )?;
        }
        if let Some(value) = &raw.budget_window {
            limits.budget_window = self.duration(value, "http2.budget_window", false)?;
        }
        let budgets = [
            (&raw.max_resets, "http2.max_resets", &mut limits.max_resets),
            (
                &raw.max_settings,
                "http2.max_settings",
                &mut limits.max_settings,
            ),
            (&raw.max_pings, "http2.max_pings", &mut limits.max_pings),
            (
                &raw.max_empty_frames,
                "http2.max_empty_frames",
                &mut limits.max_empty_frames,
            ),
        ];
        for (value, key, target) in budgets {
            if let Some(value) = value {
                *target = self.setting(value, key, BUDGET_HINT)?;
            }
        }
        if let Some(value) = &raw.max_upstream_streams {
            let bounds = 1..=MAX_UPSTREAM_STREAMS as i64;
            self.in_range(
                value,
                "http2.max_upstream_streams",
                *value.get_ref(),
                "",
                &bounds,
                "streams of one connection talking to upstreams (proxy, FastCGI, CGI) at once, \
                 each on its own upstream connection: 1 to 32",
            )?;
            http2.max_upstream_streams = usize::try_from(*value.get_ref()).unwrap_or(1);
        }
        Ok(http2)
    }

    /// A count from 1 to `u32::MAX`.
    fn setting(&self, value: &Spanned<i64>, key: &str, hint: &str) -> Loaded<u32> {
        let number = *value.get_ref();
        let bounds = 1..=i64::from(u32::MAX);
        self.in_range(value, key, number, "", &bounds, hint)?;
        Ok(u32::try_from(number).unwrap_or(u32::MAX))
    }

    /// A size (the file's size syntax) within `bounds`, all of which fit a `u32`.
    fn bounded_size(
        &self,
        value: &Spanned<Quantity>,
        key: &str,
        bounds: std::ops::RangeInclusive<u64>,
        hint: &str,
    ) -> Loaded<u32> {
        let size = self.size(value, key)?;
        self.in_range(value, key, size, " bytes", &bounds, hint)?;
        Ok(u32::try_from(size).unwrap_or(u32::MAX))
    }

    fn in_range<T: PartialOrd + Display, V>(
        &self,
        value: &Spanned<V>,
        key: &str,
        number: T,
        unit: &str,
        bounds: &std::ops::RangeInclusive<T>,
        hint: &str,
    ) -> Loaded<()> {
        let message = if number < *bounds.start() {
            format!("{number}{unit} is less than {}", bounds.start())
        } else if number > *bounds.end() {
            format!("{number}{unit} is more than {}", bounds.end())
        } else {
            return Ok(());
        };
        Err(self.hinted(value.span(), key, message, hint))
    }
}
