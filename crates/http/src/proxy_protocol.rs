//! The PROXY protocol header (haproxy's "The PROXY protocol", versions 1 and 2): what a load
//! balancer sends first on a connection to say which client it carries.
//!
//! Owns: recognising and validating a v1 (text) or v2 (binary) header at the start of a
//! connection's bytes, and what it says (`Origin`). Sans-I/O and resumable: `parse` is given
//! everything received so far and answers `Partial` until the header is whole; it is re-run on
//! the growing prefix, which is cheap because a header is bounded (`V1_MAX` bytes, or
//! `V2_FIXED + V2_MAX_PAYLOAD`). Input that can no longer become a header is refused as soon as
//! the byte that rules it out arrives, so a client that is not a balancer costs one read.
//! Must not touch: trust (which peers may send a header is the server's decision), sockets.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest v1 header, `CRLF` included (spec §2.1: 107 bytes, `UNKNOWN` followed by the
/// longest TCP6 addresses and ports).
pub const V1_MAX: usize = 107;
/// The v2 signature (spec §2.2), chosen to be invalid as the start of any text protocol.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// Signature, version/command, family/protocol and the 2-byte length.
pub const V2_FIXED: usize = 16;
/// The most address and TLV bytes accepted after the fixed part. The spec allows 65,535; a
/// balancer's TLVs (ALPN, authority, a VPC endpoint id, SSL details) take a few hundred, and a
/// bound keeps a client from making the server buffer 64 KiB before its first request.
pub const V2_MAX_PAYLOAD: usize = 2048;

const V1_PREFIX: &[u8] = b"PROXY ";

/// Where the connection came from, as the header tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The balancer forwards a TCP connection from `source` (the client) to `destination`.
    Forwarded {
        source: SocketAddr,
        destination: SocketAddr,
    },
    /// The header carries no client address the server can use: v2 `LOCAL` (the balancer's
    /// own health checks), v1 `UNKNOWN`, or a v2 family without IP addresses (`UNSPEC`,
    /// `UNIX`). The connection's real peer stands for the client (spec §2.1, §2.2).
    Unspecified,
}

/// A whole header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyHeader {
    /// 1 (text) or 2 (binary).
    pub version: u8,
    pub origin: Origin,
}

/// What the bytes received so far amount to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parse {
    /// A valid beginning: more bytes are needed.
    Partial,
    /// A header of `len` bytes; the connection's own protocol starts after it.
    Complete { header: ProxyHeader, len: usize },
}

/// Why the bytes are not a PROXY header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyError {
    /// Neither the v1 `PROXY ` nor the v2 signature.
    NotProxy,
    /// v1 without `CRLF` within `V1_MAX` bytes.
    V1TooLong,
    /// v1 line that does not follow the grammar (protocol, addresses, ports, single spaces).
    V1Malformed,
    /// v2 version nibble other than 2.
    V2Version,
    /// v2 command other than `LOCAL` or `PROXY`.
    V2Command,
    /// v2 family or transport that is not defined, or not TCP for a forwarded connection.
    V2Family,
    /// v2 length past `V2_MAX_PAYLOAD`.
    V2TooLong,
    /// v2 length too short for the addresses of its family, or TLVs that overrun it.
    V2Malformed,
}

impl fmt::Display for ProxyError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            ProxyError::NotProxy => "no PROXY protocol header",
            ProxyError::V1TooLong => "PROXY v1 header longer than 107 bytes",
            ProxyError::V1Malformed => "malformed PROXY v1 header",
            ProxyError::V2Version => "PROXY v2 header with an unknown version",
            ProxyError::V2Command => "PROXY v2 header with an unknown command",
            ProxyError::V2Family => "PROXY v2 header with an unsupported family or transport",
            ProxyError::V2TooLong => "PROXY v2 header longer than ampd accepts",
            ProxyError::V2Malformed => "malformed PROXY v2 addresses or TLVs",
        })
    }
}

impl std::error::Error for ProxyError {}

/// Parse the header at the start of `input` (everything the connection has sent so far).
///
/// # Errors
/// The bytes cannot begin a valid v1 or v2 header; the caller closes the connection (there is
/// no protocol yet in which to answer).
pub fn parse(input: &[u8]) -> Result<Parse, ProxyError> {
    if input.is_empty() {
        return Ok(Parse::Partial);
    }
    if is_prefix_of(input, V1_PREFIX) || input.starts_with(V1_PREFIX) {
        parse_v1(input)
    } else if is_prefix_of(input, &V2_SIGNATURE) || input.starts_with(&V2_SIGNATURE) {
        parse_v2(input)
    } else {
        Err(ProxyError::NotProxy)
    }
}

