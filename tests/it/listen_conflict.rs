//! A port another process holds is refused by every engine (as nginx and Caddy refuse it), even
//! by the engines whose listeners carry `SO_REUSEPORT` (`reactor`, `uring`): a second server on
//! the first one's port exits 1 with a clear message, and the first keeps serving its own site.

use crate::support;

use support::*;

/// Requests on fresh connections, so that a second listener in the port's `SO_REUSEPORT` group
/// would get some of them (the kernel spreads connections by their 4-tuple hash).
const PROBES: usize = 24;

fn second_server_is_refused(first_arch: &str, second_arch: &str) {
    let first_root = TempRoot::new();
    first_root.file("site.txt", "first site\n");
    let first = Server::start(Options::new(first_root.path(), first_arch));
    let addr = first.addr().to_string();

    let second_root = TempRoot::new();
    second_root.file("site.txt", "second site\n");
    let second_root_path = second_root.path().display().to_string();
    let mut args = vec!["serve", &second_root_path, "--listen", &addr];
    let mut words = second_arch.split_whitespace();
    let engine = words.next().expect("an engine");
    args.extend(["--arch", engine]);
    args.extend(words);
    let (code, stdout, stderr) = run_to_exit(&args);
    assert_eq!(
        code,
        Some(1),
        "a second {second_arch} server on {addr} (held by {first_arch}) must fail; \
         stdout: {stdout} stderr: {stderr}"
    );
    assert!(
        stderr.contains(&format!("ampd: cannot listen on {addr}"))
            && stderr.contains("Address already in use"),
        "a clear message naming the address: {stderr}"
    );

    for _ in 0..PROBES {
        let response = get(first.addr(), "/site.txt");
        assert_eq!(response.status, 200);
        assert_eq!(
            response.body_text(),
            "first site\n",
            "only the first site answers"
        );
    }
}

for_each_arch!(fn same_engine_twice(arch) {
    second_server_is_refused(arch, arch);
});

for_each_arch!(fn default_engine_on_a_taken_port(arch) {
    second_server_is_refused(arch, "reactor");
});

for_each_arch!(fn taken_port_refuses_uring(arch) {
    second_server_is_refused(arch, "uring");
});
