//! Every access-control path over real sockets: address allow and deny lists (deny wins),
//! Basic authentication with bcrypt and argon2 hashes (no credentials, wrong password, unknown
//! user, malformed header, another scheme, the right password), and inheritance from the site.

use crate::support;

use argon2::password_hash::{PasswordHasher, SaltString};
use support::http::basic_authorization as basic;
use support::*;

fn setup(arch: &str) -> (TempRoot, Server) {
    let root = TempRoot::new();
    root.file("open/a.txt", "open");
    root.file("local/a.txt", "local");
    root.file("elsewhere/a.txt", "elsewhere");
    root.file("denied/a.txt", "denied");
    root.file("bcrypt/a.txt", "bcrypt secret");
    root.file("argon/a.txt", "argon secret");
    root.file("both/a.txt", "both");
    let bcrypt_hash = bcrypt::hash("correct horse", 4).unwrap();
    let salt = SaltString::from_b64("c29tZXNhbHRzb21lc2FsdA").unwrap();
    let argon_hash = argon2::Argon2::default()
        .hash_password(b"battery staple", &salt)
        .unwrap()
        .to_string();
    let config = write_config(
        &root,
        arch,
        &format!(
            r#"
[[site]]
root = "www"

  [[site.location]]
  path = "/local/"
  allow = ["127.0.0.1", "::1"]

  [[site.location]]
  path = "/elsewhere/"
  allow = ["10.0.0.0/8", "fd00::/8"]

  [[site.location]]
  path = "/denied/"
  allow = ["all"]
  deny = ["127.0.0.0/8"]

  [[site.location]]
  path = "/bcrypt/"
  basic_auth = {{ realm = "Team", users = {{ alice = "{bcrypt_hash}" }} }}

  [[site.location]]
  path = "/argon/"
  basic_auth = {{ users = {{ bob = "{argon_hash}" }} }}

  [[site.location]]
  path = "/both/"
  allow = ["127.0.0.1"]
  basic_auth = {{ users = {{ alice = "{bcrypt_hash}" }} }}
"#
        ),
    );
    let server = Server::start(Options::config_file(&config));
    (root, server)
}

fn fetch(server: &Server, path: &str, authorization: Option<&str>) -> Response {
    let mut conn = Conn::open(server.addr());
    let mut extra = vec![];
    if let Some(value) = authorization {
        extra.push(("Authorization", value));
    }
    conn.get(path, &extra)
}

default_arch!(fn address_rules(arch) {
    let (_root, server) = setup(arch);
    assert_eq!(fetch(&server, "/open/a.txt", None).body_text(), "open");
    assert_eq!(fetch(&server, "/local/a.txt", None).body_text(), "local");
    let elsewhere = fetch(&server, "/elsewhere/a.txt", None);
    assert_eq!(elsewhere.status, 403);
    elsewhere.assert_common_headers();
    assert_eq!(fetch(&server, "/denied/a.txt", None).status, 403, "deny wins over allow all");
    // A refused request leaves the connection usable.
    let mut conn = Conn::open(server.addr());
    assert_eq!(conn.get("/denied/a.txt", &[]).status, 403);
    assert_eq!(conn.get("/open/a.txt", &[]).status, 200);
});

default_arch!(fn basic_authentication(arch) {
    let (_root, server) = setup(arch);
    let challenge = fetch(&server, "/bcrypt/a.txt", None);
    assert_eq!(challenge.status, 401);
    assert_eq!(challenge.header("www-authenticate"), Some("Basic realm=\"Team\", charset=\"UTF-8\""));
    assert_eq!(fetch(&server, "/bcrypt/a.txt", Some(&basic("alice", "wrong"))).status, 401);
    assert_eq!(fetch(&server, "/bcrypt/a.txt", Some(&basic("mallory", "correct horse"))).status, 401);
    assert_eq!(fetch(&server, "/bcrypt/a.txt", Some("Basic !!!not-base64!!!")).status, 401);
    assert_eq!(fetch(&server, "/bcrypt/a.txt", Some("Basic YWxpY2U=")).status, 401, "no colon");
    assert_eq!(fetch(&server, "/bcrypt/a.txt", Some("Bearer abc")).status, 401);
    let good = basic("alice", "correct horse");
    let ok = fetch(&server, "/bcrypt/a.txt", Some(&good));
    assert_eq!((ok.status, ok.body_text().as_str()), (200, "bcrypt secret"));
    // A second request with the same credentials is served from the verified cache.
    assert_eq!(fetch(&server, "/bcrypt/a.txt", Some(&good)).status, 200);
    // argon2, and the default realm.
    let argon = fetch(&server, "/argon/a.txt", None);
    assert_eq!(argon.header("www-authenticate"), Some("Basic realm=\"ampd\", charset=\"UTF-8\""));
    assert_eq!(fetch(&server, "/argon/a.txt", Some(&basic("bob", "wrong"))).status, 401);
    assert_eq!(fetch(&server, "/argon/a.txt", Some(&basic("bob", "battery staple"))).body_text(), "argon secret");
    // Address and password both apply.
    assert_eq!(fetch(&server, "/both/a.txt", None).status, 401);
    assert_eq!(fetch(&server, "/both/a.txt", Some(&good)).body_text(), "both");
});

