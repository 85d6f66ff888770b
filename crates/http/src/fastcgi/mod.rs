//! The FastCGI 1.0 record protocol, client side (the FastCGI Specification, Open Market, 1996):
//! what ampd writes to an application (php-fpm, a flup application) and how it reads what
//! comes back.
//!
//! Owns the wire format: records (§3.3), name-value pairs (§3.4), the management records
//! (§4) and the request records (§5). Must not touch sockets, clocks, configuration or the
//! response head inside STDOUT (`crate::cgi` parses that): the server's FastCGI exchange feeds
//! bytes in and writes the bytes out.
//!
//! * `record.rs`: [`RecordType`], the 8-byte [`RecordHeader`], [`write_record`].
//! * `write.rs`: the request side's writers ([`write_begin_request`], [`write_params`],
//!   [`write_stdin`], ...) and the application side's, which tests and probes' peers use.
//! * `name_value.rs`: [`encode_name_value`], [`decode_name_values`].
//! * `reader.rs`: [`RecordReader`], the streaming reader of an application's records.
//! * `error.rs`: [`FastCgiError`]; every variant means the application broke the protocol.

mod error;
mod name_value;
mod reader;
mod record;
mod write;

pub use error::FastCgiError;
pub use name_value::{decode_name_values, encode_name_value, NameValues, MAX_NAME_VALUE_LEN};
pub use reader::{Event, RecordReader};
pub use record::{write_record, RecordHeader, RecordType, HEADER_LEN, VERSION_1};
pub use write::{
    write_abort_request, write_begin_request, write_end_request, write_get_values,
    write_get_values_result, write_params, write_stdin, write_stream,
};

/// The largest content one record carries: its length is a 16-bit field (§3.3).
pub const MAX_CONTENT: usize = 65535;

/// The management variable names of §4.1, for [`write_get_values`].
pub const MAX_CONNS: &[u8] = b"FCGI_MAX_CONNS";
/// The most concurrent requests the application accepts (§4.1).
pub const MAX_REQS: &[u8] = b"FCGI_MAX_REQS";
/// `"1"` when the application multiplexes requests on one connection (§4.1).
pub const MPXS_CONNS: &[u8] = b"FCGI_MPXS_CONNS";

/// The role asked for in `FCGI_BEGIN_REQUEST` (§6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Responder,
    Authorizer,
    Filter,
}

impl Role {
    /// The role's number on the wire (§5.1: `FCGI_RESPONDER` is 1).
    #[must_use]
    pub fn code(self) -> u16 {
        match self {
            Self::Responder => 1,
            Self::Authorizer => 2,
            Self::Filter => 3,
        }
    }
}

/// `protocolStatus` of `FCGI_END_REQUEST` (§5.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolStatus {
    /// The request ended normally.
    RequestComplete,
    /// The application does not multiplex and another request is running on the connection.
    CantMpxConn,
    /// The application is out of a resource (workers, database connections).
    Overloaded,
    /// The application does not play the role asked for.
    UnknownRole,
    /// A value the specification does not define.
    Other(u8),
}

impl ProtocolStatus {
    /// The status for its wire byte.
    #[must_use]
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => Self::RequestComplete,
            1 => Self::CantMpxConn,
            2 => Self::Overloaded,
            3 => Self::UnknownRole,
            other => Self::Other(other),
        }
    }

    /// Its wire byte.
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            Self::RequestComplete => 0,
            Self::CantMpxConn => 1,
            Self::Overloaded => 2,
            Self::UnknownRole => 3,
            Self::Other(code) => code,
        }
    }
}

/// The body of `FCGI_END_REQUEST` (§5.5): the application's exit status (what a CGI
/// program's `exit` would have been) and how the request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndRequest {
    pub app_status: u32,
    pub protocol_status: ProtocolStatus,
}
