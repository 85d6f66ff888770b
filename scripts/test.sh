#!/usr/bin/env bash
# The project's one test command (README.md, .ci/run): installs what the tests need on a
# Debian machine (as root, or with sudo), then runs formatting, lints and every test.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(curl procps strace python3 python3-fusepy python3-prometheus-client fuse3 libfuse2
  haproxy wrk iproute2 bc python3-yaml fonts-dejavu-core util-linux
  php8.2-fpm perl python3-venv openssl chromium testssl.sh sslscan pebble
  nghttp2-client python3-h2 python3-hpack python3-hyperframe systemd)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# flup (PyPI only) for the FastCGI application tests, in a venv under target/.
bash scripts/test-python.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== scale-out: three instances behind HAProxy (tests/scale_out.sh, about 30 s)"
cargo build --quiet
bash tests/scale_out.sh target/debug/ampd
echo "== TLS scanners: testssl and sslscan against ampd (tests/tls_scan.sh, about 1 min)"
bash tests/tls_scan.sh target/debug/ampd
echo "== fuzzing the HTTP/2 targets (scripts/fuzz.sh, about 3 min)"
bash scripts/fuzz.sh
