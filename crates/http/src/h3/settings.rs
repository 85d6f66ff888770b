//! The SETTINGS frame's payload (RFC 9114 §7.2.4): what each side tells the other once, first
//! on its control stream.
//!
//! Owns the identifiers, their validity and the payload coding. Must not know how a connection
//! acts on them (the QPACK limits in `qpack`, the field section limit in the request stream).

use super::error::{Error, ErrorCode};
use super::varint;

/// SETTINGS_QPACK_MAX_TABLE_CAPACITY (RFC 9204 §5).
pub const QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
/// SETTINGS_MAX_FIELD_SECTION_SIZE (RFC 9114 §7.2.4.1).
pub const MAX_FIELD_SECTION_SIZE: u64 = 0x06;
/// SETTINGS_QPACK_BLOCKED_STREAMS (RFC 9204 §5).
pub const QPACK_BLOCKED_STREAMS: u64 = 0x07;
/// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 9220 §3).
pub const ENABLE_CONNECT_PROTOCOL: u64 = 0x08;
/// SETTINGS_H3_DATAGRAM (RFC 9297 §2.1.1).
pub const H3_DATAGRAM: u64 = 0x33;

/// The identifiers HTTP/2 used that HTTP/3 reserves: receiving one is an error (§7.2.4.1).
const RESERVED_FROM_HTTP2: [u64; 5] = [0x00, 0x02, 0x03, 0x04, 0x05];

/// More identifiers than this in one frame is not a peer's configuration but an attack on the
/// duplicate check; every real stack sends fewer than ten.
const MAX_ENTRIES: usize = 64;

/// One side's settings. Absent settings take the defaults of their RFCs (all zero, false or
/// unlimited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub qpack_max_table_capacity: u64,
    /// `None`: unlimited (§7.2.4.1's default).
    pub max_field_section_size: Option<u64>,
    pub qpack_blocked_streams: u64,
    pub enable_connect_protocol: bool,
    pub h3_datagram: bool,
}

impl Settings {
    /// Reads a SETTINGS payload. Unknown identifiers, the reserved `0x1f * N + 0x21` ones among
    /// them, are ignored (§7.2.4).
    ///
    /// # Errors
    /// H3_SETTINGS_ERROR for an identifier sent twice, one HTTP/2 used, a boolean setting
    /// other than 0 or 1; H3_FRAME_ERROR for a payload that ends inside a pair (§7.1).
    pub fn decode(payload: &[u8]) -> Result<Settings, Error> {
        let mut settings = Settings::default();
        let mut seen = Vec::new();
        let mut at = 0;
        while at < payload.len() {
            let (Some(id), Some(value)) = (
                varint::decode(payload, &mut at),
                varint::decode(payload, &mut at),
            ) else {
                return Err(Error::connection(
                    ErrorCode::FrameError,
                    "a SETTINGS frame ends inside a setting",
                ));
            };
            if RESERVED_FROM_HTTP2.contains(&id) {
                return Err(Error::connection(
                    ErrorCode::SettingsError,
                    "an HTTP/2 setting in SETTINGS",
                ));
            }
            if seen.contains(&id) {
                return Err(Error::connection(
                    ErrorCode::SettingsError,
                    "a setting sent twice in SETTINGS",
                ));
            }
            if seen.len() == MAX_ENTRIES {
                return Err(Error::connection(
                    ErrorCode::ExcessiveLoad,
                    "too many settings in SETTINGS",
                ));
            }
            seen.push(id);
            match id {
                QPACK_MAX_TABLE_CAPACITY => settings.qpack_max_table_capacity = value,
                MAX_FIELD_SECTION_SIZE => settings.max_field_section_size = Some(value),
                QPACK_BLOCKED_STREAMS => settings.qpack_blocked_streams = value,
                ENABLE_CONNECT_PROTOCOL => settings.enable_connect_protocol = boolean(value)?,
                H3_DATAGRAM => settings.h3_datagram = boolean(value)?,
                _ => {}
            }
        }
        Ok(settings)
    }

    /// Appends the payload: every setting that differs from its default, in identifier order.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut pair = |id: u64, value: u64| {
            varint::encode(id, out);
            varint::encode(value, out);
        };
        if self.qpack_max_table_capacity != 0 {
            pair(QPACK_MAX_TABLE_CAPACITY, self.qpack_max_table_capacity);
        }
        if let Some(size) = self.max_field_section_size {
            pair(MAX_FIELD_SECTION_SIZE, size);
        }
        if self.qpack_blocked_streams != 0 {
            pair(QPACK_BLOCKED_STREAMS, self.qpack_blocked_streams);
        }
        if self.enable_connect_protocol {
            pair(ENABLE_CONNECT_PROTOCOL, 1);
        }
        if self.h3_datagram {
            pair(H3_DATAGRAM, 1);
        }
    }
}

fn boolean(value: u64) -> Result<bool, Error> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Error::connection(
            ErrorCode::SettingsError,
            "a boolean setting other than 0 or 1",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(pairs: &[(u64, u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(id, value) in pairs {
            varint::encode(id, &mut out);
            varint::encode(value, &mut out);
        }
        out
    }

    #[test]
    fn known_settings_are_read_and_unknown_ones_ignored() {
        let settings = Settings::decode(&payload(&[
            (QPACK_MAX_TABLE_CAPACITY, 4096),
            (0x21, 7),
            (MAX_FIELD_SECTION_SIZE, 16_384),
            (QPACK_BLOCKED_STREAMS, 100),
            (ENABLE_CONNECT_PROTOCOL, 1),
            (0x1f * 3 + 0x21, 0),
        ]))
        .unwrap();
        assert_eq!(
            settings,
            Settings {
                qpack_max_table_capacity: 4096,
                max_field_section_size: Some(16_384),
                qpack_blocked_streams: 100,
                enable_connect_protocol: true,
                h3_datagram: false,
            }
        );
        assert_eq!(Settings::decode(&[]), Ok(Settings::default()));
    }

    #[test]
    fn encoding_round_trips() {
        let settings = Settings {
            qpack_max_table_capacity: 4096,
            max_field_section_size: Some(65_536),
            qpack_blocked_streams: 16,
            enable_connect_protocol: false,
            h3_datagram: true,
        };
        let mut out = Vec::new();
        settings.encode(&mut out);
        assert_eq!(Settings::decode(&out), Ok(settings));
        let mut empty = Vec::new();
        Settings::default().encode(&mut empty);
        assert!(empty.is_empty());
    }

    #[test]
    fn invalid_settings_are_settings_errors() {
        for bad in [
            payload(&[(0x02, 0)]),
            payload(&[(0x04, 65_535)]),
            payload(&[(0x00, 1)]),
            payload(&[(MAX_FIELD_SECTION_SIZE, 1), (MAX_FIELD_SECTION_SIZE, 2)]),
            payload(&[(0x21, 1), (0x21, 1)]),
            payload(&[(ENABLE_CONNECT_PROTOCOL, 2)]),
        ] {
            let error = Settings::decode(&bad).unwrap_err();
            assert_eq!(error.code, ErrorCode::SettingsError, "{bad:?}");
        }
        let mut truncated = payload(&[(QPACK_BLOCKED_STREAMS, 100)]);
        truncated.pop();
        assert_eq!(
            Settings::decode(&truncated).unwrap_err().code,
            ErrorCode::FrameError
        );
        let many: Vec<(u64, u64)> = (0..100).map(|n| (0x100 + n, 0)).collect();
        assert_eq!(
            Settings::decode(&payload(&many)).unwrap_err().code,
            ErrorCode::ExcessiveLoad
        );
    }
}
