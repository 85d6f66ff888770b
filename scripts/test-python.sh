#!/usr/bin/env bash
# The Python packages the tests need that Debian does not ship: flup (the FastCGI server under
# tests/fixtures/flup_app.py), from PyPI, in a virtual environment under target/ (bookworm's
# pip refuses system-wide installs, PEP 668). tests/it/support/flup.rs looks for it there, or at
# $AMPD_TEST_PYTHON. Needs Debian's python3-venv.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/test-python
if ! "$venv/bin/python3" -c 'import flup.server.fcgi' 2>/dev/null; then
  echo "== python venv for the tests: $venv (flup from PyPI)"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'flup==1.0.3'
fi
