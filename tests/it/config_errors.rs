//! `ampd check FILE` and `ampd run -c FILE`: every kind of configuration error is one `ampd: `
//! line on stderr, exit status 1, naming the file, line, column and key (with a hint where one
//! helps); `examples/ampd.toml` is accepted.

use crate::support;

use std::path::Path;
use support::*;

/// Checks `text` as a config; returns the one error line.
fn error_for(text: &str) -> String {
    let root = TempRoot::new();
    let file = root.outside_dir().join("bad.toml");
    std::fs::write(&file, text).unwrap();
    let file = file.display().to_string();
    let (code, stdout, stderr) = run_to_exit(&["check", &file]);
    assert_eq!(code, Some(1), "{text}\nstdout {stdout}\nstderr {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let line = lines[0].to_owned();
    assert!(line.starts_with(&format!("ampd: {file}:")), "{line}");
    // `run -c` refuses the same file with the same line, before binding anything.
    let (code, _, run_stderr) = run_to_exit(&["run", "-c", &file]);
    assert_eq!(code, Some(1));
    assert_eq!(run_stderr.trim(), line);
    line
}

fn assert_place(line: &str, place: &str, key: &str) {
    assert!(
        line.contains(&format!(".toml:{place}: {key}: ")),
        "expected {place} {key} in {line}"
    );
}

const SITE: &str = "[[site]]\nroot = \"/tmp\"\n";

#[test]
fn syntax_error() {
    let line = error_for("listen = \"127.0.0.1:0\"\narch = \n");
    assert!(line.contains(".toml:2:"), "{line}");
    assert!(line.contains("arch"), "{line}");
}

#[test]
fn unknown_key_with_a_hint() {
    let line = error_for(&format!("listn = \"127.0.0.1:80\"\n{SITE}"));
    assert_place(&line, "1:1", "listn");
    assert!(line.contains("unknown field"), "{line}");
    assert!(line.contains("hint: did you mean `listen`?"), "{line}");
    let line = error_for(&format!(
        "{SITE}[[site.location]]\npath = \"/a/\"\nautoindx = true\n"
    ));
    assert_place(&line, "5:1", "site.location.autoindx");
    assert!(line.contains("did you mean `autoindex`?"), "{line}");
}

#[test]
fn wrong_type() {
    let line = error_for(&format!("threads = \"two\"\n{SITE}"));
    assert_place(&line, "1:11", "threads");
    assert!(line.contains("invalid type"), "{line}");
    let line = error_for(&format!("{SITE}autoindex = \"yes\"\n"));
    assert_place(&line, "3:13", "site.autoindex");
}

#[test]
fn bad_values() {
    let line = error_for(&format!("listen = \"localhost\"\n{SITE}"));
    assert_place(&line, "1:10", "listen");
    assert!(line.contains("hint:"), "{line}");
    // A port out of range, written as a TOML integer, gets the same hint as in a string; a
    // value of another type says what to write.
    let line = error_for(&format!("listen = 70000\n{SITE}"));
    assert_place(&line, "1:10", "listen");
    assert!(line.contains("'70000' is not an address"), "{line}");
    assert!(line.contains("hint: write it like"), "{line}");
    for other in ["true", "{ port = 80 }", "[true]"] {
        let line = error_for(&format!("listen = {other}\n{SITE}"));
        assert!(line.contains(": listen: "), "{other}: {line}");
        assert!(line.contains("\":8080\" or 8080"), "{other}: {line}");
        assert!(!line.contains("untagged enum"), "{other}: {line}");
    }
    // "MB" is decimal elsewhere; ampd's units are binary, so it is refused with the spelling.
    let line = error_for(&format!("[limits]\nmax_body = \"10MB\"\n{SITE}"));
    assert_place(&line, "2:12", "limits.max_body");
    assert!(line.contains("hint:"), "{line}");
    assert!(line.contains("10MiB"), "{line}");
    let line = error_for(&format!("arch = \"fast\"\n{SITE}"));
    assert_place(&line, "1:8", "arch");
    assert!(
        line.contains("one of sped, amped, mt, tpc, mp, uring, reactor"),
        "{line}"
    );
    let line = error_for(&format!("[limits]\nheader_timeout = \"5 parsecs\"\n{SITE}"));
    assert_place(&line, "2:18", "limits.header_timeout");
    let line = error_for(&format!(
        "{SITE}[[site.location]]\npath = \"/x\"\nhandler = \"fcgi\"\n"
    ));
    assert_place(&line, "5:11", "site.location.handler");
    assert!(
        line.contains(
            "unknown handler 'fcgi' (hint: static, status, health, proxy, fastcgi or cgi)"
        ),
        "{line}"
    );
    let line = error_for(&format!("{SITE}allow = [\"10.0.0.0/33\"]\n"));
    assert_place(&line, "3:9", "site.allow");
    let line = error_for(&format!(
        "{SITE}basic_auth = {{ users = {{ bob = \"plaintext\" }} }}\n"
    ));
    assert_place(&line, "3:32", "site.basic_auth.users.bob");
    assert!(line.contains("not a bcrypt or argon2 hash"), "{line}");
    let line = error_for(&format!(
        "{SITE}[[site.location]]\npath = \"/r\"\nredirect = \"/x\"\nredirect_status = 200\n"
    ));
    assert_place(&line, "6:19", "site.location.redirect_status");
    let line = error_for("[[site]]\nroot = \"/no/such/dir\"\n");
    assert_place(&line, "2:8", "site.root");
    assert!(line.contains("No such file or directory"), "{line}");
    let line = error_for(&format!("user = \"no-such-user-ampd\"\n{SITE}"));
    assert_place(&line, "1:8", "user");
    let line = error_for(&format!("helpers_mode = \"forks\"\n{SITE}"));
    assert_place(&line, "1:16", "helpers_mode");
    assert!(line.contains("one of threads, process"), "{line}");
    let line = error_for(&format!("arch = \"mp\"\nthreads = 0\n{SITE}"));
    assert_place(&line, "2:11", "threads");
}

#[test]
fn conflicts() {
    let line = error_for(&format!(
        "{SITE}[[site.location]]\npath = \"/a/\"\nroot = \"/tmp\"\nalias = \"/tmp\"\n"
    ));
    assert_place(&line, "6:9", "site.location.alias");
    assert!(line.contains("conflicts with root"), "{line}");
    let line = error_for(&format!("{SITE}default = true\n[[site]]\nroot = \"/tmp\"\ndefault = true\nserver_names = [\"a.test\"]\n"));
    assert_place(&line, "6:11", "site.default");
    let line = error_for(&format!("{SITE}server_names = [\"a.test\"]\n[[site]]\nroot = \"/tmp\"\nserver_names = [\"A.test\"]\n"));
    assert_place(&line, "6:16", "site.server_names");
    let line = error_for(&format!("helpers = 8\nhelpers_max = 4\n{SITE}"));
    assert_place(&line, "2:15", "helpers_max");
    assert!(line.contains("less than helpers (8)"), "{line}");
    // A second location with the same path and the same kind would silently drop the first's
    // rules (here a deny), so it is refused where the second one names its path.
    let line = error_for(&format!(
        "{SITE}[[site.location]]\npath = \"/a/\"\n[[site.location]]\npath = \"/a/\"\ndeny = [\"all\"]\n"
    ));
    assert_place(&line, "6:8", "site.location.path");
    assert!(
        line.contains("'/a/' is already a location of this site (line 4)"),
        "{line}"
    );
    let line = error_for(&format!(
        "{SITE}[[site.location]]\npath = \"/x\"\nexact = true\n[[site.location]]\npath = \"/x\"\nexact = true\n"
    ));
    assert_place(&line, "7:8", "site.location.path");
    let line = error_for("[[site]]\nroot = \"/tmp\"\npath = \"/x/\"\n");
    assert_place(&line, "3:8", "site.path");
    assert!(line.contains("only valid in a [[site.location]]"), "{line}");
}

#[test]
fn an_exact_and_a_prefix_location_of_one_path_are_accepted() {
    let root = TempRoot::new();
    let file = root.outside_dir().join("both.toml");
    std::fs::write(
        &file,
        format!("{SITE}[[site.location]]\npath = \"/a/\"\n[[site.location]]\npath = \"/a/\"\nexact = true\ndeny = [\"all\"]\n[[site]]\nroot = \"/tmp\"\nserver_names = [\"b.test\"]\n[[site.location]]\npath = \"/a/\"\n"),
    )
    .unwrap();
    let (code, stdout, stderr) = run_to_exit(&["check", &file.display().to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
}

#[test]
fn missing_pieces() {
    let line = error_for("listen = \"127.0.0.1:0\"\n");
    assert!(line.contains(": site: no [[site]]"), "{line}");
    let line = error_for("[[site]]\nautoindex = true\n[[site.location]]\npath = \"/a/\"\n");
    assert_place(&line, "4:8", "site.location.root");
    assert!(line.contains("no root"), "{line}");
    let (code, _, stderr) = run_to_exit(&["check", "/no/such/ampd.toml"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr.trim(),
        "ampd: /no/such/ampd.toml: cannot read: No such file or directory"
    );
}

/// One pool for the proxy cases: `[upstream.app]`, two lines.
const POOL: &str = "[upstream.app]\nservers = [\"127.0.0.1:9001\"]\n";

/// `[upstream.app]` with `lines` after its servers (which start on line 2).
fn pool_with(lines: &str) -> String {
    format!("{POOL}{lines}{SITE}")
}

#[test]
fn upstream_pool_errors() {
    let line = error_for(&format!("[upstream.app]\nservers = []\n{SITE}"));
    assert_place(&line, "2:11", "upstream.app.servers");
    assert!(line.contains("no servers"), "{line}");
    let line = error_for(&format!("[upstream.app]\nbalance = \"uri\"\n{SITE}"));
    assert_place(&line, "1:11", "upstream.app.servers");
    assert!(line.contains("no servers"), "{line}");
    let line = error_for(&format!(
        "[upstream.app]\nservers = [{{ address = \"127.0.0.1:9001\", weight = 0 }}]\n{SITE}"
    ));
    assert_place(&line, "2:51", "upstream.app.servers.weight");
    assert!(line.contains("0 is less than 1"), "{line}");
    let line = error_for(&pool_with("balance = \"random\"\n"));
    assert_place(&line, "3:11", "upstream.app.balance");
    assert!(
        line.contains("round_robin, least_connections, client_address or uri"),
        "{line}"
    );
    let line = error_for(&pool_with("tries = 0\n"));
    assert_place(&line, "3:9", "upstream.app.tries");
    assert!(line.contains("0 is less than 1"), "{line}");
    let line = error_for(&pool_with("connect_timeout = \"soon\"\n"));
    assert_place(&line, "3:19", "upstream.app.connect_timeout");
    assert!(line.contains("is not a duration"), "{line}");
    let line = error_for(&pool_with("health_check = { path = \"health\" }\n"));
    assert_place(&line, "3:25", "upstream.app.health_check.path");
    assert!(line.contains("does not start with '/'"), "{line}");
    let line = error_for(&pool_with(
        "health_check = { path = \"/h\", expect = 600 }\n",
    ));
    assert_place(&line, "3:40", "upstream.app.health_check.expect");
    assert!(line.contains("600 is not a status (100-599)"), "{line}");
    let line = error_for(&pool_with(
        "health_check = { path = \"/h\", expect = 99 }\n",
    ));
    assert_place(&line, "3:40", "upstream.app.health_check.expect");
}

#[test]
fn upstream_names_appear_once() {
    // TOML itself refuses a second table of the same name ...
    let line = error_for(&format!(
        "{POOL}[upstream.app]\nservers = [\"127.0.0.1:9002\"]\n{SITE}"
    ));
    assert_place(&line, "3:11", "upstream.app");
    assert!(line.contains("duplicate key"), "{line}");
    assert!(line.contains("appears once"), "{line}");
    // ... and names differing only in case are the same pool to proxy_pass (a URL's host has
    // no case).
    let line = error_for(&format!(
        "{POOL}[upstream.App]\nservers = [\"127.0.0.1:9002\"]\n{SITE}"
    ));
    assert_place(&line, "3:11", "upstream.App");
    assert!(
        line.contains("'App' is already the name of an upstream (line 1)"),
        "{line}"
    );
    let line = error_for(&format!(
        "[upstream.\"a:b\"]\nservers = [\"127.0.0.1:9002\"]\n{SITE}"
    ));
    assert_place(&line, "1:11", "upstream.a:b");
    assert!(line.contains("is not a pool name"), "{line}");
}

#[test]
fn backup_servers_need_a_balance_that_can_fall_back() {
    let line = error_for(&format!(
        "[upstream.app]\nservers = [\"127.0.0.1:1\", {{ address = \"127.0.0.1:2\", backup = true }}]\nbalance = \"client_address\"\n{SITE}"
    ));
    assert_place(&line, "2:63", "upstream.app.servers.backup");
    assert!(
        line.contains("a backup server does not work with balance = \"client_address\""),
        "{line}"
    );
    assert!(line.contains("nginx refuses it too"), "{line}");
    let line = error_for(&format!(
        "[upstream.app]\nservers = [{{ address = \"127.0.0.1:2\", backup = true }}]\n{SITE}"
    ));
    assert_place(&line, "2:11", "upstream.app.servers");
    assert!(line.contains("every server is a backup"), "{line}");
}

#[test]
fn bad_server_addresses() {
    for (address, message) in [
        ("127.0.0.1", "'127.0.0.1' is not a server address (no port)"),
        ("127.0.0.1:http", "'http' is not a port"),
        ("[::1:80", "is not a server address"),
        ("unix:", "'unix:' is not a server address (no socket path)"),
        ("http://127.0.0.1:80", "is not a server address"),
        (
            "no-such-host.invalid:80",
            "cannot resolve 'no-such-host.invalid'",
        ),
    ] {
        let line = error_for(&format!(
            "[upstream.app]\nservers = [\"{address}\"]\n{SITE}"
        ));
        assert_place(&line, "2:12", "upstream.app.servers");
        assert!(line.contains(message), "{address}: {line}");
        assert!(line.contains("hint: "), "{line}");
    }
    let line = error_for(&format!(
        "[upstream.app]\nservers = [{{ address = \"127.0.0.1\" }}]\n{SITE}"
    ));
    assert_place(&line, "2:24", "upstream.app.servers.address");
}

#[test]
fn unknown_proxy_keys_get_a_hint() {
    let line = error_for(&pool_with("keepalive_tmeout = 5\n"));
    assert_place(&line, "3:1", "upstream.app.keepalive_tmeout");
    assert!(line.contains("did you mean `keepalive_timeout`?"), "{line}");
    let line = error_for(&format!(
        "[upstream.app]\nservers = [{{ address = \"127.0.0.1:1\", wieght = 2 }}]\n{SITE}"
    ));
    assert!(line.contains(".toml:2:39: upstream.app.servers"), "{line}");
    assert!(line.contains("did you mean `weight`?"), "{line}");
    let line = error_for(&pool_with(
        "health_check = { path = \"/h\", intervall = 1 }\n",
    ));
    assert!(
        line.contains(".toml:3:31: upstream.app.health_check"),
        "{line}"
    );
    assert!(line.contains("did you mean `interval`?"), "{line}");
    let line = error_for(&format!(
        "{POOL}{SITE}[[site.location]]\npath = \"/a/\"\nproxy_pas = \"http://app\"\n"
    ));
    assert_place(&line, "7:1", "site.location.proxy_pas");
    assert!(line.contains("did you mean `proxy_pass`?"), "{line}");
}

#[test]
fn proxy_pass_errors() {
    let location = |proxy_pass: &str| {
        format!("{POOL}{SITE}[[site.location]]\npath = \"/api/\"\nproxy_pass = \"{proxy_pass}\"\n")
    };
    for (target, message) in [
        ("http://nosuch/", "no [upstream.nosuch]"),
        ("https://app/", "TLS to upstreams is not available yet"),
        ("ftp://app/", "'ftp://app/' is not a proxy target"),
        ("app", "'app' is not a proxy target"),
        ("http://app/v1?x=1", "a query"),
        ("http://user@app/", "user information"),
        ("http://127.0.0.1:http/", "'http' is not a port"),
        ("http://no-such-host.invalid:80/", "cannot resolve"),
        ("unix:", "no socket path"),
    ] {
        let line = error_for(&location(target));
        assert_place(&line, "7:14", "site.location.proxy_pass");
        assert!(line.contains(message), "{target}: {line}");
    }
    // A pool's name with a port is a host to resolve; when it does not resolve, the hint says
    // how a pool is named.
    let line = error_for(&format!(
        "[upstream.\"no-such-pool.invalid\"]\nservers = [\"127.0.0.1:9001\"]\n{SITE}[[site.location]]\npath = \"/api/\"\nproxy_pass = \"http://no-such-pool.invalid:80/\"\n"
    ));
    assert_place(&line, "7:14", "site.location.proxy_pass");
    assert!(
        line.contains("cannot resolve 'no-such-pool.invalid'"),
        "{line}"
    );
    assert!(
        line.contains("hint: a pool is named without a port: http://no-such-pool.invalid/"),
        "{line}"
    );
}

#[test]
fn proxy_handler_errors() {
    let line = error_for(&format!(
        "{SITE}[[site.location]]\npath = \"/a/\"\nhandler = \"proxy\"\n"
    ));
    assert_place(&line, "5:11", "site.location.handler");
    assert!(
        line.contains("handler \"proxy\" without proxy_pass"),
        "{line}"
    );
    let line = error_for(&format!(
        "{POOL}{SITE}[[site.location]]\npath = \"/a/\"\nhandler = \"static\"\nproxy_pass = \"http://app\"\n"
    ));
    assert_place(&line, "8:14", "site.location.proxy_pass");
    assert!(
        line.contains("conflicts with handler = \"static\""),
        "{line}"
    );
    // A redirect or a rewrite answers before the handler: a proxy_pass beside it would never
    // be used.
    for other in ["redirect", "rewrite"] {
        let line = error_for(&format!(
            "{POOL}{SITE}[[site.location]]\npath = \"/a/\"\n{other} = \"/b/\"\nproxy_pass = \"http://app\"\n"
        ));
        assert_place(&line, "8:14", "site.location.proxy_pass");
        assert!(
            line.contains(&format!("conflicts with {other} in the same block")),
            "{line}"
        );
    }
    let line = error_for(&format!(
        "{SITE}[[site.location]]\npath = \"/a/\"\nwebsocket = true\n"
    ));
    assert_place(&line, "5:13", "site.location.websocket");
    assert!(line.contains("only for a proxy location"), "{line}");
    let line = error_for(&format!(
        "{SITE}[[site.location]]\npath = \"/a/\"\nunderscores_in_headers = true\n"
    ));
    assert_place(&line, "5:26", "site.location.underscores_in_headers");
    assert!(line.contains("only for a proxy location"), "{line}");
    let with_pool = |key: &str| {
        format!(
            "{POOL}{SITE}[[site.location]]\npath = \"/a/\"\nproxy_pass = \"http://app\"\n{key}\n"
        )
    };
    let line = error_for(&with_pool("x_sendfile_root = \"/no/such/dir\""));
    assert_place(&line, "8:19", "site.location.x_sendfile_root");
    assert!(line.contains("No such file or directory"), "{line}");
    let line = error_for(&with_pool("forwarded_trust = [\"10.0.0.0/33\"]"));
    assert_place(&line, "8:19", "site.location.forwarded_trust");
    assert!(line.contains("not an address or block"), "{line}");
    let line = error_for(&with_pool("proxy_host = \"two words\""));
    assert_place(&line, "8:14", "site.location.proxy_host");
    assert!(line.contains("'two words' is not a host"), "{line}");
    let line = error_for(&with_pool("max_body = \"lots\""));
    assert_place(&line, "8:12", "site.location.max_body");
    assert!(line.contains("is not a size"), "{line}");
}

#[test]
fn the_example_configuration_is_accepted() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/ampd.toml");
    let (code, stdout, stderr) = run_to_exit(&["check", &example.display().to_string()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("configuration OK (2 sites"), "{stdout}");
}
