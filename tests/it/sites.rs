//! Virtual hosts and locations from a TOML file (`ampd run -c`): sites chosen by `Host`
//! (exact, wildcard, default), locations by exact path and longest prefix, inheritance from
//! the site, headers, cache headers, alias, redirects and rewrites.

use crate::support;

use support::*;

fn sites_config(root: &TempRoot, arch: &str) -> std::path::PathBuf {
    root.file("index.html", "main index");
    root.file("hello.txt", "main hello");
    root.file("docs/guide.txt", "guide");
    root.file("docs/sub/page.txt", "sub page");
    root.file("assets/app.css", "body{}");
    root.file("other/index.html", "other index");
    root.file("other/hello.txt", "other hello");
    root.file(".hidden/secret.txt", "hidden");
    write_config(
        root,
        arch,
        r#"
[[site]]
default = true
root = "www"
autoindex = true
headers = { "X-Site" = "main" }

  [[site.location]]
  path = "/docs/"
  expires = "1h"

  [[site.location]]
  path = "/docs/sub/"
  autoindex = false
  headers = { "X-Location" = "sub" }
  cache_control = "no-cache"

  [[site.location]]
  path = "/static/"
  alias = "www/assets"

  [[site.location]]
  path = "/hello.txt"
  exact = true
  headers = { "X-Exact" = "yes" }

  [[site.location]]
  path = "/old/"
  redirect = "https://example.test/new/{rest}"
  redirect_status = 308

  [[site.location]]
  path = "/latest/"
  rewrite = "/docs/{rest}"

  [[site.location]]
  path = "/loop/"
  rewrite = "/loop/{rest}"

[[site]]
server_names = ["other.test", "*.other.test"]
root = "www/other"
"#,
    )
}

fn get_host(server: &Server, host: &str, path: &str) -> Response {
    let mut conn = Conn::open(server.addr());
    conn.send(format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    ));
    conn.read_response("GET")
}

default_arch!(fn hosts_pick_sites(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::config_file(&sites_config(&root, arch)));
    assert_eq!(get_host(&server, "other.test", "/hello.txt").body_text(), "other hello");
    assert_eq!(get_host(&server, "OTHER.test:8080", "/").body_text(), "other index");
    assert_eq!(get_host(&server, "www.other.test", "/hello.txt").body_text(), "other hello");
    // Unknown names and a missing suffix dot go to the default site.
    assert_eq!(get_host(&server, "unknown.test", "/hello.txt").body_text(), "main hello");
    assert_eq!(get_host(&server, "xother.test", "/hello.txt").body_text(), "main hello");
    let other = get_host(&server, "other.test", "/hello.txt");
    assert!(!other.has_header("x-site"), "site headers stay in their site: {other:?}");
});

default_arch!(fn locations_inherit_and_override(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::config_file(&sites_config(&root, arch)));
    let host = "main.test";
    // The exact location wins over "/" and adds its own headers (replacing the site's).
    let exact = get_host(&server, host, "/hello.txt");
    assert_eq!(exact.body_text(), "main hello");
    assert_eq!(exact.header("x-exact"), Some("yes"));
    assert_eq!(exact.header("x-site"), None);
    // /docs/ inherits the site's autoindex and headers and adds expires.
    let listing = get_host(&server, host, "/docs/");
    assert_eq!(listing.status, 200);
    assert!(listing.body_text().contains("guide.txt"), "{}", listing.body_text());
    let guide = get_host(&server, host, "/docs/guide.txt");
    assert_eq!(guide.header("x-site"), Some("main"));
    assert_eq!(guide.header("cache-control"), Some("max-age=3600"));
    assert!(guide.has_header("expires"));
    // Errors carry location headers but no cache headers.
    let missing = get_host(&server, host, "/docs/none.txt");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("x-site"), Some("main"));
    assert!(!missing.has_header("cache-control") && !missing.has_header("expires"));
    // The longer prefix /docs/sub/ overrides autoindex and headers.
    let sub = get_host(&server, host, "/docs/sub/");
    assert_eq!(sub.status, 403, "autoindex off in /docs/sub/");
    let page = get_host(&server, host, "/docs/sub/page.txt");
    assert_eq!(page.header("x-location"), Some("sub"));
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    // Locations inherit from their site, not from a shorter location: /docs/'s expires stays there.
    assert!(!page.has_header("expires"), "{page:?}");
    // Routing sees the decoded path: an encoded prefix reaches the same location.
    assert_eq!(get_host(&server, host, "/%64ocs/sub/page.txt").header("x-location"), Some("sub"));
    // Dot-files stay hidden (the location rule is applied after routing).
    assert_eq!(get_host(&server, host, "/.hidden/secret.txt").status, 404);
});

