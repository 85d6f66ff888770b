//! A CGI and FastCGI configuration (`[cgi]`, `[application.NAME]`, `fastcgi_pass`, `extension`,
//! `script`, `params`, `fallback`, `cgi_timeout`; docs/config.md "CGI and FastCGI") loads into
//! the typed settings, `ampd check` accepts it, and each of its errors is one line naming the
//! file, line, column and key, with a hint.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use ampd::config::{
    self, Handler, HandlerKind, LocationSettings, UpstreamAddress, UpstreamProtocol,
};
use support::*;

/// The design's example configuration, its root and sockets in `root`.
fn write_config(root: &TempRoot) -> PathBuf {
    let dir = root.outside_dir();
    let text = format!(
        r#"listen = "127.0.0.1:0"

[cgi]
max_scripts = 8

[upstream.php]
servers = ["unix:/run/php/php8.2-fpm.sock", "127.0.0.1:9000"]
health_check = {{ interval = "5s" }}

[application.flask]
command = ["python3", "app.py"]
processes = 2
socket = "{dir}/flask.sock"
env = {{ APP_ENV = "test" }}
stop_timeout = "10s"

[[site]]
root = "{www}"

[[site.location]]
path = "/cgi-bin/"
handler = "cgi"
cgi_timeout = "30s"
max_body = "20MiB"

[[site.location]]
extension = ".cgi"
handler = "cgi"

[[site.location]]
extension = ".php"
fastcgi_pass = "unix:/run/php/php8.2-fpm.sock"
params = {{ APP_ENV = "prod" }}

[[site.location]]
path = "/app/"
fallback = "/index.php"

[[site.location]]
path = "/flup/"
fastcgi_pass = "flask"

[[site.location]]
path = "/shop/"
fastcgi_pass = "php"
script = "/shop/index.php"
x_accel_redirect = false
"#,
        dir = dir.display(),
        www = root.path().display(),
    );
    let file = dir.join("gateway.toml");
    std::fs::write(&file, text).unwrap();
    file
}

fn location<'a>(
    config: &'a config::Config,
    path: &str,
    extension: Option<&str>,
) -> &'a LocationSettings {
    &config.sites[0]
        .locations
        .iter()
        .find(|location| {
            location.path == path && location.settings.script.extension.as_deref() == extension
        })
        .unwrap_or_else(|| panic!("no location {path} {extension:?}"))
        .settings
}

#[test]
fn a_gateway_configuration_loads_into_the_typed_settings() {
    let root = TempRoot::new();
    let config = config::load_file(&write_config(&root)).unwrap();
    assert_eq!(config.cgi.max_scripts, 8);
    assert_eq!(config.applications.len(), 1);
    let flask = &config.applications[0];
    assert_eq!(flask.processes, 2);
    assert_eq!(flask.socket, root.outside_dir().join("flask.sock"));
    assert_eq!(flask.directory, root.outside_dir());

    let pools: Vec<(&str, UpstreamProtocol, usize)> = config
        .upstreams
        .iter()
        .map(|pool| (pool.name.as_str(), pool.protocol, pool.keepalive))
        .collect();
    assert_eq!(
        pools,
        [
            ("php", UpstreamProtocol::FastCgi, 0),
            ("flask", UpstreamProtocol::FastCgi, 0),
            (
                "unix:/run/php/php8.2-fpm.sock",
                UpstreamProtocol::FastCgi,
                0
            ),
        ]
    );
    assert_eq!(config.upstreams[0].active.as_ref().unwrap().path, "");

    let cgi_bin = location(&config, "/cgi-bin/", None);
    assert_eq!(cgi_bin.handler.kind(), HandlerKind::Cgi);
    assert_eq!(
        cgi_bin.handler.cgi().unwrap().timeout,
        Duration::from_secs(30)
    );
    assert_eq!(cgi_bin.max_body, Some(20 << 20));
    let cgi = location(&config, "/", Some(".cgi"));
    assert_eq!(cgi.handler.cgi().unwrap().timeout, Duration::from_secs(60));
    let php = location(&config, "/", Some(".php"));
    assert_eq!(php.handler.fastcgi().unwrap().pool, 2);
    assert_eq!(
        config.upstreams[2].servers[0].address,
        UpstreamAddress::Unix("/run/php/php8.2-fpm.sock".into())
    );
    assert_eq!(
        php.script.params,
        [("APP_ENV".to_owned(), "prod".to_owned())]
    );
    let app = location(&config, "/app/", None);
    assert_eq!(app.handler.kind(), HandlerKind::Static);
    assert_eq!(
        app.try_files,
        Some(ampd::config::TryFiles::fallback("/index.php".to_owned()))
    );
    assert_eq!(
        location(&config, "/flup/", None)
            .handler
            .fastcgi()
            .unwrap()
            .pool,
        1
    );
    let shop = location(&config, "/shop/", None);
    assert_eq!(shop.script.script.as_deref(), Some("/shop/index.php"));
    assert!(!shop.handler.fastcgi().unwrap().x_accel_redirect);
    // The site's "/" is its own static location beside the extension ones.
    assert_eq!(location(&config, "/", None).handler, Handler::Static);
}

