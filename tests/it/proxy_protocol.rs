//! The PROXY protocol (haproxy's v1 and v2) from a raw-socket client, under every engine: the
//! client address a header carries is what the access log and `allow`/`deny` see; v2 `LOCAL`
//! (a balancer's health check) stands for itself; a source outside `proxy_protocol_from` is
//! closed at once; a bad or missing header closes its connection, silently, and the server
//! keeps serving; a header split over several writes works; rate limits count per carried
//! client. Real clients too: curl's `--haproxy-protocol` (v1) and haproxy's `send-proxy-v2`.
//! Also the two keys' errors.

use crate::support;

use std::io::Write;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::*;

/// The two server-wide keys, a short header timeout, an access log, a location that denies
/// the test client's own address and a block of carried ones, and a status location.
fn proxied_config(root: &TempRoot, arch: &str, from: &str) -> PathBuf {
    root.file("a.txt", "a\n");
    root.file("private/x.txt", "x\n");
    write_config(
        root,
        arch,
        &format!(
            "proxy_protocol = true\nproxy_protocol_from = {from}\n\
             [limits]\nheader_timeout = \"1s\"\n\
             [log]\naccess = \"access.log\"\nformat = \"combined\"\n\
             [[site]]\nroot = \"www\"\n\
             \n  [[site.location]]\n  path = \"/private/\"\n  deny = [\"127.0.0.1\", \"10.9.0.0/16\"]\n\
             \n  [[site.location]]\n  path = \"/status\"\n  exact = true\n  handler = \"status\"\n"
        ),
    )
}

fn v1(source: &str, destination: &str) -> Vec<u8> {
    let family = if source.contains(':') { "TCP6" } else { "TCP4" };
    format!("PROXY {family} {source} {destination} 40000 80\r\n").into_bytes()
}

const V2_SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// A v2 `PROXY` header (TCP) from `source` to `destination`, with one ALPN TLV to skip.
fn v2(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let mut payload = Vec::new();
    let family = match (source.ip(), destination.ip()) {
        (IpAddr::V4(from), IpAddr::V4(to)) => {
            payload.extend_from_slice(&from.octets());
            payload.extend_from_slice(&to.octets());
            0x11
        }
        (IpAddr::V6(from), IpAddr::V6(to)) => {
            payload.extend_from_slice(&from.octets());
            payload.extend_from_slice(&to.octets());
            0x21
        }
        _ => panic!("one family for both addresses"),
    };
    payload.extend_from_slice(&source.port().to_be_bytes());
    payload.extend_from_slice(&destination.port().to_be_bytes());
    payload.extend_from_slice(&[0x01, 0x00, 0x08]);
    payload.extend_from_slice(b"http/1.1");
    let mut header = V2_SIGNATURE.to_vec();
    header.extend_from_slice(&[0x21, family]);
    header.extend_from_slice(&u16::try_from(payload.len()).unwrap().to_be_bytes());
    header.extend_from_slice(&payload);
    header
}

/// haproxy's health-check header: v2 `LOCAL`, family `UNSPEC`, nothing after it.
fn v2_local() -> Vec<u8> {
    let mut header = V2_SIGNATURE.to_vec();
    header.extend_from_slice(&[0x20, 0x00, 0x00, 0x00]);
    header
}

/// Sends `header` then a GET for `path`, and reads the response.
fn get_behind(addr: SocketAddr, header: &[u8], path: &str) -> Response {
    let mut conn = Conn::open(addr);
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(&support::http::build_request("GET", path, &[]));
    conn.send(bytes);
    conn.read_response("GET")
}

