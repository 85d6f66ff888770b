//! The CGI meta-variables (RFC 3875 §4.1) of a request, one builder for CGI scripts (their
//! environment) and FastCGI applications (their `FCGI_PARAMS`), and where a location's script
//! is: `SCRIPT_NAME`, `PATH_INFO` and the file behind them.
//!
//! Owns: the names, their values and what is never passed (`HTTP_PROXY`: the httpoxy class of
//! attacks, where an application takes a client's `Proxy:` header for its own outbound proxy;
//! fields with `_` in their names, which would alias `-` ones; the body's fields, which have
//! their own variables; a `Host` that an absolute-form target's authority replaces). Must not touch: processes and sockets (`crate::programs`, the engine).

use std::net::SocketAddr;
use std::path::PathBuf;

use ampd_http::request::{split_target, RequestHead};

use crate::log::build_info::VERSION;
use crate::site::{Route, ScriptSplit};
use crate::tls::TlsInfo;

/// Where a request's script is (RFC 3875 §4.1.13, §4.1.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::conn) struct ScriptPath {
    /// The URL path that names the script.
    pub script_name: String,
    /// The path after it (empty: none).
    pub path_info: String,
    /// The file: the location's root (or alias directory) and the script's path below it.
    pub filename: PathBuf,
}

/// The script a CGI or FastCGI location runs for the normalised request path `clean`, when
/// the path says (`Route::script_split`); `None` for a CGI directory, whose script is found on
/// disk segment by segment (`programs::cgi::Script::Search`), or a path that names no script.
pub(in crate::conn) fn script_path(route: &Route, clean: &str) -> Option<ScriptPath> {
    named_script(route, route.script_split(clean)?)
}

/// The script of a split that names one (`ScriptSplit::Known`).
pub(in crate::conn) fn named_script(route: &Route, split: ScriptSplit<'_>) -> Option<ScriptPath> {
    let ScriptSplit::Known {
        script_name,
        index,
        path_info,
    } = split
    else {
        return None;
    };
    Some(ScriptPath {
        script_name: format!("{script_name}{index}"),
        path_info: path_info.to_owned(),
        filename: route.script_filename(script_name, index),
    })
}

/// What the meta-variables are made from besides the request head.
pub(in crate::conn) struct Request<'a> {
    pub head: &'a RequestHead,
    /// The target the client sent, when ampd routed the request again since (a fallback, a
    /// local redirect): `REQUEST_URI` is it.
    pub requested: Option<&'a str>,
    /// The normalised path the request was routed by (`DOCUMENT_URI`).
    pub clean: &'a str,
    pub client: SocketAddr,
    /// The address the request came in on.
    pub server: SocketAddr,
    /// The body's length, when there is one (a chunked body is read whole first).
    pub content_length: Option<u64>,
    /// The user Basic authentication let in.
    pub user: Option<&'a str>,
    /// What the TLS handshake settled; `None` over plain HTTP.
    pub tls: Option<&'a TlsInfo>,
}

