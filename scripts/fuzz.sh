#!/usr/bin/env bash
# Runs libFuzzer on the HTTP/2 fuzz targets for a bounded time each (FUZZ_SECONDS, default 30):
# HPACK decoding and a whole HTTP/2 connection fed arbitrary frames. Installs cargo-fuzz if it
# is missing. The stable toolchain builds the targets with RUSTC_BOOTSTRAP (cargo-fuzz needs
# the sanitizer flags of nightly); a crash leaves its input under fuzz/artifacts/ and fails.
# The corpora under fuzz/corpus/ are replayed by `cargo test` as well (crates/http/tests).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${FUZZ_SECONDS:-30}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --quiet --locked cargo-fuzz
for target in hpack_decode h2_connection; do
  echo "-- $target, ${seconds} s"
  # Findings go to a scratch copy of the corpus: the committed seeds stay as they are.
  corpus=$(mktemp -d)
  cp -r "corpus/$target/." "$corpus/"
  log=$(mktemp)
  status=0
  RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" "$corpus" -- -max_total_time="$seconds" \
    > "$log" 2>&1 || status=$?
  rm -rf "$corpus"
  if [ "$status" != 0 ]; then
    tail -40 "$log" >&2
    echo "fuzz target $target failed (exit $status); its input is under fuzz/artifacts/$target/" >&2
    exit 1
  fi
  grep -E "^Done" "$log" || true
  rm -f "$log"
done
