//! `dist/`: the Kubernetes manifests parse and agree with the shipped ampd.toml, the
//! Containerfile has its parts, the systemd unit allows an upgrade, and `ampd check` accepts the
//! shipped configuration (`dist/check.py`, which needs python3-yaml).

mod support;

#[test]
fn dist_files_parse_and_agree() {
    let output = std::process::Command::new("python3")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/dist/check.py"))
        .arg(support::server::binary())
        .output()
        .expect("python3 must be installed (apt-get install python3 python3-yaml)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("dist: OK (5 manifests"), "{stdout}");
}

/// docs/deploy.md shows `dist/haproxy.cfg` whole, and HAProxy itself accepts it: a reader who
/// copies the block gets a configuration that starts.
#[test]
fn haproxy_sample_is_whole_and_valid() {
    let root = env!("CARGO_MANIFEST_DIR");
    let config = std::fs::read_to_string(format!("{root}/dist/haproxy.cfg")).unwrap();
    let deploy = std::fs::read_to_string(format!("{root}/docs/deploy.md")).unwrap();
    assert!(
        deploy.contains(&format!("```\n{config}```\n")),
        "docs/deploy.md must show dist/haproxy.cfg verbatim"
    );
    let output = std::process::Command::new("haproxy")
        .args(["-c", "-f", &format!("{root}/dist/haproxy.cfg")])
        .output()
        .expect("haproxy must be installed (scripts/test.sh installs it)");
    assert!(
        output.status.success(),
        "haproxy -c refused dist/haproxy.cfg: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
