//! MIME types from the configuration over real sockets: `types_file` (the Debian format, a file
//! the test writes), `[types]` over it, the built-in table under both, a site's `default_type`
//! and a location's `charset` (or none); the same through helper processes, which are sent the
//! table; and the errors for bad keys, naming file, line and key.

use crate::support;

use support::*;

const TYPES_FILE: &str = "# a mime.types of its own\n\
application/x-custom\t\tcustom cst\n\
text/x-special special\n\
application/x-none\n";

const CONFIG: &str = r#"
types_file = "mime.types"

[types]
wasm = "application/wasm"
cst = "application/x-override"

[[site]]
root = "www"
default_type = "text/plain"

  [[site.location]]
  path = "/latin/"
  charset = "iso-8859-1"

  [[site.location]]
  path = "/bin/"
  default_type = "application/x-unknown"
  charset = "off"
"#;

fn start(arch: &str) -> (TempRoot, Server) {
    let root = TempRoot::new();
    for name in [
        "app.wasm",
        "data.custom",
        "data.cst",
        "data.special",
        "notes",
        "img.png",
        "page.html",
        "latin/page.html",
        "latin/notes",
        "bin/blob",
        "bin/page.html",
    ] {
        root.file(name, "x");
    }
    std::fs::write(root.outside_dir().join("mime.types"), TYPES_FILE).unwrap();
    let config = write_config(&root, arch, CONFIG);
    let server = Server::start(Options::config_file(&config));
    (root, server)
}

fn check(server: &Server) {
    let mut conn = Conn::open(server.addr());
    // Twice each: the second answer comes from the caches.
    for _ in 0..2 {
        for (path, expected) in [
            ("/app.wasm", "application/wasm"),
            ("/data.custom", "application/x-custom"),
            ("/data.cst", "application/x-override"),
            ("/data.special", "text/x-special; charset=utf-8"),
            ("/notes", "text/plain; charset=utf-8"),
            ("/img.png", "image/png"),
            ("/page.html", "text/html; charset=utf-8"),
            ("/latin/page.html", "text/html; charset=iso-8859-1"),
            ("/latin/notes", "text/plain; charset=iso-8859-1"),
            ("/bin/blob", "application/x-unknown"),
            ("/bin/page.html", "text/html"),
        ] {
            let response = conn.get(path, &[]);
            assert_eq!(response.status, 200, "{path}");
            assert_eq!(response.header("content-type"), Some(expected), "{path}");
        }
    }
}

default_arch!(fn types_file_types_table_default_type_and_charset(arch) {
    let (_root, server) = start(arch);
    check(&server);
});

/// A helper process resolves with the configuration's table, sent to it once.
#[test]
fn helper_processes_use_the_configured_types() {
    let (_root, server) = start("amped --helpers-mode process");
    check(&server);
}

/// Checks `text` (with `mime.types` beside it holding `types_file`) as a config; returns the
/// one error line.
fn error_for(text: &str, types_file: &str) -> (String, String) {
    let root = TempRoot::new();
    std::fs::write(root.outside_dir().join("mime.types"), types_file).unwrap();
    let file = root.outside_dir().join("bad.toml");
    std::fs::write(&file, text).unwrap();
    let (code, _, stderr) = run_to_exit(&["check", &file.display().to_string()]);
    assert_eq!(code, Some(1), "{text}\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    (
        stderr.trim().to_owned(),
        root.outside_dir().display().to_string(),
    )
}

#[test]
fn bad_types_keys_name_file_line_and_key() {
    let site = "[[site]]\nroot = \"/tmp\"\n";
    let (line, dir) = error_for(&format!("[types]\nwasm = \"wasm\"\n{site}"), "");
    assert!(
        line.starts_with(&format!("ampd: {dir}/bad.toml:2:")),
        "{line}"
    );
    assert!(
        line.contains(": types.wasm: 'wasm' is not a media type"),
        "{line}"
    );

    let (line, _) = error_for(
        &format!("[types]\n\"tar.gz\" = \"application/gzip\"\n{site}"),
        "",
    );
    assert!(
        line.contains(":2:")
            && line.contains("types.tar.gz: 'tar.gz' is not a file-name extension"),
        "{line}"
    );

    let (line, dir) = error_for(
        &format!("types_file = \"mime.types\"\n{site}"),
        "text/plain txt\n\nbroken stuff\n",
    );
    assert!(
        line.starts_with(&format!(
            "ampd: {dir}/mime.types:3:1: types_file: 'broken' is not a type/subtype"
        )),
        "{line}"
    );

    let (line, _) = error_for(&format!("types_file = \"missing.types\"\n{site}"), "");
    assert!(
        line.contains("bad.toml:1:") && line.contains("types_file: cannot read"),
        "{line}"
    );

    let (line, _) = error_for(&format!("{site}default_type = \"binary\"\n"), "");
    assert!(
        line.contains("bad.toml:3:")
            && line.contains("site.default_type: 'binary' is not a media type"),
        "{line}"
    );

    let (line, _) = error_for(
        &format!("{site}[[site.location]]\npath = \"/a/\"\ncharset = \"utf 8\"\n"),
        "",
    );
    assert!(
        line.contains("bad.toml:5:")
            && line.contains("site.location.charset: 'utf 8' is not a charset name"),
        "{line}"
    );
}
