//! A small blocking HTTPS/1.1 client for the ACME conversation: one request per connection
//! (`Connection: close`), rustls with the process's provider, trusting the system's roots
//! (Debian's bundle) plus `[tls.acme] ca_root`. Runs on the manager thread only.
//!
//! Owns: URLs, the connection, the request and response framing. Must not touch: what the
//! bodies mean (`client`).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// Where Debian (and most distributions) keep the system's trusted roots.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Connecting, and each read or write, may take this long.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response taken: ACME's are JSON objects and one certificate chain.
const MAX_RESPONSE: usize = 1 << 20;

/// One response: status, headers (names lower case), body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (lower case).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The client: its rustls configuration.
pub struct Https {
    config: Arc<ClientConfig>,
}

impl Https {
    /// A client trusting the system's roots and those in `ca_root` (PEM).
    ///
    /// # Errors
    /// `ca_root` cannot be read or holds no certificate; no root at all is trusted.
    pub fn new(ca_root: Option<&Path>) -> Result<Https, String> {
        let mut roots = RootCertStore::empty();
        if let Ok(system) = CertificateDer::pem_file_iter(SYSTEM_ROOTS) {
            roots.add_parsable_certificates(system.filter_map(Result::ok));
        }
        if let Some(path) = ca_root {
            let certificates = CertificateDer::pem_file_iter(path)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|error| {
                    format!(
                        "ca_root {}: {}",
                        path.display(),
                        super::super::context::pem_reason(&error)
                    )
                })?;
            let (added, _) = roots.add_parsable_certificates(certificates);
            if added == 0 {
                return Err(format!("ca_root {}: no certificate", path.display()));
            }
        }
        if roots.is_empty() {
            return Err(format!(
                "no trusted roots: {SYSTEM_ROOTS} is missing and no ca_root is set"
            ));
        }
        let config = ClientConfig::builder_with_provider(super::super::provider())
            .with_safe_default_protocol_versions()
            .map_err(|error| error.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Https {
            config: Arc::new(config),
        })
    }

    /// `GET url`.
    ///
    /// # Errors
    /// The URL, the connection, TLS or the response's framing failed.
    pub fn get(&self, url: &str) -> io::Result<Response> {
        self.request("GET", url, None, &[])
    }

    /// `POST url` with a body of `content_type`.
    ///
    /// # Errors
    /// As `get`.
    pub fn post(&self, url: &str, content_type: &str, body: &[u8]) -> io::Result<Response> {
        self.request("POST", url, Some(content_type), body)
    }

    fn request(
        &self,
        method: &str,
        url: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> io::Result<Response> {
        let target = Target::parse(url)?;
        let address = (target.host.as_str(), target.port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::other(format!("{} has no address", target.host)))?;
        let socket = TcpStream::connect_timeout(&address, TIMEOUT)?;
        socket.set_read_timeout(Some(TIMEOUT))?;
        socket.set_write_timeout(Some(TIMEOUT))?;
        let name = ServerName::try_from(target.host.clone())
            .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
        let connection =
            ClientConnection::new(self.config.clone(), name).map_err(io::Error::other)?;
        let mut stream = StreamOwned::new(connection, socket);
        let mut head = format!(
            "{method} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: ampd/{}\r\nAccept: */*\r\nConnection: close\r\n",
            target.path,
            target.authority,
            env!("CARGO_PKG_VERSION"),
        );
        if let Some(content_type) = content_type {
            head.push_str(&format!(
                "Content-Type: {content_type}\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)?;
        stream.flush()?;
        read_response(&mut stream)
    }
}

/// The parts of an `https://` URL a request needs.
struct Target {
    host: String,
    port: u16,
    /// `host[:port]` as written, for `Host`.
    authority: String,
    path: String,
}

impl Target {
    fn parse(url: &str) -> io::Result<Target> {
        let invalid = || io::Error::new(io::ErrorKind::InvalidInput, format!("bad URL {url}"));
        let rest = url.strip_prefix("https://").ok_or_else(invalid)?;
        let (authority, path) = rest.find('/').map_or((rest, "/"), |at| rest.split_at(at));
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed.split_once(']').ok_or_else(invalid)?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        let port = port.map_or(Ok(443), str::parse).map_err(|_| invalid())?;
        if host.is_empty() {
            return Err(invalid());
        }
        Ok(Target {
            host: host.to_owned(),
            port,
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }
}

/// Read the whole response: the head, then the body by `Content-Length`, chunked, or to the
/// end of the connection.
fn read_response(stream: &mut impl Read) -> io::Result<Response> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = find(&data, b"\r\n\r\n") {
            break at;
        }
        let count = read_some(stream, &mut buffer)?;
        if count == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed before a whole response head",
            ));
        }
        data.extend_from_slice(&buffer[..count]);
        if data.len() > MAX_RESPONSE {
            return Err(io::Error::other("response head too large"));
        }
    };
    let head = std::str::from_utf8(&data[..head_end])
        .map_err(|_| io::Error::other("response head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| io::Error::other("malformed status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let mut response = Response {
        status,
        headers,
        body: data[head_end + 4..].to_vec(),
    };
    let chunked = response
        .header("transfer-encoding")
        .is_some_and(|coding| coding.eq_ignore_ascii_case("chunked"));
    let length = response
        .header("content-length")
        .and_then(|length| length.parse::<usize>().ok());
    if status == 204 || status == 304 || (100..200).contains(&status) {
        response.body.clear();
        return Ok(response);
    }
    loop {
        if chunked {
            if let Some(body) = dechunk(&response.body)? {
                response.body = body;
                return Ok(response);
            }
        } else if let Some(length) = length {
            if response.body.len() >= length {
                response.body.truncate(length);
                return Ok(response);
            }
        }
        let count = read_some(stream, &mut buffer)?;
        if count == 0 {
            if chunked || length.is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection closed inside the response body",
                ));
            }
            return Ok(response);
        }
        response.body.extend_from_slice(&buffer[..count]);
        if response.body.len() > MAX_RESPONSE {
            return Err(io::Error::other("response body too large"));
        }
    }
}

