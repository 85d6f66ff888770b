//! `TlsContext` end to end without sockets: certificates made at test time (a test CA signing
//! every leaf), the configuration read by the real loader, and rustls's client and server
//! connections exchanging bytes in memory, the server side accepting as `session` does
//! (`Acceptor` → `config_for` → `into_connection`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::Acceptor;
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, HandshakeKind, ServerConnection,
};

use super::*;
use crate::config::load::load_str;

/// A directory of its own, removed at the end of the test.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "ampd-tls-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA and the leaves it signs, written as PEM files into a temporary directory.
struct Pki {
    dir: TempDir,
    ca: CertifiedIssuer<'static, KeyPair>,
}

/// A leaf's files and its certificate.
struct Leaf {
    certificate: PathBuf,
    key: PathBuf,
    der: CertificateDer<'static>,
    key_der: PrivateKeyDer<'static>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("ampd test CA {name}"));
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let pki = Pki {
            dir: TempDir::new(name),
            ca,
        };
        std::fs::write(pki.path("ca.pem"), pki.ca.pem()).unwrap();
        pki
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.0.join(file)
    }

    /// A server certificate for `names`, as `FILE.pem` and `FILE.key`.
    fn leaf(&self, file: &str, names: &[&str]) -> Leaf {
        self.issue(file, names, ExtendedKeyUsagePurpose::ServerAuth)
    }

    fn client(&self, file: &str) -> Leaf {
        self.issue(file, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn issue(&self, file: &str, names: &[&str], usage: ExtendedKeyUsagePurpose) -> Leaf {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.extended_key_usages = vec![usage];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, file);
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.ca).unwrap();
        let leaf = Leaf {
            certificate: self.path(&format!("{file}.pem")),
            key: self.path(&format!("{file}.key")),
            der: certificate.der().clone(),
            key_der: PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        };
        // The chain: the leaf, then its issuer (as a real chain file has its intermediates).
        std::fs::write(&leaf.certificate, certificate.pem() + &self.ca.pem()).unwrap();
        std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
        leaf
    }
}

/// `text` read by the configuration loader as if it were `DIR/ampd.toml`.
fn load(dir: &Path, text: &str) -> Config {
    load_str(text, &dir.join("ampd.toml")).unwrap_or_else(|error| panic!("{error}"))
}

fn context(config: &Config) -> Arc<TlsContext> {
    TlsContext::build(config)
        .unwrap_or_else(|error| panic!("{error}"))
        .expect("a TLS listener")
}

const LISTEN: &str = "listen = [\"127.0.0.1:0 tls\"]\n";

/// Accepts any server certificate and remembers the OCSP response stapled to it: these tests
/// look at which certificate was chosen, not at whether a CA vouches for it.
#[derive(Debug, Default)]
struct AnyServer {
    ocsp: Mutex<Vec<u8>>,
}

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.ocsp.lock().unwrap() = ocsp_response.to_vec();
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            certificate,
            signature,
            &crate::tls::provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            certificate,
            signature,
            &crate::tls::provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        crate::tls::provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A client that takes any certificate, offers `http/1.1`, and presents `certificate` if given.
fn client(certificate: Option<&Leaf>) -> (ClientConfig, Arc<AnyServer>) {
    client_with(rustls::ALL_VERSIONS, certificate)
}