default_arch!(fn the_user_reaches_the_access_log(arch) {
    let root = TempRoot::new();
    root.file("p/a.txt", "x");
    let hash = bcrypt::hash("pw", 4).unwrap();
    let log = root.outside_dir().join("access.log");
    let config = write_config(
        &root,
        arch,
        &format!(
            "[log]\naccess = \"access.log\"\nformat = \"common\"\n[[site]]\nroot = \"www\"\nbasic_auth = {{ users = {{ carol = \"{hash}\" }} }}\n"
        ),
    );
    let mut server = Server::start(Options::config_file(&config));
    assert_eq!(
        fetch(&server, "/p/a.txt", Some(&basic("carol", "pw"))).status,
        200
    );
    assert_eq!(fetch(&server, "/p/a.txt", None).status, 401);
    server.signal("TERM");
    assert_eq!(
        server.wait_exit(std::time::Duration::from_secs(10)),
        Some(0)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    // Two connections may be served by two loops (or processes), whose lines meet in the file
    // in either order.
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_by_key(|line| !line.contains(" carol "));
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("127.0.0.1 - carol ["), "{text}");
    assert!(
        lines[0].ends_with("\"GET /p/a.txt HTTP/1.1\" 200 1"),
        "{text}"
    );
    assert!(lines[1].starts_with("127.0.0.1 - - ["), "{text}");
    assert!(lines[1].contains("\" 401 "), "{text}");
});

for_each_arch!(fn password_checks_do_not_stall_other_requests(arch) {
    // A deliberately slow hash (bcrypt cost 12, a few hundred milliseconds): its check runs on a
    // helper under amped and reactor, on its own thread under the blocking engines, so another
    // client of the same loop is served meanwhile. Judged by order, not by a time limit (a busy
    // machine stretches both): requests sent after the checked one must come back before it.
    let root = TempRoot::new();
    root.file("open/a.txt", "open");
    root.file("slow/a.txt", "slow");
    let hash = bcrypt::hash("pw", 12).unwrap();
    let config = write_config(
        &root,
        arch,
        &format!("[[site]]\nroot = \"www\"\n\n  [[site.location]]\n  path = \"/slow/\"\n  basic_auth = {{ users = {{ u = \"{hash}\" }} }}\n"),
    );
    // One loop, so that both clients share it.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replacen("threads = 2", "threads = 1", 1)).unwrap();
    let server = Server::start(Options::config_file(&config));
    let addr = server.addr();
    let mut other = Conn::open(addr);
    assert_eq!(other.get("/open/a.txt", &[]).status, 200);
    let mut checked = Conn::open(addr);
    checked.send(support::http::build_request("GET", "/slow/a.txt", &[("Authorization", &basic("u", "pw"))]));
    let checking = std::thread::spawn(move || {
        let response = checked.read_response("GET");
        (response.status, std::time::Instant::now())
    });
    let mut answered = Vec::new();
    while !checking.is_finished() && answered.len() < 20 {
        assert_eq!(other.get("/open/a.txt", &[]).status, 200);
        answered.push(std::time::Instant::now());
    }
    let (status, checked_at) = checking.join().unwrap();
    assert_eq!(status, 200);
    // A loop that stalls for the check answers at most the one or two requests it read before
    // the checked one; sped is that loop by design (it has no helpers).
    let before = answered.iter().filter(|at| **at < checked_at).count();
    if arch != "sped" {
        assert!(before >= 3, "{arch}: only {before} of {} requests were answered while a password was checked", answered.len());
    }
});
