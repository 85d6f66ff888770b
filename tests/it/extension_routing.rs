//! `extension` locations in the running server: a path with a segment ending in the extension
//! goes to the first such location (in file order) whose `path` it lies below, after exact
//! locations and before prefixes (docs/config.md, "CGI and FastCGI"). Static extension
//! locations with a header each show which location answered.

use crate::support;

use support::*;

fn extension_config(root: &TempRoot, arch: &str) -> std::path::PathBuf {
    root.file("hello.txt", "hello");
    root.file("exact.txt", "exact");
    root.file("docs/guide.txt", "guide");
    root.file("docs/page.html", "page");
    write_config(
        root,
        arch,
        r#"
[[site]]
root = "www"

  [[site.location]]
  path = "/docs/"
  headers = { "X-Location" = "docs prefix" }

  [[site.location]]
  path = "/docs/"
  extension = ".txt"
  headers = { "X-Location" = "docs txt" }

  [[site.location]]
  extension = ".txt"
  headers = { "X-Location" = "txt" }

  [[site.location]]
  path = "/exact.txt"
  exact = true
  headers = { "X-Location" = "exact" }
"#,
    )
}

default_arch!(fn extension_locations_sit_between_exact_and_prefix_ones(arch) {
    let root = TempRoot::new();
    let server = Server::start(Options::config_file(&extension_config(&root, arch)));
    let location = |path: &str| {
        let response = get(server.addr(), path);
        (response.status, response.header("x-location").map(str::to_owned))
    };
    let at = |status: u16, name: &str| (status, Some(name.to_owned()));
    assert_eq!(location("/hello.txt"), at(200, "txt"));
    assert_eq!(location("/exact.txt"), at(200, "exact"), "an exact location first");
    assert_eq!(location("/docs/guide.txt"), at(200, "docs txt"), "in file order");
    assert_eq!(location("/docs/page.html"), at(200, "docs prefix"));
    // A segment in the middle counts; the static handler then finds no such file.
    assert_eq!(location("/hello.txt/more"), at(404, "txt"));
    assert_eq!(location("/hello.txtx"), (404, None), "the segment must end with it");
    // Routing sees the decoded path.
    assert_eq!(location("/hello%2Etxt"), at(200, "txt"));
});