/// One read; a peer that closes without TLS's close_notify ends the stream all the same (the
/// framing above tells a whole response from a cut one).
fn read_some(stream: &mut impl Read, buffer: &mut [u8]) -> io::Result<usize> {
    match stream.read(buffer) {
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
        other => other,
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The body of a whole chunked message (RFC 9112 §7.1), or `None` while it is incomplete.
fn dechunk(data: &[u8]) -> io::Result<Option<Vec<u8>>> {
    let malformed = || io::Error::other("malformed chunked body");
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let Some(line_end) = find(&data[at..], b"\r\n") else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&data[at..at + line_end]).map_err(|_| malformed())?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| malformed())?;
        at += line_end + 2;
        if size == 0 {
            // Trailer fields (ignored) end with an empty line.
            let rest = &data[at..];
            let complete = rest.starts_with(b"\r\n") || find(rest, b"\r\n\r\n").is_some();
            return Ok(complete.then_some(body));
        }
        if data.len() < at + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&data[at..at + size]);
        if &data[at + size..at + size + 2] != b"\r\n" {
            return Err(malformed());
        }
        at += size + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::{dechunk, read_response, Target};

    #[test]
    fn urls_split_into_host_port_and_path() {
        let target = Target::parse("https://127.0.0.1:14000/dir").unwrap();
        assert_eq!((target.host.as_str(), target.port), ("127.0.0.1", 14000));
        assert_eq!(target.path, "/dir");
        let target = Target::parse("https://acme.test").unwrap();
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("acme.test", 443, "/")
        );
        let target = Target::parse("https://[::1]:8443/a/b?c").unwrap();
        assert_eq!((target.host.as_str(), target.port), ("::1", 8443));
        assert_eq!(target.authority, "[::1]:8443");
        assert!(Target::parse("http://acme.test/").is_err());
        assert!(Target::parse("https://acme.test:x/").is_err());
    }

    #[test]
    fn responses_framed_by_length_chunks_or_close() {
        let mut by_length: &[u8] =
            b"HTTP/1.1 201 Created\r\nLocation: /a\r\nContent-Length: 2\r\n\r\n{}extra";
        let response = read_response(&mut by_length).unwrap();
        assert_eq!(response.status, 201);
        assert_eq!(response.header("location"), Some("/a"));
        assert_eq!(response.body, b"{}");
        let mut chunked: &[u8] =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(read_response(&mut chunked).unwrap().body, b"abcde");
        let mut to_close: &[u8] = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        assert_eq!(read_response(&mut to_close).unwrap().body, b"all of it");
        let mut cut: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
        assert!(read_response(&mut cut).is_err());
        let mut no_content: &[u8] = b"HTTP/1.1 204 No Content\r\nReplay-Nonce: n1\r\n\r\n";
        let response = read_response(&mut no_content).unwrap();
        assert_eq!(response.header("replay-nonce"), Some("n1"));
        assert!(response.body.is_empty());
        assert!(dechunk(b"3\r\nab").unwrap().is_none());
        assert!(dechunk(b"zz\r\n").is_err());
    }
}