fn client_with(
    versions: &[&'static rustls::SupportedProtocolVersion],
    certificate: Option<&Leaf>,
) -> (ClientConfig, Arc<AnyServer>) {
    let verifier = Arc::new(AnyServer::default());
    let builder = ClientConfig::builder_with_provider(crate::tls::provider())
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone());
    let mut config = match certificate {
        Some(leaf) => builder
            .with_client_auth_cert(vec![leaf.der.clone()], leaf.key_der.clone_key())
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (config, verifier)
}

/// Both ends after a handshake through `context` for `name` (`None`: no SNI).
struct Handshake {
    client: ClientConnection,
    server: ServerConnection,
}

/// Runs a handshake in memory; the error is the first either side raised (or the refusal by
/// `config_for`).
fn handshake(
    context: &TlsContext,
    config: ClientConfig,
    name: Option<&str>,
) -> Result<Handshake, String> {
    let mut config = config;
    config.enable_sni = name.is_some();
    let server_name = ServerName::try_from(name.unwrap_or("no-sni.test").to_owned()).unwrap();
    let mut client = ClientConnection::new(Arc::new(config), server_name).unwrap();
    let mut acceptor = Acceptor::default();
    let mut bytes = Vec::new();
    let accepted = loop {
        bytes.clear();
        client.write_tls(&mut bytes).unwrap();
        assert!(!bytes.is_empty(), "the client has a hello to send");
        acceptor.read_tls(&mut bytes.as_slice()).unwrap();
        if let Some(accepted) = acceptor.accept().map_err(|(error, _)| error.to_string())? {
            break accepted;
        }
    };
    let Some(server_config) = context.config_for(&accepted.client_hello()) else {
        return Err("refused: no configuration for this hello".to_owned());
    };
    let mut server = accepted
        .into_connection(server_config)
        .map_err(|(error, _)| error.to_string())?;
    // Bounded: a TLS 1.2 or 1.3 handshake takes at most a few flights.
    for _ in 0..10 {
        move_records(&mut server, &mut client)?;
        move_records(&mut client, &mut server)?;
        if !client.is_handshaking() && !server.is_handshaking() {
            // The tickets TLS 1.3 sends after the handshake.
            move_records(&mut server, &mut client)?;
            return Ok(Handshake { client, server });
        }
    }
    Err("the handshake did not finish".to_owned())
}

/// Everything `from` has to send, read and processed by `to`.
fn move_records<F, T>(from: &mut F, to: &mut T) -> Result<(), String>
where
    F: std::ops::DerefMut<Target = rustls::ConnectionCommon<F::Data>> + Side,
    T: std::ops::DerefMut<Target = rustls::ConnectionCommon<T::Data>> + Side,
{
    let mut bytes = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut bytes).unwrap();
    }
    let mut slice = bytes.as_slice();
    while !slice.is_empty() {
        to.read_tls(&mut slice).unwrap();
        to.process_new_packets()
            .map_err(|error| error.to_string())?;
    }
    Ok(())
}

/// Names the connection's data type, so `move_records` can take either side.
trait Side {
    type Data;
}

impl Side for ClientConnection {
    type Data = rustls::client::ClientConnectionData;
}

impl Side for ServerConnection {
    type Data = rustls::server::ServerConnectionData;
}

fn leaf_of(handshake: &Handshake) -> CertificateDer<'static> {
    handshake.client.peer_certificates().unwrap()[0].clone()
}

/// Three sites: `a.test` and `*.b.test` with certificates of their own, and the default.
fn three_sites(pki: &Pki) -> (Config, [Leaf; 3]) {
    let a = pki.leaf("a", &["a.test"]);
    let b = pki.leaf("b", &["*.b.test"]);
    let default = pki.leaf("default", &["default.test"]);
    let config = load(
        &pki.dir.0,
        &format!(
            "{LISTEN}\
             [[site]]\nroot = \"/tmp\"\ncertificate = \"default.pem\"\ncertificate_key = \"default.key\"\n\
             [[site]]\nserver_names = [\"a.test\"]\nroot = \"/tmp\"\ncertificate = \"a.pem\"\ncertificate_key = \"a.key\"\n\
             [[site]]\nserver_names = [\"*.b.test\"]\nroot = \"/tmp\"\ncertificate = \"b.pem\"\ncertificate_key = \"b.key\"\n\
             [[site]]\nserver_names = [\"c.test\"]\nroot = \"/tmp\"\n"
        ),
    );
    (config, [a, b, default])
}

#[test]
fn sni_chooses_the_sites_certificate() {
    let pki = Pki::new("sni");
    let (config, [a, b, default]) = three_sites(&pki);
    let context = context(&config);
    for (name, expected) in [
        (Some("a.test"), &a),
        (Some("A.Test"), &a),
        (Some("www.b.test"), &b),
        (Some("deep.www.b.test"), &b),
        // The bare name is not below the wildcard, as in Host routing.
        (Some("b.test"), &default),
        (Some("unknown.test"), &default),
        // A site without a certificate of its own offers the default one.
        (Some("c.test"), &default),
        (None, &default),
    ] {
        let handshake = handshake(&context, client(None).0, name).unwrap();
        assert_eq!(leaf_of(&handshake), expected.der, "{name:?}");
        assert_eq!(handshake.client.alpn_protocol(), Some(&b"http/1.1"[..]));
        // The chain goes with the leaf.
        assert_eq!(handshake.client.peer_certificates().unwrap().len(), 2);
    }
}

