//! A reverse-proxy configuration (`[upstream.NAME]` pools and proxy locations, docs/config.md
//! "Reverse proxy") loads into the typed settings the proxy reads, and `ampd check` accepts it.

use crate::support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ampd::config::{
    self, ActiveHealth, Balance, HandlerKind, LocationSettings, ProxyHost, UpstreamAddress,
    UpstreamServer,
};
use support::*;

fn tcp(address: &str) -> UpstreamAddress {
    UpstreamAddress::Tcp(address.parse::<SocketAddr>().unwrap())
}

fn server(address: UpstreamAddress, weight: u32, backup: bool) -> UpstreamServer {
    UpstreamServer {
        address,
        weight,
        backup,
    }
}

/// The file below, with its `x_sendfile_root` made to exist.
fn write_config(root: &TempRoot) -> PathBuf {
    let files = root.outside_dir().join("files");
    std::fs::create_dir_all(&files).unwrap();
    let text = format!(
        r#"listen = "127.0.0.1:0"

[upstream.app]
servers = [
  "127.0.0.1:9001",
  {{ address = "[::1]:9002", weight = 3 }},
  {{ address = "unix:/run/app.sock", backup = true }},
  "localhost:9003",
]
balance = "least_connections"
keepalive = 8
keepalive_timeout = "30s"
connect_timeout = "2s"
send_timeout = "20s"
read_timeout = "1m"
tries = 3
max_fails = 5
fail_window = "20s"
fail_timeout = "15s"
health_check = {{ path = "/health", interval = "2s", expect = 204 }}

[upstream.cache]
servers = ["127.0.0.1:9101"]
balance = "uri"

[[site]]
root = "{www}"
proxy_pass = "http://127.0.0.1:9200"
forwarded_trust = ["10.0.0.0/8"]
underscores_in_headers = true
max_body = "10MiB"

[[site.location]]
path = "/api/"
proxy_pass = "http://app/v1/"
proxy_host = "upstream"
websocket = true
x_accel_redirect = false
x_sendfile_root = "files"
max_body = "100MiB"

[[site.location]]
path = "/cache/"
handler = "proxy"
proxy_pass = "http://CACHE"
proxy_host = "backend.internal"

[[site.location]]
path = "/other/"
proxy_pass = "http://127.0.0.1:9200/"

[[site.location]]
path = "/sock/"
proxy_pass = "unix:/run/other.sock"
proxy_host = "client"

[[site.location]]
path = "/protected/"
handler = "static"
internal = true

[[site.location]]
path = "/status"
exact = true
handler = "status"
"#,
        www = root.path().display(),
    );
    let file = root.outside_dir().join("proxy.toml");
    std::fs::write(&file, text).unwrap();
    file
}

fn location<'a>(config: &'a config::Config, path: &str) -> &'a LocationSettings {
    &config.sites[0]
        .locations
        .iter()
        .find(|location| location.path == path)
        .unwrap_or_else(|| panic!("no location {path}"))
        .settings
}