/// Waits (bounded) for the access log to hold a line with both `client` at its start and
/// `request`; returns the line.
fn logged_line(log: &Path, client: &str, request: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text
            .lines()
            .find(|line| line.starts_with(&format!("{client} - - [")) && line.contains(request))
        {
            return line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no line for {client} {request} in:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A connection closed by the server without a single byte of response.
fn assert_closed_silently(conn: &mut Conn, within: Duration) {
    assert!(
        conn.closed_within(within),
        "the server keeps the connection"
    );
    assert!(conn.leftover().is_empty(), "no response before the close");
}

fn status_text(addr: SocketAddr) -> String {
    let response = get_behind(addr, &v2_local(), "/status");
    assert_eq!(response.status, 200);
    response.body_text()
}

default_arch!(fn carried_addresses_reach_the_access_log(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::config_file(&proxied_config(&root, arch, "[\"127.0.0.1\"]")));
    let addr = server.addr();
    let log = root.outside_dir().join("access.log");

    let response = get_behind(addr, &v1("10.1.2.3", "192.0.2.1"), "/a.txt?v1");
    assert_eq!(response.status, 200);
    assert_eq!(response.body_text(), "a\n");
    let v6_client: SocketAddr = (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7), 40001).into();
    let v6_server: SocketAddr = (Ipv6Addr::LOCALHOST, 80).into();
    assert_eq!(get_behind(addr, &v2(v6_client, v6_server), "/a.txt?v2").status, 200);
    let v4_client: SocketAddr = "198.51.100.9:5555".parse().unwrap();
    assert_eq!(get_behind(addr, &v2(v4_client, "192.0.2.1:80".parse().unwrap()), "/a.txt?v2-inet").status, 200);
    assert_eq!(get_behind(addr, &v2_local(), "/a.txt?local").status, 200);
    assert_eq!(get_behind(addr, b"PROXY UNKNOWN\r\n", "/a.txt?unknown").status, 200);

    // A keep-alive connection keeps its client for every request.
    let mut conn = Conn::open(addr);
    conn.send(v1("10.4.4.4", "192.0.2.1"));
    for round in 0..3 {
        let path = format!("/a.txt?keep-{round}");
        assert_eq!(conn.get(&path, &[]).status, 200);
        logged_line(&log, "10.4.4.4", &path);
    }

    logged_line(&log, "10.1.2.3", "GET /a.txt?v1 ");
    logged_line(&log, "2001:db8::7", "GET /a.txt?v2 ");
    logged_line(&log, "198.51.100.9", "GET /a.txt?v2-inet ");
    logged_line(&log, "127.0.0.1", "GET /a.txt?local ");
    logged_line(&log, "127.0.0.1", "GET /a.txt?unknown ");
});

for_each_arch!(fn a_header_split_over_writes_is_read_whole(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::config_file(&proxied_config(&root, arch, "[\"127.0.0.0/8\"]")));
    let addr = server.addr();
    let log = root.outside_dir().join("access.log");
    let client: SocketAddr = "203.0.113.5:1234".parse().unwrap();
    for (name, header) in [("v1", v1("203.0.113.4", "192.0.2.1")), ("v2", v2(client, "192.0.2.1:80".parse().unwrap()))] {
        let mut conn = Conn::open(addr);
        // Separate writes a little apart (Nagle is off), so the server's reads see pieces:
        // the signature cut inside, the length cut from its payload, the rest with the request.
        for piece in [&header[..3], &header[3..13], &header[13..15], &header[15..]] {
            conn.stream().write_all(piece).unwrap();
            std::thread::sleep(Duration::from_millis(30));
        }
        let path = format!("/a.txt?split-{name}");
        let response = conn.get(&path, &[]);
        assert_eq!(response.status, 200, "{name}");
        let expected = if name == "v1" { "203.0.113.4" } else { "203.0.113.5" };
        logged_line(&log, expected, &path);
    }
});

for_each_arch!(fn an_untrusted_source_is_closed_at_once(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::config_file(&proxied_config(&root, arch, "[\"10.0.0.0/8\", \"127.0.0.2\"]")));
    let addr = server.addr();
    // 127.0.0.1 is not a trusted balancer: even a well-formed header is not believed.
    for header in [v1("10.1.2.3", "192.0.2.1"), Vec::new()] {
        let mut conn = Conn::open(addr);
        let mut bytes = header;
        bytes.extend_from_slice(&support::http::build_request("GET", "/a.txt", &[]));
        let _ = conn.try_send(&bytes);
        assert_closed_silently(&mut conn, Duration::from_secs(5));
    }
    assert!(
        server.wait_for_stderr("PROXY protocol: connection from 127.0.0.1 closed: not in proxy_protocol_from", Duration::from_secs(5)),
        "logged: {}",
        server.stderr()
    );
    // The trusted balancer here is 127.0.0.2 (curl bound to it, sending a v1 header): it is
    // served, and the status location counts the two refusals.
    let url = format!("http://{addr}/status");
    let output = curl(["-sS", "--interface", "127.0.0.2", "--haproxy-protocol", &url]);
    let status = String::from_utf8_lossy(&output.stdout);
    assert!(
        status.contains("ampd_proxy_protocol_refused_total{reason=\"untrusted\"} 2\n"),
        "{status} {}",
        String::from_utf8_lossy(&output.stderr)
    );
});

