//! TLS for the whole-server tests: certificates made at test time with the `openssl` command
//! (a CA, server certificates with ECDSA P-256 or RSA 2048 keys for given names, client
//! certificates, keys that match nothing), a config head with TLS listeners, the listeners a
//! ready line names, and clients that speak TLS: tests/fixtures/tls_client.py (Python `ssl` +
//! `http.client`, held open between commands), curl and `openssl s_client`.
//! Owns: files under the directory each `Ca` is given, and its client processes. Must not touch:
//! the server (only its config file and the bytes on the wire).

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::root::TempRoot;

/// How long one command of the Python client may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

static SERIAL: AtomicU64 = AtomicU64::new(1);

/// The key algorithm of a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    EcdsaP256,
    Rsa2048,
}

/// A certificate and its key, PEM files.
#[derive(Clone, Debug)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A certificate authority made for one test: its key and self-signed certificate live in
/// `dir`, and so does everything it issues.
pub struct Ca {
    dir: PathBuf,
    /// The CA's certificate (PEM), for `--cacert`, `client_ca`, Python's `cafile`.
    pub cert: PathBuf,
    key: PathBuf,
}

/// Runs `openssl ARGS`; panics with its stderr when it fails.
pub fn openssl<I, S>(args: I)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let args: Vec<_> = args
        .into_iter()
        .map(|arg| arg.as_ref().to_os_string())
        .collect();
    let output = Command::new("openssl")
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("openssl must be installed (apt-get install openssl)");
    assert!(
        output.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A new private key in PKCS#8 PEM at `path`.
pub fn new_key(path: &Path, kind: KeyKind) -> PathBuf {
    let path_text = path.display().to_string();
    match kind {
        KeyKind::EcdsaP256 => openssl([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &path_text,
        ]),
        KeyKind::Rsa2048 => openssl([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            &path_text,
        ]),
    }
    path.to_path_buf()
}

impl Ca {
    /// A CA named `name` (its subject CN), files `dir/NAME-ca.pem` and `dir/NAME-ca.key`.
    pub fn new(dir: &Path, name: &str) -> Ca {
        std::fs::create_dir_all(dir).expect("create certificate directory");
        let key = new_key(&dir.join(format!("{name}-ca.key")), KeyKind::EcdsaP256);
        let cert = dir.join(format!("{name}-ca.pem"));
        openssl([
            "req",
            "-x509",
            "-new",
            "-key",
            &key.display().to_string(),
            "-sha256",
            "-days",
            "30",
            "-subj",
            &format!("/O=ampd tests/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-out",
            &cert.display().to_string(),
        ]);
        Ca {
            dir: dir.to_path_buf(),
            cert,
            key,
        }
    }

    /// A server certificate for `names` (the first is the subject's CN; every one is a DNS
    /// subjectAltName, and 127.0.0.1 an IP one), `dir/STEM.pem` + `dir/STEM.key`.
    pub fn server(&self, stem: &str, names: &[&str], kind: KeyKind) -> Issued {
        let mut alt: Vec<String> = names.iter().map(|name| format!("DNS:{name}")).collect();
        alt.push("IP:127.0.0.1".to_owned());
        self.issue(
            stem,
            names[0],
            kind,
            &format!(
                "subjectAltName={}\nbasicConstraints=critical,CA:FALSE\n\
                 keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
                alt.join(",")
            ),
        )
    }

    /// A client certificate whose subject is `O=ampd tests, CN=common_name`.
    pub fn client(&self, stem: &str, common_name: &str) -> Issued {
        self.issue(
            stem,
            common_name,
            KeyKind::EcdsaP256,
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=clientAuth\n",
        )
    }

    fn issue(&self, stem: &str, common_name: &str, kind: KeyKind, extensions: &str) -> Issued {
        let key = new_key(&self.dir.join(format!("{stem}.key")), kind);
        let csr = self.dir.join(format!("{stem}.csr"));
        let ext = self.dir.join(format!("{stem}.ext"));
        let cert = self.dir.join(format!("{stem}.pem"));
        std::fs::write(&ext, extensions).expect("write extensions file");
        openssl([
            "req",
            "-new",
            "-key",
            &key.display().to_string(),
            "-subj",
            &format!("/O=ampd tests/CN={common_name}"),
            "-out",
            &csr.display().to_string(),
        ]);
        let serial = format!(
            "{}{:04}",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        );
        openssl([
            "x509",
            "-req",
            "-in",
            &csr.display().to_string(),
            "-CA",
            &self.cert.display().to_string(),
            "-CAkey",
            &self.key.display().to_string(),
            "-set_serial",
            &serial,
            "-days",
            "30",
            "-sha256",
            "-extfile",
            &ext.display().to_string(),
            "-out",
            &cert.display().to_string(),
        ]);
        Issued { cert, key }
    }
}

/// The `write_config` head with `listen = LISTEN` (a TOML value: `"\"127.0.0.1:0 tls\""` or a
/// list) instead of the plain port-0 listener, then `body`; written as `ampd.toml` beside the
/// root.
pub fn write_tls_config(root: &TempRoot, arch: &str, listen: &str, body: &str) -> PathBuf {
    let head = super::config_head(arch).replacen(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = {listen}"),
        1,
    );
    let path = root.outside_dir().join("ampd.toml");
    std::fs::write(&path, format!("{head}{body}")).expect("write ampd.toml");
    path
}

/// Every listener a ready line names, in order: (`true` for a TLS one, its address). The ready
/// line names each as `http://ADDR/` or `https://ADDR/`.
pub fn listeners(ready_line: &str) -> Vec<(bool, SocketAddr)> {
    let mut found = Vec::new();
    let mut rest = ready_line;
    while let Some(start) = rest.find("http") {
        let tail = &rest[start..];
        let (tls, after) = if let Some(after) = tail.strip_prefix("https://") {
            (true, after)
        } else if let Some(after) = tail.strip_prefix("http://") {
            (false, after)
        } else {
            rest = &tail[4..];
            continue;
        };
        let end = after.find('/').unwrap_or(after.len());
        if let Ok(addr) = after[..end].parse() {
            found.push((tls, addr));
        }
        rest = &after[end..];
    }
    found
}

/// The first TLS listener's address a ready line names.
pub fn tls_addr(ready_line: &str) -> SocketAddr {
    listeners(ready_line)
        .into_iter()
        .find(|(tls, _)| *tls)
        .unwrap_or_else(|| panic!("no https:// listener in the ready line {ready_line:?}"))
        .1
}

/// The first plain listener's address a ready line names.
pub fn plain_addr(ready_line: &str) -> SocketAddr {
    listeners(ready_line)
        .into_iter()
        .find(|(tls, _)| !*tls)
        .unwrap_or_else(|| panic!("no http:// listener in the ready line {ready_line:?}"))
        .1
}

/// `curl -sS --cacert CA --resolve NAME:PORT:127.0.0.1 https://NAME:PORT/PATH` with `extra`
/// arguments first (bounded: `curl`'s own `--max-time`).
pub fn curl_https(ca: &Path, name: &str, addr: SocketAddr, path: &str, extra: &[&str]) -> Output {
    let port = addr.port();
    let mut args: Vec<String> = vec![
        "-sS".into(),
        "--cacert".into(),
        ca.display().to_string(),
        "--resolve".into(),
        format!("{name}:{port}:127.0.0.1"),
    ];
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    args.push(format!("https://{name}:{port}{path}"));
    super::curl(args)
}

/// Runs `openssl s_client -connect ADDR ARGS…` with `input` on its stdin, bounded by
/// `within` (coreutils `timeout`); returns its exit code, stdout and stderr.
pub fn s_client(
    addr: SocketAddr,
    args: &[&str],
    input: &[u8],
    within: Duration,
) -> (Option<i32>, String, String) {
    let mut child = Command::new("timeout")
        .args([
            "-k".to_owned(),
            "2".to_owned(),
            format!("{}", within.as_secs().max(1)),
            "openssl".to_owned(),
            "s_client".to_owned(),
            "-connect".to_owned(),
            addr.to_string(),
        ])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn openssl s_client");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_vec();
    // The writer may block if s_client stops reading; a thread keeps the wait below bounded.
    let writer = thread::spawn(move || {
        let _ = stdin.write_all(&input);
        // Keep stdin open a moment so s_client does not quit before its answer arrives.
        thread::sleep(Duration::from_millis(1500));
    });
    let output = child.wait_with_output().expect("wait for s_client");
    let _ = writer.join();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls_client.py")
}

/// tests/fixtures/tls_client.py as a child process: named TLS connections held open between
/// commands, sessions kept for resumption. Killed on Drop.
pub struct PyTls {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<String>,
}

impl PyTls {
    pub fn start() -> PyTls {
        let mut child = Command::new("python3")
            .arg(client_script())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 must be installed");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, answers) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        PyTls {
            child,
            stdin,
            answers,
        }
    }

    /// Sends one command, returns its answer (bounded by 30 s).
    pub fn call(&mut self, command: Value) -> Value {
        let line = format!("{command}\n");
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .expect("write to tls_client.py");
        let answer = self
            .answers
            .recv_timeout(CLIENT_TIMEOUT)
            .unwrap_or_else(|_| panic!("tls_client.py gave no answer to {command}"));
        serde_json::from_str(&answer).unwrap_or_else(|_| panic!("tls_client.py said {answer:?}"))
    }

    /// Opens connection `id` to `port` with `settings` (see tls_client.py: `server_name`,
    /// `cafile`, `cert`, `key`, `min`, `max`, `alpn`, `resume`); the handshake's answer.
    pub fn connect(&mut self, id: &str, port: u16, settings: Value) -> Value {
        let mut command = json!({"op": "connect", "id": id, "port": port});
        if let (Value::Object(into), Value::Object(from)) = (&mut command, settings) {
            into.extend(from);
        }
        self.call(command)
    }

    /// The same, asserting the handshake succeeded.
    pub fn connect_ok(&mut self, id: &str, port: u16, settings: Value) -> Value {
        let answer = self.connect(id, port, settings);
        assert_eq!(answer["ok"], true, "handshake {id} failed: {answer}");
        answer
    }

    /// `METHOD PATH` with `headers` on connection `id`.
    pub fn request(&mut self, id: &str, method: &str, path: &str, headers: Value) -> Value {
        self.call(
            json!({"op": "request", "id": id, "method": method, "path": path,
                         "headers": headers}),
        )
    }

    /// `GET PATH` on connection `id`, asserting an answer came.
    pub fn get(&mut self, id: &str, path: &str) -> Value {
        let answer = self.request(id, "GET", path, json!({}));
        assert_eq!(answer["ok"], true, "GET {path} on {id} failed: {answer}");
        answer
    }

    pub fn close(&mut self, id: &str) {
        self.call(json!({"op": "close", "id": id}));
    }
}

impl Drop for PyTls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of header `name` (case-insensitive) in a tls_client.py response.
pub fn header<'a>(response: &'a Value, name: &str) -> Option<&'a str> {
    response["headers"].as_array()?.iter().find_map(|pair| {
        let pair = pair.as_array()?;
        (pair[0].as_str()?.eq_ignore_ascii_case(name)).then(|| pair[1].as_str())?
    })
}

/// Waits (bounded by `within`) until `check` holds, trying every 50 ms; whether it did.
pub fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
}
