//! Response-head encoder: status line, header fields, the empty line (RFC 9112 §4, §5).
//!
//! Owns the wire format of response heads and a fast decimal formatter. Must not decide which
//! headers a response carries (the server's `respond` does) and must not allocate beyond the
//! caller's buffer.

/// The reason phrase for `status`, or `""` for codes without one (a reason phrase is optional
/// and clients ignore it, RFC 9112 §4).
#[must_use]
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// Appends `HTTP/1.1 <status> <reason>\r\n`. ampd always answers as HTTP/1.1, the highest
/// version it supports (RFC 9110 §6.2), whatever minor version the request used.
///
/// `status` must be a three-digit code (100..=999); larger values are written modulo 1000 so
/// the line stays well-formed.
#[inline]
pub fn write_status_line(buf: &mut Vec<u8>, status: u16) {
    debug_assert!(
        (100..=999).contains(&status),
        "status {status} is not 3 digits"
    );
    let status = status % 1000;
    let digits = [
        b'0' + (status / 100) as u8,
        b'0' + (status / 10 % 10) as u8,
        b'0' + (status % 10) as u8,
    ];
    buf.extend_from_slice(b"HTTP/1.1 ");
    buf.extend_from_slice(&digits);
    buf.push(b' ');
    buf.extend_from_slice(reason(status).as_bytes());
    buf.extend_from_slice(b"\r\n");
}

/// Appends `name: value\r\n`.
///
/// The caller guarantees `name` is a token and `value` holds no CR or LF; header values built
/// from request data must be validated first, or they become a response-splitting hole.
#[inline]
pub fn write_header(buf: &mut Vec<u8>, name: &str, value: &[u8]) {
    debug_assert!(!value.contains(&b'\r') && !value.contains(&b'\n'));
    buf.reserve(name.len() + value.len() + 4);
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b": ");
    buf.extend_from_slice(value);
    buf.extend_from_slice(b"\r\n");
}

/// Appends `Content-Length: n\r\n`.
#[inline]
pub fn write_content_length(buf: &mut Vec<u8>, n: u64) {
    buf.extend_from_slice(b"Content-Length: ");
    write_decimal(buf, n);
    buf.extend_from_slice(b"\r\n");
}

/// Appends the empty line that ends the head.
#[inline]
pub fn end_head(buf: &mut Vec<u8>) {
    buf.extend_from_slice(b"\r\n");
}

/// Appends `n` in decimal. Two digits per step from a table, as `itoa` does: formatting
/// Content-Length and Content-Range runs on every response, and `format!` goes through
/// `fmt::Formatter` and its dynamic dispatch.
#[inline]
pub fn write_decimal(buf: &mut Vec<u8>, mut n: u64) {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
                                2021222324252627282930313233343536373839\
                                4041424344454647484950515253545556575859\
                                6061626364656667686970717273747576777879\
                                8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + n as u8;
    }
    buf.extend_from_slice(&digits[at..]);
}

/// How many bytes `write_decimal(n)` appends; lets multipart bodies be sized without
/// formatting them.
#[inline]
#[must_use]
pub fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn status_lines() {
        let mut buf = Vec::new();
        write_status_line(&mut buf, 206);
        write_status_line(&mut buf, 299);
        assert_eq!(buf, b"HTTP/1.1 206 Partial Content\r\nHTTP/1.1 299 \r\n");
    }

    #[test]
    fn a_whole_head() {
        let mut buf = Vec::new();
        write_status_line(&mut buf, 404);
        write_header(&mut buf, "Content-Type", b"text/plain");
        write_content_length(&mut buf, 0);
        end_head(&mut buf);
        assert_eq!(
            buf,
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n"
        );
    }

    #[test]
    fn decimal_edges() {
        for n in [0, 9, 10, 99, 100, 101, 999, 1000, u64::MAX] {
            let mut buf = Vec::new();
            write_decimal(&mut buf, n);
            assert_eq!(buf, n.to_string().as_bytes());
            assert_eq!(decimal_len(n), buf.len());
        }
    }

    proptest! {
        #[test]
        fn decimal_matches_std(n in any::<u64>()) {
            let mut buf = Vec::new();
            write_decimal(&mut buf, n);
            let expected = n.to_string();
            prop_assert_eq!(&buf[..], expected.as_bytes());
            prop_assert_eq!(decimal_len(n), buf.len());
        }
    }
}