#[test]
fn the_longest_wildcard_and_then_the_exact_name_win() {
    let pki = Pki::new("wildcard");
    let wide = pki.leaf("wide", &["*.b.test"]);
    let deep = pki.leaf("deep", &["*.deep.b.test"]);
    let exact = pki.leaf("exact", &["x.deep.b.test"]);
    let config = load(
        &pki.dir.0,
        &format!(
            "{LISTEN}\
             [[site]]\nserver_names = [\"*.b.test\"]\nroot = \"/tmp\"\ncertificate = \"wide.pem\"\ncertificate_key = \"wide.key\"\n\
             [[site]]\nserver_names = [\"*.deep.b.test\"]\nroot = \"/tmp\"\ncertificate = \"deep.pem\"\ncertificate_key = \"deep.key\"\n\
             [[site]]\nserver_names = [\"x.deep.b.test\"]\nroot = \"/tmp\"\ncertificate = \"exact.pem\"\ncertificate_key = \"exact.key\"\n"
        ),
    );
    let context = context(&config);
    for (name, expected) in [
        ("y.b.test", &wide),
        ("y.deep.b.test", &deep),
        ("x.deep.b.test", &exact),
        // No match: the default site, the first.
        ("other.test", &wide),
    ] {
        let handshake = handshake(&context, client(None).0, Some(name)).unwrap();
        assert_eq!(leaf_of(&handshake), expected.der, "{name}");
    }
}

#[test]
fn the_tls_certificate_is_the_default_when_the_default_site_has_none() {
    let pki = Pki::new("fallback");
    let fallback = pki.leaf("fallback", &["fallback.test"]);
    let a = pki.leaf("a", &["a.test"]);
    let config = load(
        &pki.dir.0,
        &format!(
            "{LISTEN}[tls]\ncertificate = \"fallback.pem\"\ncertificate_key = \"fallback.key\"\n\
             [[site]]\nroot = \"/tmp\"\n\
             [[site]]\nserver_names = [\"a.test\"]\nroot = \"/tmp\"\ncertificate = \"a.pem\"\ncertificate_key = \"a.key\"\n"
        ),
    );
    let context = context(&config);
    for (name, expected) in [
        (Some("a.test"), &a),
        (Some("other.test"), &fallback),
        (None, &fallback),
    ] {
        let handshake = handshake(&context, client(None).0, name).unwrap();
        assert_eq!(leaf_of(&handshake), expected.der, "{name:?}");
    }
}

#[test]
fn a_name_without_any_certificate_is_refused() {
    let pki = Pki::new("none");
    pki.leaf("a", &["a.test"]);
    let mut config = load(
        &pki.dir.0,
        &format!(
            "{LISTEN}[[site]]\nserver_names = [\"a.test\"]\nroot = \"/tmp\"\n\
             certificate = \"a.pem\"\ncertificate_key = \"a.key\"\n\
             [[site]]\nserver_names = [\"other.test\"]\nroot = \"/tmp\"\n"
        ),
    );
    // The loader refuses a TLS listener without a default certificate; what if the default
    // site is not the one with the certificate: the other names have nothing to offer.
    config.sites[0].default = false;
    config.sites[1].default = true;
    let context = context(&config);
    assert!(handshake(&context, client(None).0, Some("a.test")).is_ok());
    let refused = handshake(&context, client(None).0, Some("other.test")).err();
    assert_eq!(
        refused.as_deref(),
        Some("refused: no configuration for this hello")
    );
    assert!(handshake(&context, client(None).0, None).is_err());
}

#[test]
fn no_tls_listener_no_context() {
    let pki = Pki::new("plain");
    let config = load(&pki.dir.0, "[[site]]\nroot = \"/tmp\"\n");
    assert!(TlsContext::build(&config).unwrap().is_none());
}