/// `input` is shorter than `whole` and matches its beginning.
fn is_prefix_of(input: &[u8], whole: &[u8]) -> bool {
    input.len() < whole.len() && whole.starts_with(input)
}

fn parse_v1(input: &[u8]) -> Result<Parse, ProxyError> {
    let window = &input[..input.len().min(V1_MAX)];
    // The line ends at the first CR, which must be followed by LF; a bare LF is refused too.
    let Some(end) = window.iter().position(|&b| b == b'\r' || b == b'\n') else {
        if window.len() >= V1_MAX {
            return Err(ProxyError::V1TooLong);
        }
        check_v1_prefix(window)?;
        return Ok(Parse::Partial);
    };
    if window[end] != b'\r' {
        return Err(ProxyError::V1Malformed);
    }
    match window.get(end + 1) {
        None if end + 1 < V1_MAX => {
            check_v1_prefix(&window[..end])?;
            return Ok(Parse::Partial);
        }
        Some(b'\n') => {}
        _ => return Err(ProxyError::V1Malformed),
    }
    let origin = v1_line(&window[V1_PREFIX.len().min(end)..end])?;
    Ok(Parse::Complete {
        header: ProxyHeader { version: 1, origin },
        len: end + 2,
    })
}

/// Refuse a partial v1 line early when what has arrived already breaks the grammar.
fn check_v1_prefix(partial: &[u8]) -> Result<(), ProxyError> {
    let Some(rest) = partial.get(V1_PREFIX.len()..) else {
        return Ok(());
    };
    let word_end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
    let word = &rest[..word_end];
    let known = [&b"TCP4"[..], b"TCP6", b"UNKNOWN"];
    let fits = if word_end == rest.len() {
        known.iter().any(|name| name.starts_with(word))
    } else {
        known.contains(&word)
    };
    let printable = rest.iter().all(|&b| (0x20..0x7f).contains(&b));
    if fits && printable {
        Ok(())
    } else {
        Err(ProxyError::V1Malformed)
    }
}

/// `TCP4 src dst sport dport`, `TCP6 ...`, or `UNKNOWN` with anything after it.
fn v1_line(line: &[u8]) -> Result<Origin, ProxyError> {
    if !line.iter().all(|&b| (0x20..0x7f).contains(&b)) {
        return Err(ProxyError::V1Malformed);
    }
    let text = std::str::from_utf8(line).map_err(|_| ProxyError::V1Malformed)?;
    if text == "UNKNOWN" || text.starts_with("UNKNOWN ") {
        // Spec §2.1: the receiver ignores what follows UNKNOWN and uses the real peer.
        return Ok(Origin::Unspecified);
    }
    let fields: Vec<&str> = text.split(' ').collect();
    let [protocol, source, destination, source_port, destination_port] = fields[..] else {
        return Err(ProxyError::V1Malformed);
    };
    let (source, destination) = match protocol {
        "TCP4" => (
            IpAddr::V4(v1_ipv4(source)?),
            IpAddr::V4(v1_ipv4(destination)?),
        ),
        "TCP6" => (
            IpAddr::V6(v1_ipv6(source)?),
            IpAddr::V6(v1_ipv6(destination)?),
        ),
        _ => return Err(ProxyError::V1Malformed),
    };
    Ok(Origin::Forwarded {
        source: SocketAddr::new(source, v1_port(source_port)?),
        destination: SocketAddr::new(destination, v1_port(destination_port)?),
    })
}

/// Dotted quad, four decimal bytes without leading zeros (Rust's parser is that strict).
fn v1_ipv4(text: &str) -> Result<Ipv4Addr, ProxyError> {
    text.parse().map_err(|_| ProxyError::V1Malformed)
}

/// RFC 4291 text form; an IPv4-mapped form is still an IPv6 address here.
fn v1_ipv6(text: &str) -> Result<Ipv6Addr, ProxyError> {
    if text.contains('%') {
        // Zone identifiers mean nothing across hosts.
        return Err(ProxyError::V1Malformed);
    }
    text.parse().map_err(|_| ProxyError::V1Malformed)
}

