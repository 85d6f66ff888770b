//! Shared harness for the whole-server tests: starts the built `ampd` binary on port 0, builds
//! throw-away document roots, and talks HTTP/1.x over raw sockets with a strict response reader.
//! It must not know anything about the server's internals: only its command line, its ready line
//! and the bytes on the wire. Every wait here is bounded.
#![allow(dead_code)]

pub mod bulk;
pub mod certificates;
pub mod flup;
pub mod gateway;
pub mod h2;
pub mod http;
pub mod pebble;
pub mod phpfpm;
pub mod processes;
pub mod proxy;
pub mod pyupstream;
pub mod root;
pub mod scripts;
pub mod server;
pub mod slowfs;
pub mod tls;
pub mod upstream;
pub mod websocket;

/// `read`, again when a signal interrupted it: a socket with a read timeout is not restarted
/// after a signal handler (signal(7)), so `EINTR` reaches the caller as an error.
pub fn read_some(source: &mut impl std::io::Read, buffer: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match source.read(buffer) {
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Copies `from` to `to` with `mode` through install(1), so that the copy is never open for
/// writing in this process: a child another test forks at that moment would inherit the
/// descriptor until it execs, and executing the copy meanwhile fails with `ETXTBSY` ("Text file
/// busy").
pub fn install_file(from: &std::path::Path, to: &std::path::Path, mode: u32) {
    let status = std::process::Command::new("install")
        .arg("-m")
        .arg(format!("{mode:o}"))
        .arg(from)
        .arg(to)
        .status()
        .expect("run install(1)");
    assert!(status.success(), "install {from:?} {to:?}: {status}");
}

/// Writes an executable script: the text goes to a sibling `.source` file, and the script itself
/// is made by `install_file` (see there why).
pub fn write_executable(path: &std::path::Path, text: &str) {
    let source = path.with_extension("source");
    std::fs::write(&source, text).expect("write script source");
    install_file(&source, path, 0o755);
}

#[allow(unused_imports)]
pub use http::{get, request, send_raw, Conn, Response};
#[allow(unused_imports)]
pub use root::TempRoot;
#[allow(unused_imports)]
pub use server::{curl, is_root_user, run_to_exit, Options, Server};

/// Writes `ampd.toml` next to the root (outside it): `listen` on port 0, the engine, then `body`.
/// `arch` is a `for_each_arch!` name: an engine, optionally with `--helpers-mode MODE`. Each
/// engine gets enough of its unit of concurrency for the tests' parallel clients: two loops or
/// rings, eight `mt` threads, four `mp` processes, and the default cap of `tpc` threads.
pub fn write_config(root: &TempRoot, arch: &str, body: &str) -> std::path::PathBuf {
    let path = root.outside_dir().join("ampd.toml");
    std::fs::write(&path, format!("{}{body}", config_head(arch))).expect("write ampd.toml");
    path
}

/// The server-wide lines of `write_config` for `arch`.
pub fn config_head(arch: &str) -> String {
    let mut words = arch.split_whitespace();
    let engine = words.next().unwrap_or("reactor");
    let mut text = format!("listen = \"127.0.0.1:0\"\narch = \"{engine}\"\n");
    match engine {
        "reactor" | "uring" => text.push_str("threads = 2\n"),
        "mt" => text.push_str("threads = 8\n"),
        "mp" => text.push_str("threads = 4\n"),
        _ => {}
    }
    while let Some(word) = words.next() {
        if word == "--helpers-mode" {
            let mode = words.next().expect("--helpers-mode needs a value");
            text.push_str(&format!("helpers_mode = \"{mode}\"\n"));
        }
    }
    text
}

/// Runs one test body under every engine: `for_each_arch!(fn name(arch) { ... })` expands to
/// `mod name { #[test] fn sped() ..; #[test] fn amped() ..; ... }`. This macro is the ONE place the
/// engine list lives; adding an engine is one `#[test]` here. `amped_helper_processes` runs the
/// `amped` engine with its helpers as processes (`--helpers-mode process`): the arch string may
/// carry extra arguments after a space, which `Options::new` passes on.
#[macro_export]
macro_rules! for_each_arch {
    (fn $name:ident($arch:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn run($arch: &'static str) $body

            #[test]
            fn sped() {
                run("sped")
            }
            #[test]
            fn amped() {
                run("amped")
            }
            #[test]
            fn mt() {
                run("mt")
            }
            #[test]
            fn tpc() {
                run("tpc")
            }
            #[test]
            fn mp() {
                run("mp")
            }
            #[test]
            fn uring() {
                run("uring")
            }
            #[test]
            fn reactor() {
                run("reactor")
            }
            #[test]
            fn amped_helper_processes() {
                run("amped --helpers-mode process")
            }
        }
    };
}

/// The engine of tests whose behaviour every engine shares: the default (`arch` unset).
pub const DEFAULT_ARCH: &str = "reactor";

/// Runs one test body once, on the default engine: `default_arch!(fn name(arch) { ... })`
/// expands to `#[test] fn name()` with `arch` bound to `DEFAULT_ARCH`. For what the engines do
/// not take part in: request semantics `Conn` owns (framing, methods, ranges, conditionals),
/// what content, access, sites and routing decide, and what the proxy and gateways write. The
/// engines only carry those bytes, and how they carry them is what `for_each_arch!` tests:
/// accept and admission, keep-alive and pipelining, the send path, TLS, the upstream pump,
/// timeouts, drain and signals, HTTP/2 framing.
#[macro_export]
macro_rules! default_arch {
    (fn $name:ident($arch:ident) $body:block) => {
        #[test]
        fn $name() {
            let $arch: &'static str = $crate::support::DEFAULT_ARCH;
            $body
        }
    };
}
