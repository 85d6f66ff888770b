//! The benchmarks run from a clone: every script in `bench/` parses, nothing the project ships
//! points into `../shared/` (a reference folder beside the project, not part of it), and
//! `bench/setup.sh` builds the document root the benchmarks request and the Howl floor server,
//! which then answers a real request. The peers themselves are Debian packages that setup.sh
//! installs as root; that half is not run here (`SKIP_PACKAGES=1`).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn every_bench_script_parses() {
    let mut scripts = Vec::new();
    files_under(&project().join("bench"), &mut scripts);
    scripts.retain(|path| path.extension().is_some_and(|ext| ext == "sh"));
    assert!(scripts.len() >= 10, "{scripts:?}");
    for script in scripts {
        let status = Command::new("bash")
            .arg("-n")
            .arg(&script)
            .status()
            .expect("bash");
        assert!(status.success(), "bash -n {}", script.display());
    }
}

#[test]
fn nothing_shipped_depends_on_the_shared_folder() {
    let mut files = Vec::new();
    for dir in ["bench", "docs", "scripts", "dist", "examples", ".ci"] {
        files_under(&project().join(dir), &mut files);
    }
    files.push(project().join("README.md"));
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue; // binary files (charts, compressed samples)
        };
        assert!(
            !text.contains("../shared") && !text.contains("shared/bench"),
            "{} refers to the shared folder",
            file.display()
        );
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port nothing listens on right now (howl takes a port number, not a socket).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("bind port 0")
        .port()
}