/// Builds `text` (in `pki`'s directory) and returns the error's text.
fn build_error(pki: &Pki, text: &str) -> String {
    let config = load(&pki.dir.0, &format!("{LISTEN}{text}"));
    TlsContext::build(&config)
        .expect_err("a build error")
        .to_string()
}

const SITE_AB: &str =
    "[[site]]\nroot = \"/tmp\"\ncertificate = \"a.pem\"\ncertificate_key = \"b.key\"\n";

#[test]
fn a_key_that_is_not_the_certificates_is_refused_naming_both() {
    let pki = Pki::new("mismatch");
    pki.leaf("a", &["a.test"]);
    pki.leaf("b", &["b.test"]);
    let error = build_error(&pki, SITE_AB);
    assert_eq!(
        error,
        format!(
            "certificate {} does not match key {}",
            pki.path("a.pem").display(),
            pki.path("b.key").display()
        )
    );
    // The same for the [tls] certificate.
    let error = build_error(
        &pki,
        "[tls]\ncertificate = \"b.pem\"\ncertificate_key = \"a.key\"\n[[site]]\nroot = \"/tmp\"\n",
    );
    assert!(error.contains("b.pem does not match key"), "{error}");
}

#[test]
fn unreadable_and_unparsable_files_are_named() {
    let pki = Pki::new("bad");
    pki.leaf("a", &["a.test"]);
    std::fs::write(pki.path("garbage.pem"), "this is not PEM\n").unwrap();
    std::fs::write(pki.path("cut.pem"), "-----BEGIN CERTIFICATE-----\nMIIB\n").unwrap();
    std::fs::write(
        pki.path("broken.pem"),
        "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let site = |certificate: &str, key: &str| {
        format!("[[site]]\nroot = \"/tmp\"\ncertificate = \"{certificate}\"\ncertificate_key = \"{key}\"\n")
    };
    for (text, file, reason) in [
        (
            site("missing.pem", "a.key"),
            "missing.pem",
            "No such file or directory",
        ),
        (
            site("a.pem", "missing.key"),
            "missing.key",
            "No such file or directory",
        ),
        (
            site("garbage.pem", "a.key"),
            "garbage.pem",
            "no certificate in it",
        ),
        (
            site("broken.pem", "a.key"),
            "broken.pem",
            "the base64 inside a PEM section does not decode",
        ),
        // Words, not the parser's list of bytes.
        (
            site("cut.pem", "a.key"),
            "cut.pem",
            "a PEM section is cut short: no \"-----END CERTIFICATE-----\" line",
        ),
        (
            site("a.pem", "garbage.pem"),
            "garbage.pem",
            "no private key",
        ),
        // A certificate where the key should be.
        (site("a.pem", "a.pem"), "a.pem", "no private key"),
        (
            site("a.pem", "a.key") + "ocsp_response = \"missing.der\"\n",
            "missing.der",
            "No such file or directory",
        ),
        (
            site("a.pem", "a.key") + "ocsp_response = \"a.pem\"\n",
            "a.pem",
            "not a DER OCSP response",
        ),
        (
            site("a.pem", "a.key")
                + "client_certificates = \"required\"\nclient_ca = \"garbage.pem\"\n",
            "garbage.pem",
            "no certificate in it",
        ),
        (
            site("a.pem", "a.key") + "client_certificates = \"optional\"\nclient_ca = \"no.pem\"\n",
            "no.pem",
            "No such file or directory",
        ),
    ] {
        let error = build_error(&pki, &text);
        let path = pki.path(file).display().to_string();
        assert!(error.starts_with(&format!("{path}: ")), "{file}: {error}");
        assert!(error.contains(reason), "{file}: {error}");
    }
}