/// The meta-variables, in a stable order; `script` is `None` for a script still to be found
/// (its variables are added where it is: `programs::cgi`).
pub(in crate::conn) fn meta_variables(
    request: &Request<'_>,
    route: &Route,
    script: Option<&ScriptPath>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let head = request.head;
    let mut variables: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(32 + head.headers.len());
    let mut set = |name: &str, value: &[u8]| variables.push((name.into(), value.to_vec()));
    let (request_uri, _) = origin_form(request.requested.unwrap_or(&head.target));
    let (_, query) = origin_form(&head.target);
    set("GATEWAY_INTERFACE", b"CGI/1.1");
    set("SERVER_SOFTWARE", format!("ampd/{VERSION}").as_bytes());
    set("SERVER_PROTOCOL", head.version.as_str().as_bytes());
    let host = head
        .host()
        .map(strip_port)
        .filter(|host| !host.is_empty())
        .map_or_else(|| request.server.ip().to_string(), str::to_owned);
    set("SERVER_NAME", host.as_bytes());
    set("SERVER_ADDR", request.server.ip().to_string().as_bytes());
    set("SERVER_PORT", request.server.port().to_string().as_bytes());
    set(
        "REQUEST_SCHEME",
        if request.tls.is_some() {
            b"https"
        } else {
            b"http"
        },
    );
    set("REQUEST_METHOD", head.method.as_str().as_bytes());
    set("REQUEST_URI", request_uri.as_bytes());
    set("QUERY_STRING", query.unwrap_or("").as_bytes());
    set("DOCUMENT_URI", request.clean.as_bytes());
    set(
        "DOCUMENT_ROOT",
        route
            .settings
            .static_files
            .root
            .as_os_str()
            .as_encoded_bytes(),
    );
    set("REMOTE_ADDR", request.client.ip().to_string().as_bytes());
    set("REMOTE_PORT", request.client.port().to_string().as_bytes());
    if let Some(user) = request.user {
        set("AUTH_TYPE", b"Basic");
        set("REMOTE_USER", user.as_bytes());
    }
    if let Some(length) = request.content_length {
        set("CONTENT_LENGTH", length.to_string().as_bytes());
    }
    if let Some(content_type) = head.header("content-type") {
        set("CONTENT_TYPE", content_type);
    }
    // php-cgi refuses to run without it unless `cgi.force_redirect` is off.
    set("REDIRECT_STATUS", b"200");
    if let Some(tls) = request.tls {
        tls_variables(tls, &mut set);
    }
    if let Some(script) = script {
        set("SCRIPT_NAME", script.script_name.as_bytes());
        set(
            "SCRIPT_FILENAME",
            script.filename.as_os_str().as_encoded_bytes(),
        );
        if !script.path_info.is_empty() {
            set("PATH_INFO", script.path_info.as_bytes());
            let translated = route.script_filename(&script.path_info, "");
            set("PATH_TRANSLATED", translated.as_os_str().as_encoded_bytes());
        }
    }
    http_variables(head, &mut variables);
    for (name, value) in &route.settings.script.params {
        let name = name.as_bytes();
        variables.retain(|(existing, _)| existing != name);
        variables.push((name.to_vec(), value.as_bytes().to_vec()));
    }
    variables
}

/// `HTTPS=on` (what PHP's `$_SERVER['HTTPS']` and most frameworks test) and mod_ssl's `SSL_*`
/// variables, as Apache names them (nginx's `fastcgi_params` passes the same `HTTPS`).
fn tls_variables(tls: &TlsInfo, set: &mut impl FnMut(&str, &[u8])) {
    set("HTTPS", b"on");
    set("SSL_PROTOCOL", tls.protocol.as_bytes());
    set("SSL_CIPHER", tls.cipher.as_bytes());
    if let Some(name) = &tls.server_name {
        set("SSL_TLS_SNI", name.as_bytes());
    }
    set(
        "SSL_SESSION_RESUMED",
        if tls.resumed { b"Resumed" } else { b"Initial" },
    );
    let Some(client) = &tls.client else {
        // mod_ssl's value when no certificate was asked for or the client sent none.
        set("SSL_CLIENT_VERIFY", b"NONE");
        return;
    };
    // rustls refuses a handshake whose certificate does not verify: one here is verified.
    set("SSL_CLIENT_VERIFY", b"SUCCESS");
    set("SSL_CLIENT_S_DN", client.subject.as_bytes());
    set("SSL_CLIENT_I_DN", client.issuer.as_bytes());
    set("SSL_CLIENT_M_SERIAL", client.serial.as_bytes());
    set("SSL_CLIENT_V_START", client.not_before.as_bytes());
    set("SSL_CLIENT_V_END", client.not_after.as_bytes());
    set("SSL_CLIENT_CERT", client.pem.as_bytes());
}

