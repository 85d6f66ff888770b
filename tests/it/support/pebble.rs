//! Debian's `pebble` (a small ACME server) and `pebble-challtestsrv` (its DNS, answering
//! 127.0.0.1 for every name) on free loopback ports, for the ACME tests. Pebble validates for
//! real (no `PEBBLE_VA_ALWAYS_VALID`): HTTP-01 at `http_port`, TLS-ALPN-01 at `tls_port` of
//! 127.0.0.1. Its HTTPS certificate is made here, by a CA whose PEM is `ca_root`.
//! Both processes are killed on Drop.
//! Owns: those two processes and files under `work`. Must not touch: anything else.

use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Pebble {
    children: Vec<Child>,
    /// `https://127.0.0.1:PORT/dir`.
    pub directory: String,
    /// Trust for the directory's HTTPS (and its management interface).
    pub ca_root: PathBuf,
    /// The management interface (`/roots/0`: the root of the certificates pebble issues).
    pub management: u16,
    /// Standard output and error of pebble.
    pub log: PathBuf,
}

/// A port nothing listens on right now (TCP).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port()
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|socket| socket.local_addr())
        .expect("free UDP port")
        .port()
}

/// Wait (bounded) until something accepts on `port`.
fn wait_listening(port: u16, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Whether the pebble packages are installed (scripts/test.sh installs them).
pub fn installed() -> bool {
    Path::new("/usr/bin/pebble").exists() && Path::new("/usr/bin/pebble-challtestsrv").exists()
}

/// A CA and a certificate it signed for 127.0.0.1 and localhost: (CA PEM, chain PEM, key PEM).
fn https_identity() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "ampd test pebble CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let leaf = params.signed_by(&key, &ca).unwrap();
    (ca.pem(), leaf.pem(), key.serialize_pem())
}

impl Pebble {
    /// Start the DNS and pebble; files go under `work`. Their ports are chosen free, but another
    /// test may bind one before they do: then they start again on other ports.
    pub fn start(work: &Path, http_port: u16, tls_port: u16) -> Pebble {
        let mut failures = Vec::new();
        for _ in 0..3 {
            match Pebble::launch(work, http_port, tls_port) {
                Ok(pebble) => return pebble,
                Err(failure) => failures.push(failure),
            }
        }
        panic!("pebble did not start:\n{}", failures.join("\n---\n"));
    }

    fn launch(work: &Path, http_port: u16, tls_port: u16) -> Result<Pebble, String> {
        std::fs::create_dir_all(work).unwrap();
        let (ca, chain, key) = https_identity();
        let ca_root = work.join("pebble-ca.pem");
        std::fs::write(&ca_root, ca).unwrap();
        std::fs::write(work.join("pebble.pem"), chain).unwrap();
        std::fs::write(work.join("pebble.key"), key).unwrap();
        let dns = free_udp_port();
        let dns_management = free_port();
        let listen = free_port();
        let management = free_port();
        let config = serde_json::json!({
            "pebble": {
                "listenAddress": format!("127.0.0.1:{listen}"),
                "managementListenAddress": format!("127.0.0.1:{management}"),
                "certificate": work.join("pebble.pem"),
                "privateKey": work.join("pebble.key"),
                "httpPort": http_port,
                "tlsPort": tls_port,
                "ocspResponderURL": "",
                "externalAccountBindingRequired": false
            }
        });
        let config_path = work.join("pebble.json");
        std::fs::write(&config_path, config.to_string()).unwrap();
        let log = work.join("pebble.log");
        let mut children = Vec::new();
        let dns_log = std::fs::File::create(work.join("challtestsrv.log")).unwrap();
        children.push(
            Command::new("pebble-challtestsrv")
                .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
                .args(["-dns01", &format!("127.0.0.1:{dns}")])
                .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
                .args(["-management", &format!("127.0.0.1:{dns_management}")])
                .stdout(dns_log.try_clone().unwrap())
                .stderr(dns_log)
                .stdin(Stdio::null())
                .spawn()
                .expect("start pebble-challtestsrv"),
        );
        let pebble_log = std::fs::File::create(&log).unwrap();
        children.push(
            Command::new("pebble")
                .arg("-config")
                .arg(&config_path)
                .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
                .env("PEBBLE_VA_NOSLEEP", "1")
                .env_remove("PEBBLE_VA_ALWAYS_VALID")
                .stdout(pebble_log.try_clone().unwrap())
                .stderr(pebble_log)
                .stdin(Stdio::null())
                .spawn()
                .expect("start pebble"),
        );
        let pebble = Pebble {
            children,
            directory: format!("https://127.0.0.1:{listen}/dir"),
            ca_root,
            management,
            log,
        };
        if !wait_listening(dns_management, Duration::from_secs(20)) {
            return Err(format!(
                "pebble-challtestsrv did not listen on {dns_management}"
            ));
        }
        if !(wait_listening(listen, Duration::from_secs(20))
            && wait_listening(management, Duration::from_secs(20)))
        {
            return Err(format!(
                "pebble did not listen on {listen} and {management}: {}",
                pebble.log_text()
            ));
        }
        Ok(pebble)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stop pebble (and its DNS) now.
    pub fn stop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }

    /// The root certificate of what pebble issues, PEM.
    pub fn issuing_root(&self) -> String {
        let output = Command::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert"])
            .arg(&self.ca_root)
            .arg(format!("https://127.0.0.1:{}/roots/0", self.management))
            .output()
            .expect("curl");
        assert!(output.status.success(), "curl /roots/0 failed");
        String::from_utf8(output.stdout).unwrap()
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        self.stop();
    }
}