#[test]
fn client_certificates_required_optional_and_off() {
    let pki = Pki::new("mtls");
    pki.leaf("server", &["a.test", "b.test", "c.test"]);
    let alice = pki.client("alice");
    let stranger_ca = Pki::new("stranger");
    let mallory = stranger_ca.client("mallory");
    let files = "certificate = \"server.pem\"\ncertificate_key = \"server.key\"\n";
    let config = load(
        &pki.dir.0,
        &format!(
            "{LISTEN}[[site]]\nserver_names = [\"a.test\"]\nroot = \"/tmp\"\n{files}\
             client_certificates = \"required\"\nclient_ca = \"ca.pem\"\n\
             [[site]]\nserver_names = [\"b.test\"]\nroot = \"/tmp\"\n{files}\
             client_certificates = \"optional\"\nclient_ca = \"ca.pem\"\n\
             [[site]]\nserver_names = [\"c.test\"]\nroot = \"/tmp\"\n{files}"
        ),
    );
    let context = context(&config);
    let presented = |handshake: &Handshake| {
        handshake
            .server
            .peer_certificates()
            .map(|chain| chain[0].clone())
    };
    // Required: a certificate the CA signed is let in and seen; none, or a stranger's, is not.
    let with_alice = handshake(&context, client(Some(&alice)).0, Some("a.test")).unwrap();
    assert_eq!(presented(&with_alice), Some(alice.der.clone()));
    assert!(handshake(&context, client(None).0, Some("a.test")).is_err());
    let error = handshake(&context, client(Some(&mallory)).0, Some("a.test"))
        .err()
        .unwrap();
    assert!(
        error.contains("UnknownIssuer") || error.contains("issuer"),
        "{error}"
    );
    // Optional: with or without, but never a stranger's.
    let with_alice = handshake(&context, client(Some(&alice)).0, Some("b.test")).unwrap();
    assert_eq!(presented(&with_alice), Some(alice.der.clone()));
    let without = handshake(&context, client(None).0, Some("b.test")).unwrap();
    assert_eq!(presented(&without), None);
    assert!(handshake(&context, client(Some(&mallory)).0, Some("b.test")).is_err());
    // Off: not asked for.
    let off = handshake(&context, client(Some(&alice)).0, Some("c.test")).unwrap();
    assert_eq!(presented(&off), None);
}

#[test]
fn the_ocsp_response_is_stapled() {
    let pki = Pki::new("ocsp");
    pki.leaf("a", &["a.test"]);
    // Not a real response (rustls passes it through; the client judges it): DER-shaped bytes.
    let response = [0x30, 0x03, 0x0a, 0x01, 0x00];
    std::fs::write(pki.path("a.ocsp.der"), response).unwrap();
    let config = load(
        &pki.dir.0,
        &format!(
            "{LISTEN}[[site]]\nroot = \"/tmp\"\ncertificate = \"a.pem\"\ncertificate_key = \"a.key\"\n\
             ocsp_response = \"a.ocsp.der\"\n"
        ),
    );
    let context = context(&config);
    for versions in [
        &[&rustls::version::TLS13][..],
        &[&rustls::version::TLS12][..],
    ] {
        let (client, seen) = client_with(versions, None);
        // The client asks for it (status_request) by default.
        handshake(&context, client, Some("a.test")).unwrap();
        assert_eq!(*seen.ocsp.lock().unwrap(), response, "{versions:?}");
    }
}

