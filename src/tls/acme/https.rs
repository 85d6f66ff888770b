//! A small blocking HTTPS/1.1 client for the ACME conversation: one request per connection
//! (`Connection: close`), rustls with the process's provider, trusting the system's roots
//! (Debian's bundle) plus `[tls.acme] ca_root`. Runs on the manager thread only.
//!
//! Owns: URLs, the connection, the request. The response is read by the server's own strict
//! parsers (`ampd_http::upstream`'s head reader and body framing, `ChunkedDecoder`), so a CA's
//! answer is held to the rules a proxied upstream's is. Must not touch: what the bodies mean
//! (`client`).

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ampd_http::upstream::{response_body, Limits, ResponseBody, ResponseParse, ResponseParser};
use ampd_http::{ChunkedDecoder, Header, Method};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// Where Debian (and most distributions) keep the system's trusted roots.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Connecting, and each read or write, may take this long.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response taken: ACME's are JSON objects and one certificate chain.
const MAX_RESPONSE: usize = 1 << 20;

/// One response: status, header fields as sent, body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first field named `name` (ASCII case-insensitive), if its value is UTF-8.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        ampd_http::message::first_named(&self.headers, name)
            .and_then(|value| std::str::from_utf8(value).ok())
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
                        super::super::pem_errors::pem_reason(&error)
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
        let method = if method == "GET" {
            Method::Get
        } else {
            Method::Post
        };
        read_response(&mut stream, &method)
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

/// A response the parsers refused, with their reason.
fn invalid(what: &str, reason: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{what}: {reason}"))
}

fn cut_short(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the connection closed inside the response {what}"),
    )
}

/// Read the whole response to a `method` request: the head (interim 1xx ones skipped, RFC 9110
/// §15.2), then the body by its framing (RFC 9112 §6.3).
fn read_response(stream: &mut impl Read, method: &Method) -> io::Result<Response> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    let mut parser = ResponseParser::new(Limits::default());
    let head = loop {
        if let ResponseParse::Complete { head, len } = parser
            .parse(&data)
            .map_err(|error| invalid("response head", error))?
        {
            data.drain(..len);
            if head.status >= 200 || head.status == 101 {
                break head;
            }
            continue;
        }
        let count = read_some(stream, &mut buffer)?;
        if count == 0 {
            return Err(cut_short("head"));
        }
        data.extend_from_slice(&buffer[..count]);
    };
    let framing = response_body(&head, method).map_err(|error| invalid("response", error))?;
    let body = match framing {
        ResponseBody::None => Vec::new(),
        ResponseBody::Tunnel => return Err(invalid("response", "the server switched protocols")),
        ResponseBody::Length(length) => {
            let length = usize::try_from(length)
                .ok()
                .filter(|length| *length <= MAX_RESPONSE)
                .ok_or_else(|| invalid("response body", "too large"))?;
            while data.len() < length {
                let count = read_some(stream, &mut buffer)?;
                if count == 0 {
                    return Err(cut_short("body"));
                }
                data.extend_from_slice(&buffer[..count]);
            }
            data.truncate(length);
            data
        }
        ResponseBody::Chunked => {
            let mut decoder = ChunkedDecoder::new().with_max_body(MAX_RESPONSE as u64);
            let mut body = Vec::new();
            loop {
                let progress = decoder
                    .feed(&data, &mut |piece| body.extend_from_slice(piece))
                    .map_err(|error| invalid("chunked response body", error))?;
                data.drain(..progress.consumed);
                if progress.done {
                    break body;
                }
                let count = read_some(stream, &mut buffer)?;
                if count == 0 {
                    return Err(cut_short("body"));
                }
                data.extend_from_slice(&buffer[..count]);
            }
        }
        ResponseBody::UntilClose => loop {
            let count = read_some(stream, &mut buffer)?;
            if count == 0 {
                break data;
            }
            data.extend_from_slice(&buffer[..count]);
            if data.len() > MAX_RESPONSE {
                return Err(invalid("response body", "too large"));
            }
        },
    };
    Ok(Response {
        status: head.status,
        headers: head.headers,
        body,
    })
}

/// One read; a peer that closes without TLS's close_notify ends the stream all the same (the
/// framing above tells a whole response from a cut one).
fn read_some(stream: &mut impl Read, buffer: &mut [u8]) -> io::Result<usize> {
    match stream.read(buffer) {
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use ampd_http::Method;

    use super::{read_response, Target};

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
        let get = Method::Get;
        let response = read_response(&mut by_length, &get).unwrap();
        assert_eq!(response.status, 201);
        assert_eq!(response.header("location"), Some("/a"));
        assert_eq!(response.body, b"{}");
        let mut chunked: &[u8] =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(read_response(&mut chunked, &get).unwrap().body, b"abcde");
        let mut to_close: &[u8] = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        assert_eq!(
            read_response(&mut to_close, &get).unwrap().body,
            b"all of it"
        );
        let mut cut: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
        assert!(read_response(&mut cut, &get).is_err());
        let mut no_content: &[u8] = b"HTTP/1.1 204 No Content\r\nReplay-Nonce: n1\r\n\r\n";
        let response = read_response(&mut no_content, &get).unwrap();
        assert_eq!(response.header("replay-nonce"), Some("n1"));
        assert!(response.body.is_empty());
        let mut interim: &[u8] =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
        let response = read_response(&mut interim, &get).unwrap();
        assert_eq!((response.status, &response.body[..]), (200, &b"x"[..]));
        let mut cut_chunk: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab";
        assert!(read_response(&mut cut_chunk, &get).is_err());
        let mut bad_chunk: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(read_response(&mut bad_chunk, &get).is_err());
    }

    /// The lax reader this replaced split every line at its first colon: a folded line, a
    /// space before the colon, or both framing fields passed, and the body was framed by a
    /// guess. The shared strict reader refuses each.
    #[test]
    fn heads_another_hop_could_read_differently_are_refused() {
        let get = Method::Get;
        for bad in [
            &b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}"[..],
            b"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\nContent-Length: 2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
            b"HTTP/1.1 200 OK\nContent-Length: 2\n\n{}",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        ] {
            let mut input = bad;
            assert!(
                read_response(&mut input, &get).is_err(),
                "{}",
                bad.escape_ascii()
            );
        }
    }
}
