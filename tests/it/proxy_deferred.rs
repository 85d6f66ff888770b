//! AFPA's deferred response under every engine: the upstream hands the response back to the
//! static path. `X-Accel-Redirect` serves an `internal = true` location (which a client asking
//! directly gets a 404 from); `X-Sendfile` serves a file below `x_sendfile_root` and nothing
//! outside it (absolute or through `..`), and is ignored where no root is configured.

use crate::support;

use support::http::Conn;
use support::proxy::{self, location, pool};
use support::upstream::{RawUpstream, Reply};
use support::*;

const SECRET: &str = "outside the sendfile root";

fn answer_with(field: &str, value: &str) -> Reply {
    Reply::raw(format!(
        "HTTP/1.1 200 OK\r\n{field}: {value}\r\nX-App: yes\r\nContent-Length: 13\r\n\r\nupstream body"
    ))
}

for_each_arch!(fn accel_redirect_and_sendfile_hand_back_to_the_static_path(arch) {
    let root = TempRoot::new();
    root.file("protected/report.txt", "the protected report\n");
    let files = root.outside_dir().join("files");
    root.outside_file("files/doc.txt", "a document from the sendfile root\n");
    root.outside_file("secret.txt", SECRET);
    let upstream = {
        let files = files.display().to_string();
        let base = root.outside_dir().display().to_string();
        RawUpstream::start(move |seen| match seen.target.rsplit('/').next().unwrap_or("") {
            "accel" => answer_with("X-Accel-Redirect", "/protected/report.txt"),
            "accel-missing" => answer_with("X-Accel-Redirect", "/protected/none.txt"),
            "sendfile" => answer_with("X-Sendfile", &format!("{files}/doc.txt")),
            "sendfile-outside" => answer_with("X-Sendfile", &format!("{base}/secret.txt")),
            "sendfile-dotdot" => answer_with("X-Sendfile", &format!("{files}/../secret.txt")),
            _ => Reply::ok("raw", "plain"),
        })
    };
    let server = proxy::start(
        &root,
        arch,
        &pool("app", &[upstream.addr()], "max_fails = 0"),
        &format!(
            "{}{}[[site.location]]\npath = \"/protected/\"\ninternal = true\n",
            location("/api/", "app", &format!("x_sendfile_root = \"{}\"", files.display())),
            location("/plain/", "app", "")
        ),
    );
    let mut conn = Conn::open(server.addr());
    let accel = conn.get("/api/accel", &[]);
    assert_eq!(accel.status, 200, "{accel:?}");
    assert_eq!(accel.body_text(), "the protected report\n");
    assert!(!accel.has_header("x-accel-redirect"), "{accel:?}");
    assert_eq!(conn.get("/api/accel-missing", &[]).status, 404);
    assert_eq!(conn.get("/protected/report.txt", &[]).status, 404, "internal: not for clients");

    let sent = conn.get("/api/sendfile", &[]);
    assert_eq!(sent.status, 200, "{sent:?}");
    assert_eq!(sent.body_text(), "a document from the sendfile root\n");
    assert!(!sent.has_header("x-sendfile"), "{sent:?}");
    for path in ["/api/sendfile-outside", "/api/sendfile-dotdot"] {
        let refused = request(server.addr(), "GET", path, &[]);
        assert!(refused.status >= 400, "{path}: {refused:?}");
        assert!(!refused.body_text().contains(SECRET), "{path}: {refused:?}");
    }
    // Where no root is configured, X-Sendfile is not honoured: the upstream's own body.
    let ignored = request(server.addr(), "GET", "/plain/sendfile", &[]);
    assert_eq!(ignored.body_text(), "upstream body", "{ignored:?}");
});
