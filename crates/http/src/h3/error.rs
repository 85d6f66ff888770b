//! HTTP/3's error codes (RFC 9114 §8.1) and QPACK's (RFC 9204 §6), and the typed error a
//! connection or a stream ends with.

/// An HTTP/3 or QPACK application error code, as CONNECTION_CLOSE, RESET_STREAM and
/// STOP_SENDING carry it. Unknown codes received are kept as `Other` and treated as
/// `NoError`'s peers: RFC 9114 §9 says they carry no special meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    NoError,
    GeneralProtocolError,
    InternalError,
    StreamCreationError,
    ClosedCriticalStream,
    FrameUnexpected,
    FrameError,
    ExcessiveLoad,
    IdError,
    SettingsError,
    MissingSettings,
    RequestRejected,
    RequestCancelled,
    RequestIncomplete,
    MessageError,
    ConnectError,
    VersionFallback,
    QpackDecompressionFailed,
    QpackEncoderStreamError,
    QpackDecoderStreamError,
    Other(u64),
}

impl ErrorCode {
    /// The code's value on the wire.
    #[must_use]
    pub fn code(self) -> u64 {
        match self {
            ErrorCode::NoError => 0x100,
            ErrorCode::GeneralProtocolError => 0x101,
            ErrorCode::InternalError => 0x102,
            ErrorCode::StreamCreationError => 0x103,
            ErrorCode::ClosedCriticalStream => 0x104,
            ErrorCode::FrameUnexpected => 0x105,
            ErrorCode::FrameError => 0x106,
            ErrorCode::ExcessiveLoad => 0x107,
            ErrorCode::IdError => 0x108,
            ErrorCode::SettingsError => 0x109,
            ErrorCode::MissingSettings => 0x10a,
            ErrorCode::RequestRejected => 0x10b,
            ErrorCode::RequestCancelled => 0x10c,
            ErrorCode::RequestIncomplete => 0x10d,
            ErrorCode::MessageError => 0x10e,
            ErrorCode::ConnectError => 0x10f,
            ErrorCode::VersionFallback => 0x110,
            ErrorCode::QpackDecompressionFailed => 0x200,
            ErrorCode::QpackEncoderStreamError => 0x201,
            ErrorCode::QpackDecoderStreamError => 0x202,
            ErrorCode::Other(code) => code,
        }
    }

    /// The code a wire value names.
    #[must_use]
    pub fn from_code(code: u64) -> ErrorCode {
        const KNOWN: [ErrorCode; 20] = [
            ErrorCode::NoError,
            ErrorCode::GeneralProtocolError,
            ErrorCode::InternalError,
            ErrorCode::StreamCreationError,
            ErrorCode::ClosedCriticalStream,
            ErrorCode::FrameUnexpected,
            ErrorCode::FrameError,
            ErrorCode::ExcessiveLoad,
            ErrorCode::IdError,
            ErrorCode::SettingsError,
            ErrorCode::MissingSettings,
            ErrorCode::RequestRejected,
            ErrorCode::RequestCancelled,
            ErrorCode::RequestIncomplete,
            ErrorCode::MessageError,
            ErrorCode::ConnectError,
            ErrorCode::VersionFallback,
            ErrorCode::QpackDecompressionFailed,
            ErrorCode::QpackEncoderStreamError,
            ErrorCode::QpackDecoderStreamError,
        ];
        KNOWN
            .into_iter()
            .find(|known| known.code() == code)
            .unwrap_or(ErrorCode::Other(code))
    }
}

/// Why a connection (`Scope::Connection`: CONNECTION_CLOSE) or one request stream
/// (`Scope::Stream`: RESET_STREAM / STOP_SENDING, the connection goes on) ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: ErrorCode,
    pub scope: Scope,
    /// What was wrong, for the error log and the close frame's reason phrase.
    pub reason: &'static str,
}

/// What an error ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Connection,
    Stream,
}

impl Error {
    #[must_use]
    pub const fn connection(code: ErrorCode, reason: &'static str) -> Error {
        Error {
            code,
            scope: Scope::Connection,
            reason,
        }
    }

    #[must_use]
    pub const fn stream(code: ErrorCode, reason: &'static str) -> Error {
        Error {
            code,
            scope: Scope::Stream,
            reason,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} ({:#x}): {}",
            self.code,
            self.code.code(),
            self.reason
        )
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_unknown_ones_are_kept() {
        for code in (0x100..=0x110).chain(0x200..=0x202) {
            let named = ErrorCode::from_code(code);
            assert!(!matches!(named, ErrorCode::Other(_)), "{code:#x}");
            assert_eq!(named.code(), code);
        }
        // A reserved (greasing) code: 0x1f * N + 0x21 (RFC 9114 §8.1).
        assert_eq!(ErrorCode::from_code(0x21), ErrorCode::Other(0x21));
        assert_eq!(ErrorCode::from_code(0x21).code(), 0x21);
    }
}
