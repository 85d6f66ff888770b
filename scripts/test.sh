#!/usr/bin/env bash
# The project's one test command (README.md, .ci/run): installs what the tests need on a
# Debian machine (as root, or with sudo), then runs formatting, lints and every test.
#
# Every step runs even when an earlier one failed, and `cargo test` does not stop at the first
# failing test binary (--no-fail-fast): a failure must not hide the rest. The last lines are a
# table of the steps and one line of test totals; the exit status is 0 only if every step passed.
set -uo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

packages=(curl procps strace python3 python3-fusepy python3-prometheus-client fuse3 libfuse2
  haproxy wrk iproute2 bc python3-yaml fonts-dejavu-core util-linux
  php8.2-fpm perl python3-venv openssl chromium testssl.sh sslscan pebble
  nghttp2-client python3-h2 python3-hpack python3-hyperframe systemd
  nginx lighttpd h2o
  python3-brotli python3-zstandard)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq || exit 1
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null ||
    exit 1
fi

# flup (PyPI only) for the FastCGI application tests, in a venv under target/.
bash scripts/test-python.sh || exit 1

steps=()
failed_steps=0
# step NAME COMMAND...: runs one step, keeps going whatever it returns, and remembers how it
# ended and how long it took for the table at the end.
step() {
  local name=$1 start=$SECONDS status=0
  shift
  echo "== $name"
  "$@" || status=$?
  local outcome="ok"
  if [ "$status" != 0 ]; then
    outcome="FAILED (exit $status)"
    failed_steps=$((failed_steps + 1))
  fi
  steps+=("$(printf '%-28s %-18s %4d s' "$name" "$outcome" $((SECONDS - start)))")
}

test_log=$(mktemp)
trap 'rm -f "$test_log"' EXIT
# cargo test's output goes to the terminal as it comes and to a log the totals are read from.
# The integration tests spend most of their time waiting on sockets, processes and timeouts, not
# on the CPU: six at once on two cores take half the time of two (TEST_THREADS=N to change it).
cargo_test() {
  cargo test --workspace --no-fail-fast -- --test-threads "${TEST_THREADS:-6}" 2>&1 | tee "$test_log"
  return "${PIPESTATUS[0]}"
}
scale_out() {
  cargo build --quiet && bash tests/scale_out.sh target/debug/ampd
}

step "cargo fmt --check" cargo fmt --all -- --check
step "cargo clippy -D warnings" cargo clippy --workspace --all-targets -- -D warnings
step "cargo test" cargo_test
# Three instances behind HAProxy, about 30 s.
step "scale-out behind HAProxy" scale_out
# testssl and sslscan against ampd, about 1 min.
step "TLS scanners" bash tests/tls_scan.sh target/debug/ampd
# The HTTP/2 fuzz targets, about 3 min.
step "fuzzing" bash scripts/fuzz.sh

echo
echo "== summary"
printf '%s\n' "${steps[@]}"
# Each test binary ends with "test result: ok. 12 passed; 0 failed; 1 ignored; ..."; a binary
# that failed to build or crashed has none, and cargo's closing "error:" lines name it.
awk '/^test result:/ {
       for (i = 1; i <= NF; i++) {
         if ($(i + 1) ~ /^passed/) passed += $i
         if ($(i + 1) ~ /^failed/) failed += $i
         if ($(i + 1) ~ /^ignored/) ignored += $i
       }
       binaries++
     }
     /^error:/ { print "  " $0; naming = 1; next }
     naming && /^    `/ { print "  " $0; next }
     { naming = 0 }
     END { printf "tests: %d passed, %d failed, %d ignored in %d test binaries\n",
                  passed, failed, ignored, binaries }' "$test_log"
elapsed=$((SECONDS - started))
printf 'total time: %d min %d s; steps failed: %d\n' $((elapsed / 60)) $((elapsed % 60)) "$failed_steps"
[ "$failed_steps" = 0 ]