#[test]
fn setup_builds_the_document_root_and_howl() {
    if Command::new("gcc").arg("--version").output().is_err() {
        panic!("gcc is needed to build bench/howl.c (Debian package gcc)");
    }
    let root = std::env::temp_dir().join(format!("ampd-bench-setup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let output = Command::new("bash")
        .arg(project().join("bench/setup.sh"))
        .env("SKIP_PACKAGES", "1")
        .env("BENCH_ROOT", &root)
        .env("SPEC_DIRS", "2")
        .output()
        .expect("bench/setup.sh");
    assert!(
        output.status.success(),
        "setup.sh: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let www = root.join("www");
    for (name, size) in [
        ("f64.bin", 64),
        ("f1k.bin", 1024),
        ("f4k.bin", 4096),
        ("f16k.bin", 16_384),
        ("f100k.bin", 102_400),
        ("f1m.bin", 1_048_576),
        ("f10m.bin", 10_485_760),
    ] {
        let meta = std::fs::metadata(www.join(name)).expect(name);
        assert_eq!(meta.len(), size, "{name}");
    }
    // SPECweb96's file set: class C file I holds (I+1) * 1024 * 10^C / 10 bytes.
    for dir in 0..2 {
        for class in 0..4u32 {
            for index in 0..9u64 {
                let path = www.join(format!("specweb/dir{dir:05}/class{class}_{index}"));
                let expected = (index + 1) * 1024 * 10u64.pow(class) / 10;
                let meta = std::fs::metadata(&path)
                    .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
                assert_eq!(meta.len(), expected, "{}", path.display());
            }
        }
    }

    // Howl answers a request with its pre-built response of the size asked for.
    let port = free_port();
    let howl = Killed(
        Command::new(root.join("bin/howl"))
            .args([&port.to_string(), "1024", "127.0.0.1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start howl"),
    );
    let started = Instant::now();
    let mut stream = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(stream) => break stream,
            Err(error) if started.elapsed() < Duration::from_secs(10) => {
                let _ = error;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => panic!("howl never listened on {port}: {error}"),
        }
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let head_end = text.find("\r\n\r\n").expect("a whole head") + 4;
    assert_eq!(response.len() - head_end, 1024, "{text}");
    drop(howl);
    let _ = std::fs::remove_dir_all(&root);
}

/// The other servers the bench scripts configure must be here to check their configurations:
/// scripts/test.sh installs them (its `packages=`), as bench/setup.sh does. A missing one fails
/// the test rather than leaving a configuration unchecked behind a pass.
fn require_peer(program: &str) {
    let found = Command::new(program).arg("-v").output();
    assert!(
        found.is_ok(),
        "{program} is not installed: scripts/test.sh installs it (apt-get install nginx \
         lighttpd h2o php8.2-fpm); without it its bench configuration cannot be checked"
    );
}

/// bench/proxy.sh explains itself and writes configurations both proxies accept: `ampd check`
/// takes the ampd one, and nginx `-t` the other two.
#[test]
fn proxy_bench_configurations_are_accepted() {
    let help = Command::new("bash")
        .arg(project().join("bench/proxy.sh"))
        .arg("--help")
        .output()
        .expect("bash");
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("nginx") && text.contains("--configs"),
        "{text}"
    );

    let dir = std::env::temp_dir().join(format!("ampd-bench-proxy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let written = Command::new("bash")
        .arg(project().join("bench/proxy.sh"))
        .arg("--configs")
        .arg(&dir)
        .env("WWW", &www)
        .output()
        .expect("bash");
    assert!(written.status.success(), "{written:?}");
    let check = Command::new(env!("CARGO_BIN_EXE_ampd"))
        .arg("check")
        .arg(dir.join("ampd-proxy.toml"))
        .output()
        .expect("ampd check");
    assert!(
        check.status.success(),
        "ampd check ampd-proxy.toml: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    require_peer("nginx");
    for conf in ["nginx-proxy.conf", "nginx-upstream.conf"] {
        let tested = Command::new("nginx")
            .arg("-t")
            .arg("-c")
            .arg(dir.join(conf))
            .arg("-e")
            .arg(dir.join("nginx-test.log"))
            .output()
            .expect("nginx -t");
        assert!(
            tested.status.success(),
            "nginx -t {conf}: {}",
            String::from_utf8_lossy(&tested.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// bench/dynamic.sh explains itself and writes configurations every server accepts: `ampd check`
/// takes ampd's, and nginx `-t`, lighttpd `-tt` and php-fpm `-t` theirs; its shell CGI script
/// answers when run as one.
#[test]
fn dynamic_bench_configurations_are_accepted() {
    let help = Command::new("bash")
        .arg(project().join("bench/dynamic.sh"))
        .arg("--help")
        .output()
        .expect("bash");
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for word in ["nginx", "lighttpd", "php-fpm", "--configs", "ROWS"] {
        assert!(text.contains(word), "--help lacks {word}: {text}");
    }

    let dir = std::env::temp_dir().join(format!("ampd-bench-dynamic-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let written = Command::new("bash")
        .arg(project().join("bench/dynamic.sh"))
        .arg("--configs")
        .arg(&dir)
        .output()
        .expect("bash");
    assert!(written.status.success(), "{written:?}");
    let check = Command::new(env!("CARGO_BIN_EXE_ampd"))
        .arg("check")
        .arg(dir.join("ampd-dynamic.toml"))
        .output()
        .expect("ampd check");
    assert!(
        check.status.success(),
        "ampd check ampd-dynamic.toml: {}",
        String::from_utf8_lossy(&check.stderr)
    );

    let cgi = Command::new(dir.join("www/hello.cgi"))
        .env_clear()
        .env("REQUEST_METHOD", "GET")
        .output()
        .expect("run hello.cgi");
    assert_eq!(
        String::from_utf8_lossy(&cgi.stdout),
        "Content-Type: text/plain\n\nhello\n"
    );

    let peers: [(&str, &[&str], &str); 3] = [
        (
            "nginx",
            &["-t", "-e", "nginx-test.log", "-c"],
            "nginx-fastcgi.conf",
        ),
        ("lighttpd", &["-tt", "-f"], "lighttpd-cgi.conf"),
        ("php-fpm8.2", &["-t", "-y"], "php-fpm.conf"),
    ];
    for (program, args, conf) in peers {
        require_peer(program);
        let tested = Command::new(program)
            .current_dir(&dir)
            .args(args)
            .arg(dir.join(conf))
            .output()
            .expect(program);
        assert!(
            tested.status.success(),
            "{program} {args:?} {conf}: {}{}",
            String::from_utf8_lossy(&tested.stdout),
            String::from_utf8_lossy(&tested.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// bench/h2.sh explains itself and writes what it runs: configurations every server accepts
/// (`ampd check` ampd's with its TLS and h2c listeners, nginx `-t` and h2o `-t` theirs) and
/// the page of 120 resources, each linked once from index.html and between 1 and 20 KiB.
#[test]
fn h2_bench_configurations_and_page_are_accepted() {
    let help = Command::new("bash")
        .arg(project().join("bench/h2.sh"))
        .arg("--help")
        .output()
        .expect("bash");
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for word in [
        "nginx",
        "h2o",
        "h2load",
        "nghttp",
        "--configs",
        "ROWS",
        "h2c",
    ] {
        assert!(text.contains(word), "--help lacks {word}: {text}");
    }

    let dir = std::env::temp_dir().join(format!("ampd-bench-h2-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    let written = Command::new("bash")
        .arg(project().join("bench/h2.sh"))
        .arg("--configs")
        .arg(&dir)
        .env("WWW", &www)
        .output()
        .expect("bash");
    assert!(written.status.success(), "{written:?}");

    let check = Command::new(env!("CARGO_BIN_EXE_ampd"))
        .arg("check")
        .arg(dir.join("ampd.toml"))
        .output()
        .expect("ampd check");
    assert!(
        check.status.success(),
        "ampd check ampd.toml: {}",
        String::from_utf8_lossy(&check.stderr)
    );
    let peers: [(&str, &[&str], &str); 2] = [
        ("nginx", &["-t", "-e", "nginx-test.log", "-c"], "nginx.conf"),
        ("h2o", &["-t", "-c"], "h2o.conf"),
    ];
    for (program, args, conf) in peers {
        require_peer(program);
        let tested = Command::new(program)
            .current_dir(&dir)
            .args(args)
            .arg(dir.join(conf))
            .output()
            .expect(program);
        assert!(
            tested.status.success(),
            "{program} {args:?} {conf}: {}{}",
            String::from_utf8_lossy(&tested.stdout),
            String::from_utf8_lossy(&tested.stderr)
        );
    }

    // The page: 40 style sheets, 40 scripts and 40 images, every one linked once and present.
    let page = www.join("h2page");
    let html = std::fs::read_to_string(page.join("index.html")).expect("index.html");
    let mut linked = Vec::new();
    for attribute in ["href=\"", "src=\""] {
        for (at, _) in html.match_indices(attribute) {
            let rest = &html[at + attribute.len()..];
            linked.push(rest[..rest.find('"').expect("closing quote")].to_string());
        }
    }
    linked.sort();
    linked.dedup();
    assert_eq!(linked.len(), 120, "{linked:?}");
    for (extension, wanted) in [(".css", 40), (".js", 40), (".png", 40)] {
        let count = linked
            .iter()
            .filter(|name| name.ends_with(extension))
            .count();
        assert_eq!(count, wanted, "{extension}: {linked:?}");
    }
    for name in &linked {
        let size = std::fs::metadata(page.join(name))
            .unwrap_or_else(|error| panic!("{name}: {error}"))
            .len();
        assert!((1024..=20 * 1024).contains(&size), "{name}: {size} bytes");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The experiments of docs/research/evaluation.md that bench/evaluation/ runs over the peers explain
/// themselves (`--help`), and bench/peers_lib.sh turns their `ampd-ENGINE[-N]` servers into
/// `ampd serve` commands on ports of their own, for engines `ampd serve --help` lists.
#[test]
fn evaluation_scripts_explain_themselves_and_name_real_engines() {
    for (script, words) in [
        (
            "single_file.sh",
            &["SIZES", "Howl", "DURATION", "sped", "mp-1"][..],
        ),
        ("specweb96.sh", &["DIRS", "Howl", "15,027", "KEEPALIVE"][..]),
        (
            "webstone.sh",
            &["COUNTS", "THRESHOLD_SIZES", "sendfile", "writev", "tpc"][..],
        ),
    ] {
        let help = Command::new("bash")
            .arg(project().join("bench/evaluation").join(script))
            .arg("--help")
            .output()
            .expect("bash");
        assert!(help.status.success(), "{script} --help");
        let text = String::from_utf8_lossy(&help.stdout);
        for word in words {
            assert!(text.contains(word), "{script} --help lacks {word}: {text}");
        }
    }

    let engines = Command::new(env!("CARGO_BIN_EXE_ampd"))
        .args(["serve", "--help"])
        .output()
        .expect("ampd serve --help");
    let engines = String::from_utf8_lossy(&engines.stdout);
    let listed = |engine: &str| {
        engines
            .lines()
            .any(|line| line.trim_start().starts_with(&format!("{engine} ")))
    };
    let script = r#"
        SERVERS="ampd-sped ampd-mt-1 nginx ampd-uring-1"
        BASE_PORT=30000
        source bench/peers_lib.sh
        for name in $SERVERS; do echo "$name ${PORT[$name]} $(server_cmd "$name")"; done
    "#;
    let output = Command::new("bash")
        .current_dir(project())
        .args(["-c", script])
        .env("PRIO", "0")
        .output()
        .expect("bash");
    assert!(output.status.success(), "{output:?}");
    let lines: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    for (line, (name, port, arch, threads)) in lines.iter().zip([
        ("ampd-sped", 30010, Some("sped"), None),
        ("ampd-mt-1", 30011, Some("mt"), Some("1")),
        ("nginx", 30001, None, None),
        ("ampd-uring-1", 30012, Some("uring"), Some("1")),
    ]) {
        assert!(line.starts_with(&format!("{name} {port} ")), "{line}");
        let Some(arch) = arch else { continue };
        assert!(listed(arch), "ampd serve --help lists no engine {arch}");
        assert!(
            line.contains(&format!("--listen 127.0.0.1:{port} --arch {arch}")),
            "{line}"
        );
        assert_eq!(line.contains("--threads"), threads.is_some(), "{line}");
        if let Some(threads) = threads {
            assert!(line.ends_with(&format!("--threads {threads}")), "{line}");
        }
    }
}