/// Decimal 0..=65535, digits only, no leading zero (spec §2.1).
fn v1_port(text: &str) -> Result<u16, ProxyError> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = text.len() > 1 && text.starts_with('0');
    if !digits_only || leading_zero || text.len() > 5 {
        return Err(ProxyError::V1Malformed);
    }
    text.parse().map_err(|_| ProxyError::V1Malformed)
}

const COMMAND_LOCAL: u8 = 0x0;
const COMMAND_PROXY: u8 = 0x1;
const FAMILY_UNSPEC: u8 = 0x0;
const FAMILY_INET: u8 = 0x1;
const FAMILY_INET6: u8 = 0x2;
const FAMILY_UNIX: u8 = 0x3;
const TRANSPORT_UNSPEC: u8 = 0x0;
const TRANSPORT_STREAM: u8 = 0x1;
const TRANSPORT_DGRAM: u8 = 0x2;
/// Address block sizes of the families (spec §2.2).
const INET_ADDRESSES: usize = 12;
const INET6_ADDRESSES: usize = 36;
const UNIX_ADDRESSES: usize = 216;

fn parse_v2(input: &[u8]) -> Result<Parse, ProxyError> {
    if let Some(&version_command) = input.get(12) {
        if version_command >> 4 != 2 {
            return Err(ProxyError::V2Version);
        }
        if !matches!(version_command & 0x0f, COMMAND_LOCAL | COMMAND_PROXY) {
            return Err(ProxyError::V2Command);
        }
    }
    if let Some(&family_transport) = input.get(13) {
        let family = family_transport >> 4;
        let transport = family_transport & 0x0f;
        if family > FAMILY_UNIX || transport > TRANSPORT_DGRAM {
            return Err(ProxyError::V2Family);
        }
    }
    let Some(length) = input.get(14..16) else {
        return Ok(Parse::Partial);
    };
    let length = usize::from(u16::from_be_bytes([length[0], length[1]]));
    if length > V2_MAX_PAYLOAD {
        return Err(ProxyError::V2TooLong);
    }
    let Some(payload) = input.get(V2_FIXED..V2_FIXED + length) else {
        return Ok(Parse::Partial);
    };
    let origin = v2_origin(input[12] & 0x0f, input[13], payload)?;
    Ok(Parse::Complete {
        header: ProxyHeader { version: 2, origin },
        len: V2_FIXED + length,
    })
}

fn v2_origin(command: u8, family_transport: u8, payload: &[u8]) -> Result<Origin, ProxyError> {
    let family = family_transport >> 4;
    let transport = family_transport & 0x0f;
    let addresses = match family {
        FAMILY_INET => INET_ADDRESSES,
        FAMILY_INET6 => INET6_ADDRESSES,
        FAMILY_UNIX => UNIX_ADDRESSES,
        _ => 0,
    };
    if command == COMMAND_LOCAL {
        // Spec §2.2: a LOCAL connection was made by the balancer itself; the receiver skips
        // the whole payload, whatever it holds, and uses the real endpoints.
        return Ok(Origin::Unspecified);
    }
    if payload.len() < addresses {
        return Err(ProxyError::V2Malformed);
    }
    check_tlvs(&payload[addresses..])?;
    let ip_family = matches!(family, FAMILY_INET | FAMILY_INET6);
    if ip_family && transport != TRANSPORT_STREAM {
        // HTTP runs over TCP; a UDP or unspecified transport is not what is being carried.
        return Err(ProxyError::V2Family);
    }
    if family == FAMILY_UNSPEC && transport != TRANSPORT_UNSPEC {
        return Err(ProxyError::V2Family);
    }
    let port = |at: usize| u16::from_be_bytes([payload[at], payload[at + 1]]);
    Ok(match family {
        FAMILY_INET => {
            let ip = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    payload[at],
                    payload[at + 1],
                    payload[at + 2],
                    payload[at + 3],
                ))
            };
            Origin::Forwarded {
                source: SocketAddr::new(ip(0), port(8)),
                destination: SocketAddr::new(ip(4), port(10)),
            }
        }
        FAMILY_INET6 => {
            let ip = |at: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&payload[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            Origin::Forwarded {
                source: SocketAddr::new(ip(0), port(32)),
                destination: SocketAddr::new(ip(16), port(34)),
            }
        }
        // UNIX sockets have paths, not IP addresses; UNSPEC carries nothing (spec §2.2:
        // the receiver may accept these and use the real endpoints).
        _ => Origin::Unspecified,
    })
}

