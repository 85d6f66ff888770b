//! The CGI and FastCGI checks of the reference client suite (curl against a server configured
//! as the reference nginx: `/cgi-bin/` Python and Perl scripts, `.php` through php-fpm, `/flup/`
//! a WSGI app under flup over TCP), with the same scripts and the same expectations, under every
//! engine.

use crate::support;

use support::bulk::{sha256, write_pattern};
use support::flup::PyFastCgi;
use support::phpfpm::PhpFpm;
use support::scripts::{install_cgi, install_php};
use support::*;

const MIB: u64 = 1 << 20;

fn url(server: &Server, path: &str) -> String {
    format!("http://{}{path}", server.addr())
}

/// `curl -s ARGS`, its stdout; a failed transfer panics with curl's stderr.
fn curl_out(args: &[&str]) -> Vec<u8> {
    let output = curl(std::iter::once("-sS").chain(args.iter().copied()));
    assert!(output.status.success(), "curl {args:?}: {output:?}");
    output.stdout
}

default_arch!(fn reference_gateway_checks(arch) {
    let root = TempRoot::new();
    install_cgi(&root, "cgi-bin");
    install_php(&root, "php");
    let fpm = PhpFpm::start(&root.outside_dir().join("fpm"));
    let flup = PyFastCgi::flup(root.outside_dir());
    let mut megabyte = Vec::new();
    write_pattern(&mut megabyte, MIB).unwrap();
    let upload = root.outside_file("1m.bin", &megabyte);
    let upload_arg = format!("@{}", upload.display());
    let config = write_config(
        &root,
        arch,
        &format!(
            r#"
[[site]]
root = "www"

[[site.location]]
path = "/cgi-bin/"
handler = "cgi"
max_body = "20MiB"

[[site.location]]
extension = ".php"
fastcgi_pass = "{php}"

[[site.location]]
path = "/flup/"
fastcgi_pass = "{flup}"
"#,
            php = fpm.address(),
            flup = flup.addr(),
        ),
    );
    let server = Server::start(Options::config_file(&config));

    // "CGI (python) runs, sees QUERY_STRING"
    let env = String::from_utf8_lossy(&curl_out(&[&url(&server, "/cgi-bin/env.py?a=1&b=2")])).into_owned();
    assert!(env.lines().any(|line| line == "QUERY_STRING=a=1&b=2"), "{env}\n{}", server.stderr());

    // "CGI POST 1MB echoed (perl, Expect 100)"
    let echoed = curl_out(&["--data-binary", &upload_arg, "-H", "Content-Type: application/octet-stream",
        &url(&server, "/cgi-bin/echo.pl")]);
    assert_eq!(sha256(&echoed), sha256(&megabyte), "{} bytes back", echoed.len());

    // "CGI chunked request body echoed"
    let chunked = curl_out(&["-H", "Transfer-Encoding: chunked", "--data-binary", &upload_arg,
        &url(&server, "/cgi-bin/echo.pl")]);
    assert_eq!(sha256(&chunked), sha256(&megabyte), "{} bytes back", chunked.len());

    // "CGI Status: header honoured (418)"
    let status = curl_out(&["-o", "/dev/null", "-w", "%{http_code}", &url(&server, "/cgi-bin/status.py")]);
    assert_eq!(String::from_utf8_lossy(&status), "418");

    // "FastCGI (php-fpm) answers"
    let php = String::from_utf8_lossy(&curl_out(&[&url(&server, "/php/info.php?x=y")])).into_owned();
    assert!(php.contains("GET /php/info.php?x=y x=y"), "{php}\n{}", fpm.log());

    // "FastCGI over TCP (flup WSGI) + body"
    let wsgi = String::from_utf8_lossy(&curl_out(&["--data-binary", "hello", &url(&server, "/flup/a/b?q=1")])).into_owned();
    assert!(wsgi.starts_with("flup POST ") && wsgi.contains("q=1 body=5"), "{wsgi}");
    assert_eq!(wsgi, "flup POST /flup|/a/b|q=1 body=5\n");
});