#[test]
fn ciphers_and_min_version_are_what_is_negotiated() {
    let pki = Pki::new("ciphers");
    pki.leaf("a", &["a.test"]);
    let site = "[[site]]\nroot = \"/tmp\"\ncertificate = \"a.pem\"\ncertificate_key = \"a.key\"\n";
    let config = load(
        &pki.dir.0,
        &format!(
            "{LISTEN}[tls]\nmin_version = \"1.3\"\n\
             ciphers = [\"TLS13_CHACHA20_POLY1305_SHA256\", \"TLS13_AES_128_GCM_SHA256\"]\n{site}"
        ),
    );
    let context = context(&config);
    let done = handshake(&context, client(None).0, Some("a.test")).unwrap();
    // The server's order, not the client's (which puts AES first).
    assert_eq!(
        done.server
            .negotiated_cipher_suite()
            .unwrap()
            .suite()
            .as_str(),
        Some("TLS13_CHACHA20_POLY1305_SHA256")
    );
    assert_eq!(
        done.server.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    let tls12_only = client_with(&[&rustls::version::TLS12], None).0;
    assert!(handshake(&context, tls12_only, Some("a.test")).is_err());
    // By default TLS 1.2 is offered too.
    let config = load(&pki.dir.0, &format!("{LISTEN}{site}"));
    let tls12_only = client_with(&[&rustls::version::TLS12], None).0;
    let done = handshake(
        &super::super::TlsContext::build(&config).unwrap().unwrap(),
        tls12_only,
        Some("a.test"),
    )
    .unwrap();
    assert_eq!(
        done.server.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    // An unknown name is refused, naming it and what there is.
    let error = build_error(
        &pki,
        &format!("[tls]\nciphers = [\"TLS_RSA_WITH_RC4_128_SHA\"]\n{site}"),
    );
    assert!(
        error.contains("unknown cipher suite 'TLS_RSA_WITH_RC4_128_SHA'"),
        "{error}"
    );
    assert!(error.contains("TLS13_AES_256_GCM_SHA384"), "{error}");
    // TLS 1.3 only with TLS 1.2 suites only: nothing to negotiate.
    let error = build_error(
        &pki,
        &format!(
            "[tls]\nmin_version = \"1.3\"\nciphers = [\"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\"]\n{site}"
        ),
    );
    assert!(error.contains("leave nothing to negotiate"), "{error}");
}

#[test]
fn a_second_handshake_resumes_even_in_another_generation() {
    let pki = Pki::new("resume");
    pki.leaf("a", &["a.test"]);
    let text = format!(
        "{LISTEN}[[site]]\nroot = \"/tmp\"\ncertificate = \"a.pem\"\ncertificate_key = \"a.key\"\n"
    );
    let first = context(&load(&pki.dir.0, &text));
    // A reload: a new context, the same process secret and cache.
    let second = context(&load(&pki.dir.0, &text));
    for versions in [
        &[&rustls::version::TLS13][..],
        &[&rustls::version::TLS12][..],
    ] {
        let client = Arc::new(client_with(versions, None).0);
        let full = handshake(&first, (*client).clone(), Some("a.test")).unwrap();
        assert_eq!(full.server.handshake_kind(), Some(HandshakeKind::Full));
        let resumed = handshake(&second, (*client).clone(), Some("a.test")).unwrap();
        assert_eq!(
            resumed.server.handshake_kind(),
            Some(HandshakeKind::Resumed),
            "{versions:?}"
        );
    }
    // Tickets off and no cache: nothing to resume with.
    let off = context(&load(
        &pki.dir.0,
        &format!(
            "{LISTEN}[tls]\nsession_tickets = false\nsession_cache = 0\n{}",
            &text[LISTEN.len()..]
        ),
    ));
    let client = client(None).0;
    handshake(&off, client.clone(), Some("a.test")).unwrap();
    let again = handshake(&off, client, Some("a.test")).unwrap();
    assert_eq!(again.server.handshake_kind(), Some(HandshakeKind::Full));
}

/// What the tests' ACME lookups hand out.
static ACME_LEAF: Mutex<Option<Arc<CertifiedKey>>> = Mutex::new(None);
static ACME_CHALLENGE: Mutex<Option<Arc<CertifiedKey>>> = Mutex::new(None);

fn test_acme_certificate(site: &Site, _settings: &AcmeSettings) -> Option<Arc<CertifiedKey>> {
    assert_eq!(site.names, [HostName::Exact("acme.test".to_owned())]);
    ACME_LEAF.lock().unwrap().clone()
}

fn test_acme_challenge(name: &str, _settings: &AcmeSettings) -> Option<Arc<CertifiedKey>> {
    (name == "acme.test").then(|| ACME_CHALLENGE.lock().unwrap().clone())?
}

fn certified(leaf: &Leaf) -> Arc<CertifiedKey> {
    let files = CertificateFiles {
        certificate: leaf.certificate.clone(),
        key: leaf.key.clone(),
        ocsp_response: None,
    };
    Files::default()
        .certified_key(&files, &crate::tls::provider())
        .unwrap()
}

#[test]
fn an_acme_site_is_resolved_at_handshake_time_and_answers_its_challenge() {
    let pki = Pki::new("acme");
    let fallback = pki.leaf("fallback", &["fallback.test"]);
    let issued = pki.leaf("issued", &["acme.test"]);
    let challenge = pki.leaf("challenge", &["acme.test"]);
    let config = load(
        &pki.dir.0,
        "listen = [\"127.0.0.1:8080\", \"127.0.0.1:8443 tls\"]\n\
         [tls]\ncertificate = \"fallback.pem\"\ncertificate_key = \"fallback.key\"\n\
         [[site]]\nserver_names = [\"acme.test\"]\nroot = \"/tmp\"\ncertificate = \"acme\"\n",
    );
    let lookups = AcmeLookups {
        certificate: test_acme_certificate,
        challenge: test_acme_challenge,
    };
    let context = TlsContext::build_with(&config, lookups).unwrap().unwrap();
    // Not issued yet: the default certificate.
    let early = handshake(&context, client(None).0, Some("acme.test")).unwrap();
    assert_eq!(leaf_of(&early), fallback.der);
    // Issued (or renewed): the next handshake has it, with no new context.
    *ACME_LEAF.lock().unwrap() = Some(certified(&issued));
    let late = handshake(&context, client(None).0, Some("acme.test")).unwrap();
    assert_eq!(leaf_of(&late), issued.der);
    // A validation handshake (RFC 8737 §3) gets the challenge certificate and acme-tls/1 only.
    let validator = || {
        let mut config = client(None).0;
        config.alpn_protocols = vec![b"acme-tls/1".to_vec()];
        config
    };
    *ACME_CHALLENGE.lock().unwrap() = Some(certified(&challenge));
    let validation = handshake(&context, validator(), Some("acme.test")).unwrap();
    assert_eq!(leaf_of(&validation), challenge.der);
    assert_eq!(validation.server.alpn_protocol(), Some(&b"acme-tls/1"[..]));
    // No pending challenge: the site's configuration, which does not speak acme-tls/1.
    *ACME_CHALLENGE.lock().unwrap() = None;
    assert!(handshake(&context, validator(), Some("acme.test")).is_err());
    // An ordinary client is never given the challenge certificate.
    *ACME_CHALLENGE.lock().unwrap() = Some(certified(&challenge));
    let ordinary = handshake(&context, client(None).0, Some("acme.test")).unwrap();
    assert_eq!(leaf_of(&ordinary), issued.der);
}

/// `client(None)` offering `protocols` in ALPN instead of `http/1.1` alone.
fn client_offering(protocols: &[&[u8]]) -> ClientConfig {
    let mut config = client(None).0;
    config.alpn_protocols = protocols.iter().map(|id| id.to_vec()).collect();
    config
}

#[test]
fn alpn_offers_h2_first_unless_http2_is_turned_off() {
    let pki = Pki::new("alpn");
    let (enabled, _) = three_sites(&pki);
    let mut disabled = enabled.clone();
    disabled.http2.enabled = false;
    let h2: &[u8] = ampd_http::h2::ALPN_H2;
    let http1: &[u8] = super::super::ALPN_HTTP1;
    for (config, offered) in [(&enabled, vec![h2, http1]), (&disabled, vec![http1])] {
        let context = context(config);
        // Every site's configuration (SNI picks among them) offers the same list.
        for server in context.sites.iter().flatten() {
            assert_eq!(server.alpn_protocols, offered);
        }
        for name in [Some("a.test"), Some("www.b.test"), Some("c.test"), None] {
            // A browser offers both: it gets the server's first choice it shares.
            let both = handshake(&context, client_offering(&[h2, http1]), name).unwrap();
            assert_eq!(both.server.alpn_protocol(), Some(offered[0]), "{name:?}");
            assert_eq!(both.client.alpn_protocol(), Some(offered[0]), "{name:?}");
            // An HTTP/1.1-only client is served HTTP/1.1 either way.
            let old = handshake(&context, client_offering(&[http1]), name).unwrap();
            assert_eq!(old.server.alpn_protocol(), Some(http1), "{name:?}");
        }
    }
    // A client that speaks only h2 is refused when HTTP/2 is off (RFC 7301 §3.2:
    // no_application_protocol), and served when it is on.
    let h2_only = || client_offering(&[h2]);
    assert!(handshake(&context(&enabled), h2_only(), Some("a.test")).is_ok());
    let refused = handshake(&context(&disabled), h2_only(), Some("a.test"))
        .err()
        .expect("no protocol in common");
    assert!(
        refused.contains("doesn't support any known protocol"),
        "{refused}"
    );
}