for_each_arch!(fn a_bad_or_missing_header_closes_only_its_connection(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::config_file(&proxied_config(&root, arch, "[\"127.0.0.1\"]")));
    let addr = server.addr();
    let bad: [&[u8]; 4] = [
        b"GET /a.txt HTTP/1.1\r\nHost: a\r\n\r\n",
        b"PROXY TCP4 10.1.2.3 192.0.2.1 040000 80\r\nGET /a.txt HTTP/1.1\r\nHost: a\r\n\r\n",
        b"PROXY TCP6 10.1.2.3 192.0.2.1 40000 80\r\n",
        b"\r\n\r\n\0\r\nQUIT\n\x21\x11\xff\xff",
    ];
    for bytes in bad {
        let mut conn = Conn::open(addr);
        conn.send(bytes);
        assert_closed_silently(&mut conn, Duration::from_secs(5));
        assert_eq!(get_behind(addr, &v1("10.1.2.3", "192.0.2.1"), "/a.txt").status, 200, "still serving");
    }
    // A header that stops half-way runs into the header timeout (1 s here), without a 408.
    let started = Instant::now();
    let mut conn = Conn::open(addr);
    conn.send(b"PROXY TCP4 10.1.2.3 ");
    assert_closed_silently(&mut conn, Duration::from_secs(6));
    assert!(started.elapsed() >= Duration::from_millis(900), "closed after {:?}", started.elapsed());
    assert!(server.wait_for_stderr("PROXY protocol: connection from 127.0.0.1 closed: no PROXY protocol header", Duration::from_secs(5)), "{}", server.stderr());
    let status = status_text(addr);
    let invalid = status
        .lines()
        .find(|line| line.starts_with("ampd_proxy_protocol_refused_total{reason=\"invalid\"}"))
        .unwrap_or_else(|| panic!("no counter in:\n{status}"));
    assert!(invalid.ends_with(" 5"), "{invalid}");
});

default_arch!(fn allow_and_deny_see_the_carried_address(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::config_file(&proxied_config(&root, arch, "[\"127.0.0.1\"]")));
    let addr = server.addr();
    // The location denies 127.0.0.1 (the balancer here) and 10.9.0.0/16.
    let allowed = get_behind(addr, &v1("10.1.2.3", "192.0.2.1"), "/private/x.txt");
    assert_eq!(allowed.status, 200);
    assert_eq!(allowed.body_text(), "x\n");
    let denied = get_behind(addr, &v1("10.9.1.1", "192.0.2.1"), "/private/x.txt");
    assert_eq!(denied.status, 403);
    let client: SocketAddr = "10.9.200.1:999".parse().unwrap();
    assert_eq!(get_behind(addr, &v2(client, "192.0.2.1:80".parse().unwrap()), "/private/x.txt").status, 403);
    // LOCAL carries no client: the balancer itself asks, and it is denied.
    assert_eq!(get_behind(addr, &v2_local(), "/private/x.txt").status, 403);
});

default_arch!(fn rate_limits_count_per_carried_client(arch) {
    let root = TempRoot::new();
    root.file("a.txt", "a\n");
    let config = write_config(
        &root,
        arch,
        "proxy_protocol = true\nproxy_protocol_from = [\"127.0.0.1\"]\n\
         [admission]\nrequests_per_second = 0.5\nburst = 2\n[[site]]\nroot = \"www\"\n",
    );
    let server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    // One client behind the balancer spends its burst, then is limited ...
    let statuses: Vec<u16> = (0..3)
        .map(|_| get_behind(addr, &v1("10.1.1.1", "192.0.2.1"), "/a.txt").status)
        .collect();
    assert_eq!(statuses, [200, 200, 429]);
    // ... while another client behind the same balancer is not.
    assert_eq!(get_behind(addr, &v1("10.2.2.2", "192.0.2.1"), "/a.txt").status, 200);
});