#[test]
fn ampd_check_accepts_a_gateway_configuration() {
    let root = TempRoot::new();
    let file = write_config(&root);
    let (code, stdout, stderr) = run_to_exit(&["check", &file.display().to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("configuration OK (1 site, 7 locations)"),
        "{stdout}"
    );
}

/// Checks `text` (with `{dir}` replaced by a directory that exists) as a config; returns the
/// one error line, which also `run -c` prints.
fn error_for(text: &str) -> String {
    let root = TempRoot::new();
    let text = text.replace("{dir}", &root.outside_dir().display().to_string());
    let file = root.outside_dir().join("bad.toml");
    std::fs::write(&file, &text).unwrap();
    let file = file.display().to_string();
    let (code, stdout, stderr) = run_to_exit(&["check", &file]);
    assert_eq!(code, Some(1), "{text}\nstdout {stdout}\nstderr {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    let line = lines[0].to_owned();
    assert!(line.starts_with(&format!("ampd: {file}:")), "{line}");
    assert!(line.contains("(hint: "), "{line}");
    let (code, _, run_stderr) = run_to_exit(&["run", "-c", &file]);
    assert_eq!(code, Some(1));
    assert_eq!(run_stderr.trim(), line);
    line
}

fn assert_place(line: &str, place: &str, key: &str, message: &str) {
    assert!(
        line.contains(&format!(".toml:{place}: {key}: {message}")),
        "expected {place} {key}: {message} in {line}"
    );
}

const SITE: &str = "[[site]]\nroot = \"{dir}\"\n";

#[test]
fn every_gateway_error_names_its_place() {
    let location = |lines: &str| format!("{SITE}[[site.location]]\npath = \"/a/\"\n{lines}");
    let cases: Vec<(String, &str, &str, &str)> = vec![
        (
            location("proxy_pass = \"http://127.0.0.1:1\"\nfastcgi_pass = \"127.0.0.1:9000\"\n"),
            "6:16",
            "site.location.fastcgi_pass",
            "conflicts with proxy_pass in the same block",
        ),
        (
            location("handler = \"health\"\nfastcgi_pass = \"127.0.0.1:9000\"\n"),
            "6:16",
            "site.location.fastcgi_pass",
            "conflicts with handler = \"health\"",
        ),
        (
            location("handler = \"fastcgi\"\n"),
            "5:11",
            "site.location.handler",
            "handler \"fastcgi\" without fastcgi_pass",
        ),
        (
            format!(
                "[upstream.app]\nservers = [\"127.0.0.1:1\"]\n{SITE}fastcgi_pass = \"app\"\n\
                 [[site.location]]\npath = \"/a/\"\nproxy_pass = \"http://app\"\n"
            ),
            "8:14",
            "site.location.proxy_pass",
            "the pool 'app' is already named by fastcgi_pass (line 5)",
        ),
        (
            location("fastcgi_pass = \"nowhere\"\n"),
            "5:16",
            "site.location.fastcgi_pass",
            "no [upstream.nowhere] or [application.nowhere]",
        ),
        (
            format!("{SITE}[[site.location]]\nextension = \"php\"\nhandler = \"cgi\"\n"),
            "4:13",
            "site.location.extension",
            "'php' is not an extension",
        ),
        (
            format!(
                "{SITE}[[site.location]]\nextension = \".php\"\nfastcgi_pass = \"127.0.0.1:9000\"\nscript = \"/index.php\"\n"
            ),
            "6:10",
            "site.location.script",
            "conflicts with extension in the same location",
        ),
        (
            location("handler = \"cgi\"\nparams = { \"NOT A TOKEN\" = \"x\" }\n"),
            "6:10",
            "site.location.params",
            "'NOT A TOKEN' is not a meta-variable name",
        ),
        (
            location("fallback = \"index.php\"\n"),
            "5:12",
            "site.location.fallback",
            "'index.php' does not start with '/'",
        ),
        (
            location("fastcgi_pass = \"127.0.0.1:9000\"\ncgi_timeout = \"5s\"\n"),
            "6:15",
            "site.location.cgi_timeout",
            "only for a CGI location (handler = \"cgi\")",
        ),
        (
            format!("[application.app]\nsocket = \"{{dir}}/a.sock\"\n{SITE}"),
            "1:14",
            "application.app.command",
            "an application needs a command",
        ),
        (
            format!("[application.app]\ncommand = [\"app\"]\n{SITE}"),
            "1:14",
            "application.app.socket",
            "an application needs a socket",
        ),
        (
            format!(
                "[upstream.app]\nservers = [\"127.0.0.1:1\"]\n[application.app]\ncommand = [\"app\"]\nsocket = \"{{dir}}/a.sock\"\n{SITE}"
            ),
            "3:14",
            "application.app",
            "'app' is already the name of an [upstream.app]",
        ),
        (
            format!(
                "[application.app]\ncommand = [\"app\"]\nsocket = \"{{dir}}/a.sock\"\nprocesses = 0\n{SITE}"
            ),
            "4:13",
            "application.app.processes",
            "0 is less than 1",
        ),
        (
            format!(
                "[upstream.php]\nservers = [\"127.0.0.1:1\"]\nhealth_check = {{ path = \"/ping\" }}\n{SITE}fastcgi_pass = \"php\"\n"
            ),
            "3:25",
            "upstream.php.health_check.path",
            "a FastCGI pool (fastcgi_pass, line 6) is checked without a path",
        ),
    ];
    for (text, place, key, message) in cases {
        assert_place(&error_for(&text), place, key, message);
    }
}

/// The example at the top of docs/config.md's "CGI and FastCGI" section, its root replaced by a
/// directory that exists: the documentation shows a configuration `ampd check` accepts.
#[test]
fn the_documented_gateway_example_is_accepted() {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/config.md"),
    )
    .unwrap();
    let section = &docs[docs
        .find("## CGI and FastCGI")
        .expect("a CGI and FastCGI section")..];
    let start = section.find("```toml\n").expect("a toml example") + "```toml\n".len();
    let end = start + section[start..].find("```").unwrap();
    let root = TempRoot::new();
    let text = section[start..end].replace("/srv/www", &root.path().display().to_string());
    assert!(text.contains("[application.flask]"), "{text}");
    let file = root.outside_dir().join("documented.toml");
    std::fs::write(&file, text).unwrap();
    let (code, stdout, stderr) = run_to_exit(&["check", &file.display().to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("configuration OK (1 site, 5 locations)"),
        "{stdout}"
    );
}