#[test]
fn a_proxy_configuration_loads_into_the_typed_settings() {
    let root = TempRoot::new();
    let config = config::load_file(&write_config(&root)).unwrap();

    let names: Vec<&str> = config
        .upstreams
        .iter()
        .map(|pool| pool.name.as_str())
        .collect();
    // Named pools in file order, then one implicit pool per distinct proxy_pass address.
    assert_eq!(
        names,
        ["app", "cache", "127.0.0.1:9200", "unix:/run/other.sock"]
    );

    let app = &config.upstreams[0];
    assert_eq!(
        app.servers,
        [
            server(tcp("127.0.0.1:9001"), 1, false),
            server(tcp("[::1]:9002"), 3, false),
            server(UpstreamAddress::Unix("/run/app.sock".into()), 1, true),
            // `localhost` is the IPv4 loopback, as `listen` reads it.
            server(tcp("127.0.0.1:9003"), 1, false),
        ]
    );
    assert_eq!(app.balance, Balance::LeastConnections);
    assert_eq!(app.keepalive, 8);
    assert_eq!(app.keepalive_timeout, Duration::from_secs(30));
    assert_eq!(app.connect_timeout, Duration::from_secs(2));
    assert_eq!(app.send_timeout, Duration::from_secs(20));
    assert_eq!(app.read_timeout, Duration::from_secs(60));
    assert_eq!(app.tries, 3);
    assert_eq!(app.passive.max_fails, 5);
    assert_eq!(app.passive.fail_window, Duration::from_secs(20));
    assert_eq!(app.passive.fail_timeout, Duration::from_secs(15));
    assert_eq!(
        app.active,
        Some(ActiveHealth {
            path: "/health".to_owned(),
            interval: Duration::from_secs(2),
            timeout: Duration::from_secs(2),
            expect: 204,
            rise: 2,
            fall: 2,
        })
    );

    let cache = &config.upstreams[1];
    assert_eq!(cache.balance, Balance::Uri);
    assert_eq!(cache.servers, [server(tcp("127.0.0.1:9101"), 1, false)]);
    // What a pool leaves unset: the defaults.
    assert_eq!(cache.keepalive, 32);
    assert_eq!(cache.tries, 2);
    assert_eq!(cache.active, None);

    let implicit = &config.upstreams[2];
    assert_eq!(implicit.servers, [server(tcp("127.0.0.1:9200"), 1, false)]);
    assert_eq!(implicit.balance, Balance::RoundRobin);
    assert_eq!(implicit.connect_timeout, Duration::from_secs(5));

    let api = location(&config, "/api/");
    assert_eq!(api.handler.kind(), HandlerKind::Proxy);
    let proxy = api.handler.proxy().unwrap();
    assert_eq!(proxy.pool, 0);
    assert_eq!(proxy.path.as_deref(), Some("/v1/"));
    assert_eq!(proxy.host, ProxyHost::Upstream);
    assert!(proxy.websocket);
    assert!(!proxy.x_accel_redirect);
    assert_eq!(
        proxy.x_sendfile_root,
        Some(root.outside_dir().join("files"))
    );
    // Inherited from the site.
    assert_eq!(proxy.forwarded_trust.len(), 1);
    assert!(proxy.forwarded_trust[0].contains("10.1.2.3".parse().unwrap()));
    assert!(proxy.underscores);
    assert_eq!(api.max_body, Some(100 << 20));

    let cached = location(&config, "/cache/");
    let proxy = cached.handler.proxy().unwrap();
    assert_eq!(proxy.pool, 1, "pool names are compared without case");
    assert_eq!(proxy.path, None);
    assert_eq!(
        proxy.host,
        ProxyHost::Literal("backend.internal".to_owned())
    );
    assert!(!proxy.websocket);
    assert!(proxy.x_accel_redirect);
    assert_eq!(proxy.x_sendfile_root, None);
    assert_eq!(cached.max_body, Some(10 << 20));

    // The site's proxy_pass and this location's name the same address: one pool.
    let other = location(&config, "/other/");
    assert_eq!(other.handler.proxy().unwrap().pool, 2);
    assert_eq!(other.handler.proxy().unwrap().path.as_deref(), Some("/"));
    let site_root = location(&config, "/");
    assert_eq!(site_root.handler.kind(), HandlerKind::Proxy);
    assert_eq!(site_root.handler.proxy().unwrap().pool, 2);
    assert_eq!(site_root.handler.proxy().unwrap().path, None);

    let sock = location(&config, "/sock/");
    let proxy = sock.handler.proxy().unwrap();
    assert_eq!(proxy.pool, 3);
    assert_eq!(proxy.host, ProxyHost::Client);
    assert_eq!(
        config.upstreams[3].servers,
        [server(
            UpstreamAddress::Unix("/run/other.sock".into()),
            1,
            false
        )]
    );

    // A location's own handler wins over the proxy_pass its site sets.
    let protected = location(&config, "/protected/");
    assert_eq!(protected.handler.kind(), HandlerKind::Static);
    assert!(protected.internal);
    assert!(protected.handler.proxy().is_none());
    assert!(!api.internal);
    let status = location(&config, "/status");
    assert_eq!(status.handler.kind(), HandlerKind::Status);
    assert!(status.handler.proxy().is_none());
}

#[test]
fn ampd_check_accepts_a_proxy_configuration() {
    let root = TempRoot::new();
    let file = write_config(&root);
    let (code, stdout, stderr) = run_to_exit(&["check", &file.display().to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("configuration OK (1 site, 7 locations)"),
        "{stdout}"
    );
}

/// The example at the top of docs/config.md's "Reverse proxy" section, its root replaced by a
/// directory that exists: the documentation shows a configuration `ampd check` accepts.
#[test]
fn the_documented_proxy_example_is_accepted() {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/config.md"),
    )
    .unwrap();
    let section = &docs[docs
        .find("## Reverse proxy")
        .expect("a Reverse proxy section")..];
    let start = section.find("```toml\n").expect("a toml example") + "```toml\n".len();
    let end = start + section[start..].find("```").unwrap();
    let root = TempRoot::new();
    let text = section[start..end].replace("/srv/www", &root.path().display().to_string());
    assert!(text.contains("[upstream.app]"), "{text}");
    let file = root.outside_dir().join("documented.toml");
    std::fs::write(&file, text).unwrap();
    let (code, stdout, stderr) = run_to_exit(&["check", &file.display().to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("configuration OK (1 site, 4 locations)"),
        "{stdout}"
    );
}