/// `HTTP_*` for each request field (RFC 3875 §4.1.18), repeated fields joined. An
/// absolute-form target's authority replaces `Host` (RFC 9112 §3.2.2): it is what ampd routed
/// by and what `SERVER_NAME` says, so `HTTP_HOST` is it too (nginx's `$http_host` likewise).
fn http_variables(head: &RequestHead, variables: &mut Vec<(Vec<u8>, Vec<u8>)>) {
    let first = variables.len();
    let authority = match split_target(&head.target) {
        Some((Some(authority), _, _)) => Some(authority),
        _ => None,
    };
    if let Some(authority) = authority {
        variables.push((b"HTTP_HOST".to_vec(), authority.as_bytes().to_vec()));
    }
    for header in &head.headers {
        let name = &*header.name;
        if name.contains('_')
            || (authority.is_some() && name.eq_ignore_ascii_case("host"))
            || name.eq_ignore_ascii_case("proxy")
            || name.eq_ignore_ascii_case("content-length")
            || name.eq_ignore_ascii_case("content-type")
        {
            continue;
        }
        let mut variable = Vec::with_capacity(5 + name.len());
        variable.extend_from_slice(b"HTTP_");
        variable.extend(name.bytes().map(|byte| match byte {
            b'-' => b'_',
            byte => byte.to_ascii_uppercase(),
        }));
        match variables[first..]
            .iter_mut()
            .find(|(existing, _)| *existing == variable)
        {
            Some((_, value)) => {
                // Cookies are joined as a client joins them (RFC 6265 §5.4); other fields as
                // a list (RFC 9110 §5.3).
                let separator: &[u8] = if name.eq_ignore_ascii_case("cookie") {
                    b"; "
                } else {
                    b", "
                };
                value.extend_from_slice(separator);
                value.extend_from_slice(&header.value);
            }
            None => variables.push((variable, header.value.to_vec())),
        }
    }
}

/// A target's path and query (an absolute-form target's origin-form part), and its query.
fn origin_form(target: &str) -> (String, Option<&str>) {
    match split_target(target) {
        Some((Some(_), path, query)) => (
            query.map_or_else(|| path.to_owned(), |query| format!("{path}?{query}")),
            query,
        ),
        Some((None, _, query)) => (target.to_owned(), query),
        None => (target.to_owned(), None),
    }
}

fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map_or(host, |(address, _)| &host[..=address.len()]);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Handler, HandlerKind, LocationSettings, ScriptSettings};
    use crate::site::access::Access;
    use crate::tls::{ClientCertificate, TlsInfo};
    use ampd_http::request::{BodyFraming, Header, Method, Version};

    fn route(path: &str, handler: HandlerKind, script: ScriptSettings) -> Route {
        let mut settings = LocationSettings::new(PathBuf::from("/srv/www"));
        settings.handler = Handler::with_defaults(handler);
        settings.script = script;
        Route {
            path: path.to_owned(),
            regex: None,
            exact: false,
            access: Access::new(&settings.access),
            settings,
            root: None,
            script_root: None,
            extra_headers: Box::default(),
            header_rules: None,
            strict_transport_security: Box::default(),
            https_redirect: None,
        }
    }

    fn head(target: &str, headers: &[(&str, &str)]) -> RequestHead {
        RequestHead {
            method: Method::Post,
            target: target.into(),
            version: Version::Http11,
            headers: headers
                .iter()
                .map(|(name, value)| Header {
                    name: (*name).into(),
                    value: value.as_bytes().into(),
                })
                .collect(),
            body: BodyFraming::Length(3),
            keep_alive: true,
            expect_continue: false,
        }
    }

    fn lookup<'v>(variables: &'v [(Vec<u8>, Vec<u8>)], name: &str) -> Option<&'v str> {
        variables
            .iter()
            .find(|(existing, _)| existing == name.as_bytes())
            .map(|(_, value)| std::str::from_utf8(value).unwrap())
    }

    #[test]
    fn an_extension_splits_at_its_first_segment() {
        let php = ScriptSettings {
            extension: Some(".php".to_owned()),
            ..ScriptSettings::default()
        };
        let route = route("/", HandlerKind::FastCgi, php);
        let script = script_path(&route, "/shop/index.php/a/b.php").unwrap();
        assert_eq!(script.script_name, "/shop/index.php");
        assert_eq!(script.path_info, "/a/b.php");
        assert_eq!(script.filename, PathBuf::from("/srv/www/shop/index.php"));
        assert_eq!(script_path(&route, "/x.php").unwrap().path_info, "");
        assert!(
            script_path(&route, "/.php/x").is_none(),
            "a bare extension names nothing"
        );
    }

    #[test]
    fn a_front_controller_takes_the_rest_as_path_info_and_an_application_its_mount_point() {
        let front = ScriptSettings {
            script: Some("/shop/index.php".to_owned()),
            ..ScriptSettings::default()
        };
        let script = script_path(
            &route("/shop/", HandlerKind::FastCgi, front),
            "/shop/cart/1",
        )
        .unwrap();
        assert_eq!(
            (script.script_name.as_str(), script.path_info.as_str()),
            ("/shop/index.php", "/cart/1")
        );
        let mounted = route("/flup/", HandlerKind::FastCgi, ScriptSettings::default());
        let script = script_path(&mounted, "/flup/a/b").unwrap();
        assert_eq!(
            (script.script_name.as_str(), script.path_info.as_str()),
            ("/flup", "/a/b")
        );
        assert!(
            script_path(
                &route("/cgi-bin/", HandlerKind::Cgi, ScriptSettings::default()),
                "/cgi-bin/x"
            )
            .is_none(),
            "a CGI directory's script is found on disk"
        );
    }

    #[test]
    fn the_variables_follow_rfc_3875_and_leave_out_httpoxy() {
        let route = route(
            "/",
            HandlerKind::FastCgi,
            ScriptSettings {
                extension: Some(".php".to_owned()),
                params: vec![("APP_ENV".to_owned(), "test".to_owned())],
                ..ScriptSettings::default()
            },
        );
        let head = head(
            "/app/index.php/x?a=1&b=%20",
            &[
                ("Host", "example.com:8080"),
                ("Content-Type", "text/plain"),
                ("Content-Length", "3"),
                ("Proxy", "http://evil:1"),
                ("X-Custom", "one"),
                ("x-custom", "two"),
                ("X_Alias", "spoof"),
                ("Cookie", "a=1"),
                ("Cookie", "b=2"),
            ],
        );
        let script = script_path(&route, "/app/index.php/x").unwrap();
        let variables = meta_variables(
            &Request {
                head: &head,
                requested: None,
                clean: "/app/index.php/x",
                client: "192.0.2.7:51000".parse().unwrap(),
                server: "127.0.0.1:8080".parse().unwrap(),
                content_length: Some(3),
                user: None,
                tls: None,
            },
            &route,
            Some(&script),
        );
        let get = |name| lookup(&variables, name);
        assert_eq!(get("GATEWAY_INTERFACE"), Some("CGI/1.1"));
        assert_eq!(get("SERVER_PROTOCOL"), Some("HTTP/1.1"));
        assert_eq!(get("SERVER_NAME"), Some("example.com"));
        assert_eq!(get("SERVER_PORT"), Some("8080"));
        assert_eq!(get("REQUEST_METHOD"), Some("POST"));
        assert_eq!(get("REQUEST_URI"), Some("/app/index.php/x?a=1&b=%20"));
        assert_eq!(get("QUERY_STRING"), Some("a=1&b=%20"));
        assert_eq!(get("SCRIPT_NAME"), Some("/app/index.php"));
        assert_eq!(get("PATH_INFO"), Some("/x"));
        assert_eq!(get("SCRIPT_FILENAME"), Some("/srv/www/app/index.php"));
        assert_eq!(get("PATH_TRANSLATED"), Some("/srv/www/x"));
        assert_eq!(get("REMOTE_ADDR"), Some("192.0.2.7"));
        assert_eq!(get("REMOTE_PORT"), Some("51000"));
        assert_eq!(get("CONTENT_LENGTH"), Some("3"));
        assert_eq!(get("CONTENT_TYPE"), Some("text/plain"));
        assert_eq!(get("REDIRECT_STATUS"), Some("200"));
        assert_eq!(get("HTTP_HOST"), Some("example.com:8080"));
        assert_eq!(get("HTTP_X_CUSTOM"), Some("one, two"));
        assert_eq!(get("HTTP_COOKIE"), Some("a=1; b=2"));
        assert_eq!(get("APP_ENV"), Some("test"));
        assert_eq!(get("REQUEST_SCHEME"), Some("http"));
        for absent in [
            "HTTP_PROXY",
            "HTTP_CONTENT_TYPE",
            "HTTP_CONTENT_LENGTH",
            "HTTP_X_ALIAS",
            "HTTPS",
            "SSL_PROTOCOL",
            "SSL_CLIENT_VERIFY",
        ] {
            assert_eq!(get(absent), None, "{absent}");
        }
    }

    /// RFC 9112 §3.2.2: an absolute-form target's authority replaces `Host`; ampd routes by
    /// it, so the program is told it in both `SERVER_NAME` and `HTTP_HOST` (as nginx does).
    #[test]
    fn an_absolute_form_authority_is_the_http_host() {
        let route = route("/", HandlerKind::Cgi, ScriptSettings::default());
        let head = head(
            "http://b.test:8080/x?q",
            &[("Host", "a.test"), ("host", "c.test")],
        );
        let variables = meta_variables(
            &Request {
                head: &head,
                requested: None,
                clean: "/x",
                client: "127.0.0.1:1".parse().unwrap(),
                server: "127.0.0.1:80".parse().unwrap(),
                content_length: None,
                user: None,
                tls: None,
            },
            &route,
            None,
        );
        assert_eq!(lookup(&variables, "SERVER_NAME"), Some("b.test"));
        assert_eq!(lookup(&variables, "HTTP_HOST"), Some("b.test:8080"));
        assert_eq!(lookup(&variables, "REQUEST_URI"), Some("/x?q"));
    }

    #[test]
    fn without_a_host_the_server_name_is_the_listening_address() {
        let route = route("/", HandlerKind::FastCgi, ScriptSettings::default());
        let mut head = head("/", &[]);
        head.version = Version::Http10;
        let variables = meta_variables(
            &Request {
                head: &head,
                requested: None,
                clean: "/",
                client: "[::1]:1".parse().unwrap(),
                server: "[::1]:80".parse().unwrap(),
                content_length: None,
                user: Some("alice"),
                tls: None,
            },
            &route,
            None,
        );
        assert_eq!(lookup(&variables, "SERVER_NAME"), Some("::1"));
        assert_eq!(lookup(&variables, "SERVER_PROTOCOL"), Some("HTTP/1.0"));
        assert_eq!(lookup(&variables, "REMOTE_USER"), Some("alice"));
        assert_eq!(lookup(&variables, "CONTENT_LENGTH"), None);
        assert_eq!(lookup(&variables, "SCRIPT_NAME"), None);
        assert_eq!(strip_port("[::1]:8080"), "[::1]");
    }

    #[test]
    fn over_tls_the_handshake_and_the_client_certificate_are_named_as_mod_ssl_names_them() {
        let route = route("/", HandlerKind::FastCgi, ScriptSettings::default());
        let head = head("/", &[("Host", "a.test")]);
        let client = ClientCertificate {
            subject: "CN=alice,O=Example".to_owned(),
            issuer: "CN=Test CA".to_owned(),
            serial: "8A0B".to_owned(),
            not_before: "Nov 25 12:00:00 2026 GMT".to_owned(),
            not_after: "Nov 25 12:00:00 2027 GMT".to_owned(),
            pem: "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n".to_owned(),
        };
        let tls = TlsInfo {
            protocol: "TLSv1.3",
            cipher: "TLS13_AES_256_GCM_SHA384",
            server_name: None,
            alpn: None,
            resumed: false,
            client: Some(Box::new(client.clone())),
        };
        let variables = meta_variables(
            &Request {
                head: &head,
                requested: None,
                clean: "/",
                client: "127.0.0.1:40000".parse().unwrap(),
                server: "127.0.0.1:8443".parse().unwrap(),
                content_length: None,
                user: None,
                tls: Some(&tls),
            },
            &route,
            None,
        );
        let get = |name| lookup(&variables, name);
        for (name, value) in [
            ("HTTPS", "on"),
            ("REQUEST_SCHEME", "https"),
            ("SERVER_PORT", "8443"),
            ("SSL_PROTOCOL", "TLSv1.3"),
            ("SSL_CIPHER", "TLS13_AES_256_GCM_SHA384"),
            ("SSL_SESSION_RESUMED", "Initial"),
            ("SSL_CLIENT_VERIFY", "SUCCESS"),
            ("SSL_CLIENT_S_DN", "CN=alice,O=Example"),
            ("SSL_CLIENT_I_DN", "CN=Test CA"),
            ("SSL_CLIENT_M_SERIAL", "8A0B"),
            ("SSL_CLIENT_V_START", "Nov 25 12:00:00 2026 GMT"),
            ("SSL_CLIENT_V_END", "Nov 25 12:00:00 2027 GMT"),
            ("SSL_CLIENT_CERT", client.pem.as_str()),
        ] {
            assert_eq!(get(name), Some(value), "{name}");
        }
        assert_eq!(get("SSL_TLS_SNI"), None, "no SNI sent");
    }
}