/// TLVs (type, 2-byte length, value) must tile the rest of the payload exactly; their contents
/// are not used.
fn check_tlvs(mut tlvs: &[u8]) -> Result<(), ProxyError> {
    while !tlvs.is_empty() {
        let Some(length) = tlvs.get(1..3) else {
            return Err(ProxyError::V2Malformed);
        };
        let end = 3 + usize::from(u16::from_be_bytes([length[0], length[1]]));
        if end > tlvs.len() {
            return Err(ProxyError::V2Malformed);
        }
        tlvs = &tlvs[end..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(input: &[u8]) -> (ProxyHeader, usize) {
        match parse(input) {
            Ok(Parse::Complete { header, len }) => (header, len),
            other => panic!("{input:?}: expected a complete header, got {other:?}"),
        }
    }

    fn forwarded(source: &str, destination: &str) -> Origin {
        Origin::Forwarded {
            source: source.parse().unwrap(),
            destination: destination.parse().unwrap(),
        }
    }

    /// Every strict prefix of a valid header is `Partial`, never an error.
    fn every_prefix_is_partial(input: &[u8], len: usize) {
        for end in 0..len {
            assert_eq!(
                parse(&input[..end]),
                Ok(Parse::Partial),
                "prefix of {end} bytes of {input:?}"
            );
        }
    }

    #[test]
    fn v1_examples_of_the_spec() {
        let tcp4 = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n";
        let (header, len) = complete(tcp4);
        assert_eq!(len, 47);
        assert_eq!(header.version, 1);
        assert_eq!(
            header.origin,
            forwarded("192.168.0.1:56324", "192.168.0.11:443")
        );
        every_prefix_is_partial(tcp4, len);

        let tcp6 = b"PROXY TCP6 2001:db8::1 ::1 65535 0\r\n";
        let (header, len) = complete(tcp6);
        assert_eq!(len, tcp6.len());
        assert_eq!(header.origin, forwarded("[2001:db8::1]:65535", "[::1]:0"));

        assert_eq!(complete(b"PROXY UNKNOWN\r\n").0.origin, Origin::Unspecified);
        // "the receiver must ignore anything presented before the CRLF"
        let unknown = b"PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n";
        assert_eq!(complete(unknown).0.origin, Origin::Unspecified);
    }

    #[test]
    fn v1_longest_header_fits_and_one_more_byte_does_not() {
        // Spec §2.1's worst case: UNKNOWN followed by the longest TCP6 fields.
        let longest = b"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
        assert_eq!(longest.len(), V1_MAX);
        assert_eq!(complete(longest).1, V1_MAX);
        let tcp6 = b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff \
ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
        assert_eq!(complete(tcp6).1, tcp6.len());
        let mut unknown = b"PROXY UNKNOWN ".to_vec();
        unknown.resize(V1_MAX, b'x');
        assert_eq!(parse(&unknown), Err(ProxyError::V1TooLong));
    }

    #[test]
    fn v1_malformed_lines_are_refused() {
        for bad in [
            &b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\n"[..],
            b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\rX",
            b"PROXY TCP4 192.168.0.1  192.168.0.11 56324 443\r\n",
            b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443 \r\n",
            b"PROXY TCP4 192.168.0.1 192.168.0.11 56324\r\n",
            b"PROXY TCP4 192.168.0.1 192.168.0.11 056324 443\r\n",
            b"PROXY TCP4 192.168.0.1 192.168.0.11 65536 443\r\n",
            b"PROXY TCP4 192.168.0.1 192.168.0.11 +5 443\r\n",
            b"PROXY TCP4 192.168.000.1 192.168.0.11 1 443\r\n",
            b"PROXY TCP4 192.168.0.256 192.168.0.11 1 443\r\n",
            b"PROXY TCP4 ::1 ::1 1 443\r\n",
            b"PROXY TCP6 192.168.0.1 ::1 1 443\r\n",
            b"PROXY TCP6 fe80::1%eth0 ::1 1 443\r\n",
            b"PROXY UDP4 192.168.0.1 192.168.0.11 1 443\r\n",
            b"PROXY tcp4 192.168.0.1 192.168.0.11 1 443\r\n",
            b"PROXY \r\n",
            b"PROXY UNKNOWN \x01\r\n",
        ] {
            assert!(
                matches!(parse(bad), Err(ProxyError::V1Malformed)),
                "{:?} gave {:?}",
                String::from_utf8_lossy(bad),
                parse(bad)
            );
        }
    }

    #[test]
    fn not_a_header_is_refused_at_its_first_wrong_byte() {
        assert_eq!(parse(b"G"), Err(ProxyError::NotProxy));
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), Err(ProxyError::NotProxy));
        assert_eq!(parse(b"PROXX"), Err(ProxyError::NotProxy));
        assert_eq!(parse(b"PROXY\r\n"), Err(ProxyError::NotProxy));
        assert_eq!(parse(b"\r\n\r\n\0\r\nQUIT\r"), Err(ProxyError::NotProxy));
        assert_eq!(parse(b"PROXY TCP5"), Err(ProxyError::V1Malformed));
        assert_eq!(parse(b"PROXY TCP4 1.2.3.4\0"), Err(ProxyError::V1Malformed));
        assert_eq!(parse(b"P"), Ok(Parse::Partial));
        assert_eq!(parse(b"PROXY TC"), Ok(Parse::Partial));
        assert_eq!(parse(b"\r\n\r\n"), Ok(Parse::Partial));
    }

    fn v2(command: u8, family_transport: u8, payload: &[u8]) -> Vec<u8> {
        let mut header = V2_SIGNATURE.to_vec();
        header.push(0x20 | command);
        header.push(family_transport);
        header.extend_from_slice(&u16::try_from(payload.len()).unwrap().to_be_bytes());
        header.extend_from_slice(payload);
        header
    }

    fn inet_payload() -> Vec<u8> {
        let mut payload = vec![10, 1, 2, 3, 127, 0, 0, 1];
        payload.extend_from_slice(&40000u16.to_be_bytes());
        payload.extend_from_slice(&80u16.to_be_bytes());
        payload
    }

    #[test]
    fn v2_inet_and_inet6_carry_the_client() {
        let mut input = v2(COMMAND_PROXY, 0x11, &inet_payload());
        input.extend_from_slice(b"GET / HTTP/1.1\r\n");
        let (header, len) = complete(&input);
        assert_eq!(len, 28);
        assert_eq!(header.version, 2);
        assert_eq!(header.origin, forwarded("10.1.2.3:40000", "127.0.0.1:80"));
        every_prefix_is_partial(&input, len);

        let mut payload = Vec::new();
        payload.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
        payload.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        payload.extend_from_slice(&[0x1f, 0x90, 0x00, 0x50]);
        let (header, len) = complete(&v2(COMMAND_PROXY, 0x21, &payload));
        assert_eq!(len, 16 + 36);
        assert_eq!(header.origin, forwarded("[2001:db8::7]:8080", "[::1]:80"));
    }

    #[test]
    fn v2_local_unspec_and_unix_use_the_real_peer() {
        // haproxy's health checks: LOCAL, UNSPEC, no payload.
        assert_eq!(
            complete(&v2(COMMAND_LOCAL, 0x00, &[])).0.origin,
            Origin::Unspecified
        );
        // LOCAL may still carry addresses; they are skipped.
        assert_eq!(
            complete(&v2(COMMAND_LOCAL, 0x11, &inet_payload())).0.origin,
            Origin::Unspecified
        );
        assert_eq!(
            complete(&v2(COMMAND_PROXY, 0x00, &[])).0.origin,
            Origin::Unspecified
        );
        let unix = vec![0u8; UNIX_ADDRESSES];
        assert_eq!(
            complete(&v2(COMMAND_PROXY, 0x31, &unix)).0,
            ProxyHeader {
                version: 2,
                origin: Origin::Unspecified
            }
        );
    }

    #[test]
    fn v2_tlvs_are_skipped_and_bounded() {
        let mut payload = inet_payload();
        // PP2_TYPE_ALPN "h2", then PP2_TYPE_AUTHORITY "example.com", then an empty NOOP.
        payload.extend_from_slice(&[0x01, 0x00, 0x02, b'h', b'2']);
        payload.extend_from_slice(&[0x02, 0x00, 0x0b]);
        payload.extend_from_slice(b"example.com");
        payload.extend_from_slice(&[0x04, 0x00, 0x00]);
        let (header, len) = complete(&v2(COMMAND_PROXY, 0x11, &payload));
        assert_eq!(len, 16 + payload.len());
        assert_eq!(header.origin, forwarded("10.1.2.3:40000", "127.0.0.1:80"));

        let mut overrun = inet_payload();
        overrun.extend_from_slice(&[0x01, 0x00, 0x09, b'h']);
        assert_eq!(
            parse(&v2(COMMAND_PROXY, 0x11, &overrun)),
            Err(ProxyError::V2Malformed)
        );
        let mut stub = inet_payload();
        stub.extend_from_slice(&[0x01, 0x00]);
        assert_eq!(
            parse(&v2(COMMAND_PROXY, 0x11, &stub)),
            Err(ProxyError::V2Malformed)
        );

        // The length alone refuses a huge header before its payload arrives.
        let mut huge = V2_SIGNATURE.to_vec();
        huge.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert_eq!(parse(&huge), Err(ProxyError::V2TooLong));
    }

    #[test]
    fn v2_malformed_headers_are_refused() {
        let payload = inet_payload();
        let mut bad_version = v2(COMMAND_PROXY, 0x11, &payload);
        bad_version[12] = 0x11;
        assert_eq!(parse(&bad_version), Err(ProxyError::V2Version));
        assert_eq!(parse(&bad_version[..13]), Err(ProxyError::V2Version));
        assert_eq!(parse(&v2(0x2, 0x11, &payload)), Err(ProxyError::V2Command));
        assert_eq!(
            parse(&v2(COMMAND_PROXY, 0x41, &payload)),
            Err(ProxyError::V2Family)
        );
        assert_eq!(
            parse(&v2(COMMAND_PROXY, 0x13, &payload)),
            Err(ProxyError::V2Family)
        );
        // UDP over IPv4 is not a TCP connection.
        assert_eq!(
            parse(&v2(COMMAND_PROXY, 0x12, &payload)),
            Err(ProxyError::V2Family)
        );
        assert_eq!(
            parse(&v2(COMMAND_PROXY, 0x11, &payload[..11])),
            Err(ProxyError::V2Malformed)
        );
        assert_eq!(
            parse(&v2(COMMAND_PROXY, 0x21, &payload)),
            Err(ProxyError::V2Malformed)
        );
    }

    mod generated {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn v1_and_v2_carry_any_address(
                source in any::<[u8; 16]>(),
                destination in any::<[u8; 16]>(),
                ports in any::<(u16, u16)>(),
                six in any::<bool>(),
            ) {
                let (source, destination) = if six {
                    (IpAddr::from(source), IpAddr::from(destination))
                } else {
                    let four = |b: [u8; 16]| IpAddr::from([b[0], b[1], b[2], b[3]]);
                    (four(source), four(destination))
                };
                let expected = Origin::Forwarded {
                    source: SocketAddr::new(source, ports.0),
                    destination: SocketAddr::new(destination, ports.1),
                };
                let name = if six { "TCP6" } else { "TCP4" };
                let text = format!("PROXY {name} {source} {destination} {} {}\r\n", ports.0, ports.1);
                prop_assert_eq!(complete(text.as_bytes()), (ProxyHeader { version: 1, origin: expected }, text.len()));

                let mut payload = Vec::new();
                for ip in [source, destination] {
                    match ip {
                        IpAddr::V4(v4) => payload.extend_from_slice(&v4.octets()),
                        IpAddr::V6(v6) => payload.extend_from_slice(&v6.octets()),
                    }
                }
                payload.extend_from_slice(&ports.0.to_be_bytes());
                payload.extend_from_slice(&ports.1.to_be_bytes());
                let binary = v2(COMMAND_PROXY, if six { 0x21 } else { 0x11 }, &payload);
                prop_assert_eq!(complete(&binary), (ProxyHeader { version: 2, origin: expected }, binary.len()));
            }

            #[test]
            fn damaged_headers_keep_the_invariants(at in 0usize..64, byte in any::<u8>(), cut in 0usize..64) {
                for mut header in [
                    b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET".to_vec(),
                    v2(COMMAND_PROXY, 0x11, &inet_payload()),
                ] {
                    let at = at % header.len();
                    header[at] = byte;
                    header.truncate(header.len() - cut.min(header.len()));
                    crate::fuzz::proxy_header(&header);
                }
            }
        }
    }
}