/// `ampd check` on `body` (after a valid `listen`): the one error line.
fn config_error(body: &str) -> String {
    let root = TempRoot::new();
    let file = root.outside_dir().join("proxy.toml");
    std::fs::write(
        &file,
        format!("listen = \"127.0.0.1:0\"\n{body}[[site]]\nroot = \"/tmp\"\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_to_exit(&["check", &file.display().to_string()]);
    assert_eq!(code, Some(1), "{body}: {stdout} {stderr}");
    stderr.trim().to_owned()
}

#[test]
fn the_keys_errors_name_file_line_and_key() {
    let line = config_error("proxy_protocol = true\nproxy_protocol_from = [\"10.0.0.0/33\"]\n");
    assert!(line.contains("proxy.toml:3:"), "{line}");
    assert!(
        line.contains("proxy_protocol_from: '10.0.0.0/33' is not an address or block"),
        "{line}"
    );
    let line = config_error("proxy_protocol = true\nproxy_protocol_from = [\"balancer\"]\n");
    assert!(
        line.contains("proxy.toml:3:") && line.contains("'balancer'"),
        "{line}"
    );
    let line = config_error("proxy_protocol = true\n");
    assert!(
        line.contains("proxy.toml:2:")
            && line.contains("proxy_protocol: proxy_protocol = true needs proxy_protocol_from"),
        "{line}"
    );
    let line = config_error("proxy_protocol = true\nproxy_protocol_from = []\n");
    assert!(
        line.contains("proxy.toml:3:") && line.contains("no source may send"),
        "{line}"
    );
    let line = config_error("proxy_protocol_from = [\"10.0.0.1\"]\n");
    assert!(
        line.contains("proxy.toml:2:") && line.contains("without proxy_protocol"),
        "{line}"
    );
    let line = config_error("proxy_protocol = \"yes\"\nproxy_protocol_from = [\"10.0.0.1\"]\n");
    assert!(
        line.contains("proxy.toml:2:") && line.contains("proxy_protocol"),
        "{line}"
    );
}

/// haproxy (the Debian package) listening on a free loopback port in front of `backend`,
/// sending PROXY v2 to it and on its health checks; killed on drop.
struct Haproxy {
    child: std::process::Child,
    port: u16,
}

impl Haproxy {
    fn start(dir: &Path, backend: SocketAddr) -> Haproxy {
        // haproxy cannot say which port it bound, so pick a free one and retry if another
        // process takes it first.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .expect("a free port")
                .port();
            let config = dir.join("haproxy.cfg");
            std::fs::write(
                &config,
                format!(
                    "global\n  maxconn 100\n\
                     defaults\n  mode http\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n\
                     frontend fe\n  bind 127.0.0.1:{port}\n  default_backend be\n\
                     backend be\n  option httpchk GET /a.txt?health\n  http-check expect status 200\n\
                     \x20 server ampd {backend} send-proxy-v2 check-send-proxy check inter 200ms\n"
                ),
            )
            .unwrap();
            let mut child = std::process::Command::new("haproxy")
                .args(["-db", "-f"])
                .arg(&config)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("haproxy must be installed (apt-get install haproxy)");
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken: try another
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Haproxy { child, port };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("haproxy did not start");
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn haproxy_send_proxy_v2_carries_the_client_address() {
    let root = TempRoot::new();
    let config = proxied_config(&root, "reactor", "[\"127.0.0.1\"]");
    let server = Server::start(Options::config_file(&config));
    let haproxy = Haproxy::start(root.outside_dir(), server.addr());
    let log = root.outside_dir().join("access.log");
    // The client connects from 127.0.0.2 (all of 127/8 is loopback); haproxy, from 127.0.0.1.
    let url = format!("http://127.0.0.1:{}/a.txt?via-haproxy", haproxy.port);
    let output = curl([
        "-sS",
        "--interface",
        "127.0.0.2",
        "-o",
        "-",
        "-w",
        " %{http_code}",
        &url,
    ]);
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "a\n 200",
        "curl: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    logged_line(&log, "127.0.0.2", "GET /a.txt?via-haproxy ");
    // Its health checks (v2 LOCAL) are served as the balancer's own requests.
    logged_line(&log, "127.0.0.1", "GET /a.txt?health ");
}
