//! Why an application's FastCGI records were refused.
//!
//! Owns `FastCgiError`. Must not decide what the client sees: every variant means the
//! application broke the protocol (or is not a FastCGI application), so the caller answers
//! `502 Bad Gateway` when no response head was sent yet, logs the
//! [`Display`](std::fmt::Display) text with the application's name, and closes the connection
//! (its byte stream can no longer be trusted).

use std::fmt;

/// A fault in the records an application sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FastCgiError {
    /// A record header whose version is not `FCGI_VERSION_1`: not FastCGI (an HTTP server
    /// answering `HTTP/1.1 ...` lands here on its first byte).
    Version(u8),
    /// A request record for another request than the one the connection carries (ampd never
    /// multiplexes), a request record with id 0, or a management record with an id.
    RequestId(u16),
    /// A record type that only a web server sends (`FCGI_BEGIN_REQUEST`, `FCGI_PARAMS`,
    /// `FCGI_STDIN`, `FCGI_DATA`, `FCGI_ABORT_REQUEST`, `FCGI_GET_VALUES`).
    UnexpectedType(u8),
    /// A record type the specification does not define.
    UnknownType(u8),
    /// `FCGI_UNKNOWN_TYPE` (§4.2): the application did not understand the management record
    /// of this type that ampd sent. ampd sends only `FCGI_GET_VALUES`, which every
    /// application must understand, so this is an answer the caller cannot use.
    ManagementTypeRefused(u8),
    /// An `FCGI_END_REQUEST` whose body is not 8 bytes (§5.5), or an `FCGI_UNKNOWN_TYPE`
    /// without its body.
    BadEndRequest,
    /// A record for the request after its `FCGI_END_REQUEST`.
    AfterEnd,
    /// Content on `FCGI_STDOUT` or `FCGI_STDERR` after the empty record that closed it (§3.3:
    /// a stream ends with an empty record).
    AfterStreamEnd,
    /// Name-value pairs whose lengths run past the record (§3.4).
    NameValue,
}

impl fmt::Display for FastCgiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Version(version) => {
                write!(
                    f,
                    "FastCGI record of version {version}, not 1 (not FastCGI?)"
                )
            }
            Self::RequestId(id) => write!(f, "FastCGI record for request id {id}, not ours"),
            Self::UnexpectedType(code) => {
                write!(
                    f,
                    "FastCGI record of type {code}, which only a web server sends"
                )
            }
            Self::UnknownType(code) => write!(f, "FastCGI record of unknown type {code}"),
            Self::ManagementTypeRefused(code) => write!(
                f,
                "FastCGI application answered FCGI_UNKNOWN_TYPE to management record type {code}"
            ),
            Self::BadEndRequest => {
                f.write_str("malformed FCGI_END_REQUEST or FCGI_UNKNOWN_TYPE body")
            }
            Self::AfterEnd => f.write_str("FastCGI record after FCGI_END_REQUEST"),
            Self::AfterStreamEnd => {
                f.write_str("FastCGI stdout or stderr content after the stream's end")
            }
            Self::NameValue => f.write_str("malformed FastCGI name-value pairs"),
        }
    }
}

impl std::error::Error for FastCgiError {}
