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