default_arch!(fn alias_redirect_rewrite(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::config_file(&sites_config(&root, arch)));
    let host = "main.test";
    assert_eq!(get_host(&server, host, "/static/app.css").body_text(), "body{}");
    assert_eq!(get_host(&server, host, "/assets/app.css").body_text(), "body{}");
    let moved = get_host(&server, host, "/old/a%20b/c.txt?x=1");
    assert_eq!(moved.status, 308);
    assert_eq!(moved.header("location"), Some("https://example.test/new/a%20b/c.txt"));
    let rewritten = get_host(&server, host, "/latest/guide.txt");
    assert_eq!(rewritten.status, 200);
    assert_eq!(rewritten.body_text(), "guide");
    assert_eq!(rewritten.header("cache-control"), Some("max-age=3600"), "served under /docs/");
    assert_eq!(get_host(&server, host, "/loop/x").status, 500);
    assert!(server.wait_for_stderr("rewrite loop", std::time::Duration::from_secs(5)), "{}", server.stderr());
});

/// A prefix location whose path ends in `/`, asked for without it, answers `301` to the path
/// with it (nginx), whatever its handler, before its access rules; the query is kept, the
/// `Location` is built from the normalised path (never a `//host` reference), a method other
/// than GET and HEAD gets `308` so that its body is not turned into a GET. An exact location
/// for the path without the slash wins. Routing is `Conn`'s alone: the default engine.
#[test]
fn a_prefix_location_asked_for_without_its_slash_redirects_for_every_handler() {
    let root = TempRoot::new();
    root.file("hello.txt", "hello");
    root.outside_file("assets/a.css", "css");
    root.outside_file("scripts/x", "not run");
    root.dir("evil.com");
    let outside = root.outside_dir().display();
    let refusing = support::proxy::refusing_address();
    let config = write_config(
        &root,
        "reactor",
        &format!(
            r#"
[[site]]
root = "www"

  [[site.location]]
  path = "/api/"
  proxy_pass = "http://{refusing}"
  deny = ["all"]

  [[site.location]]
  path = "/fcgi/"
  fastcgi_pass = "{refusing}"

  [[site.location]]
  path = "/scripts/"
  alias = "{outside}/scripts/"
  handler = "cgi"

  [[site.location]]
  path = "/static/"
  alias = "{outside}/assets/"

  [[site.location]]
  path = "/metrics/"
  handler = "status"

  [[site.location]]
  path = "/health"
  exact = true
  handler = "health"

  [[site.location]]
  path = "/health/"
  alias = "{outside}/assets/"
"#
        ),
    );
    let server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let redirect = |method: &str, target: &str| {
        let response = request(addr, method, target, &[("Content-Length", "0")]);
        (
            response.status,
            response.header("location").map(str::to_owned),
        )
    };
    let to = |status: u16, location: &str| (status, Some(location.to_owned()));
    assert_eq!(
        redirect("GET", "/api"),
        to(301, "/api/"),
        "before the location's deny"
    );
    assert_eq!(redirect("GET", "/api?x=1&y"), to(301, "/api/?x=1&y"));
    assert_eq!(redirect("HEAD", "/api"), to(301, "/api/"));
    assert_eq!(
        redirect("GET", "//api?q"),
        to(301, "/api/?q"),
        "not a network-path reference"
    );
    assert_eq!(redirect("GET", "/%61pi"), to(301, "/api/"));
    assert_eq!(redirect("GET", "/x/../api"), to(301, "/api/"));
    assert_eq!(
        redirect("POST", "/api"),
        to(308, "/api/"),
        "the method and body kept"
    );
    assert_eq!(redirect("GET", "/fcgi"), to(301, "/fcgi/"));
    assert_eq!(redirect("POST", "/fcgi?a=b"), to(308, "/fcgi/?a=b"));
    assert_eq!(redirect("GET", "/scripts"), to(301, "/scripts/"));
    assert_eq!(redirect("GET", "/static"), to(301, "/static/"));
    assert_eq!(redirect("GET", "/metrics"), to(301, "/metrics/"));
    // The locations themselves answer under their handlers and rules.
    assert_eq!(get(addr, "/api/").status, 403);
    assert_eq!(get(addr, "/static/a.css").body_text(), "css");
    assert_eq!(get(addr, "/metrics/").status, 200);
    // An exact location for the path without the slash is a better match.
    let health = get(addr, "/health");
    assert_eq!((health.status, health.body_text().as_str()), (200, "ok\n"));
    // Only the path plus `/`: no redirect for a longer or shorter one.
    assert_eq!(get(addr, "/apix").status, 404);
    assert_eq!(get(addr, "/ap").status, 404);
    // A directory's own `301` is built from the normalised path too.
    assert_eq!(redirect("GET", "//evil.com?q=1"), to(301, "/evil.com/?q=1"));
}
