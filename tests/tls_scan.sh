#!/usr/bin/env bash
# TLS scanners against ampd: one instance on a TLS listener (port 0, the port read from its
# ready line) with a self-signed ECDSA P-256 certificate made here, then
#
#   testssl (Debian's testssl.sh): fails on any HIGH or CRITICAL finding except those about
#            the certificate's trust, which a self-signed test certificate cannot pass
#            (cert_chain_of_trust, cert_trust);
#   sslscan: fails when SSLv2, SSLv3, TLS 1.0 or TLS 1.1 is enabled, when renegotiation is
#            supported without RFC 5746's protection, when TLS compression is on (CRIME), or when
#            a cipher below 128 bits (or one sslscan rates null, anonymous, weak or medium) is
#            accepted.
#
# testssl runs its TLS checks (protocols, cipher categories, forward secrecy, server preference,
# server defaults, HTTP headers, vulnerabilities) but not its client simulations, which rate
# nothing and take minutes on a loaded machine. Its WARN lines are printed, not failed on: its
# TLS 1.3 ticket-resumption check races s_client's exit against the post-handshake
# NewSessionTicket and loses now and then against any server under load (OpenSSL's s_server
# too); tests/it/tls.rs checks resumption itself.
#
# Which engine serves does not change what rustls negotiates, so one is scanned (ARCH, default
# reactor). Every wait is bounded: testssl by SCAN_TIMEOUT (default 240 s; a run takes about a
# minute), sslscan by 60 s; ampd is stopped and the work directory removed on exit, also on
# failure.
#
# usage: tests/tls_scan.sh [AMPD_BINARY]   (default: target/debug/ampd)
# env:   ARCH (engine, reactor), SCAN_TIMEOUT (seconds for testssl, 240), KEEP=1 keeps the work
#        directory (reports: testssl.json, testssl.txt, sslscan.xml, ampd.err)
# needs: testssl.sh, sslscan, openssl, python3 (Debian packages; scripts/test.sh installs them)
set -euo pipefail

AMPD=${1:-target/debug/ampd}
ARCH=${ARCH:-reactor}
SCAN_TIMEOUT=${SCAN_TIMEOUT:-240}
[ -x "$AMPD" ] || { echo "tls_scan: no ampd binary at $AMPD (cargo build first)"; exit 2; }
for tool in testssl sslscan openssl python3; do
  command -v "$tool" >/dev/null || { echo "tls_scan: $tool is missing (scripts/test.sh installs it)"; exit 2; }
done

WORK=$(mktemp -d /tmp/ampd-tls-scan.XXXXXX)
AMPD_PID=""
cleanup() {
  if [ -n "$AMPD_PID" ] && kill -0 "$AMPD_PID" 2>/dev/null; then
    kill -TERM "$AMPD_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$AMPD_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$AMPD_PID" 2>/dev/null || true
  fi
  if [ "${KEEP:-0}" = 1 ]; then echo "tls_scan: reports kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# A self-signed ECDSA P-256 certificate for localhost and 127.0.0.1, valid for a year (testssl
# rates a certificate that expires within 30 days HIGH), with a CRL distribution point (it rates
# one with neither CRL nor OCSP URI HIGH).
openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -days 365 \
  -keyout "$WORK/self.key" -out "$WORK/self.pem" -subj "/O=ampd tls scan/CN=localhost" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -addext "crlDistributionPoints=URI:http://localhost/self.crl" 2>/dev/null

mkdir -p "$WORK/www"
echo "scanned" > "$WORK/www/index.html"
cat > "$WORK/ampd.toml" <<EOF
listen = "127.0.0.1:0 tls"
arch = "$ARCH"

[[site]]
root = "www"
certificate = "self.pem"
certificate_key = "self.key"
EOF

"$AMPD" run -c "$WORK/ampd.toml" >"$WORK/ampd.out" 2>"$WORK/ampd.err" &
AMPD_PID=$!
PORT=""
for _ in $(seq 100); do
  PORT=$(sed -n 's|.* at https\{0,1\}://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$WORK/ampd.out" | head -1)
  [ -n "$PORT" ] && break
  kill -0 "$AMPD_PID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$PORT" ]; then
  echo "tls_scan: ampd printed no ready line within 10 s:"; cat "$WORK/ampd.out" "$WORK/ampd.err"
  exit 1
fi
echo "== tls_scan: ampd ($ARCH) serving TLS on 127.0.0.1:$PORT"
status=0

echo "== testssl (about a minute, at most $SCAN_TIMEOUT s)"
started=$(date +%s)
set +e
timeout -k 5 "$SCAN_TIMEOUT" testssl --quiet --color 0 --warnings off --severity HIGH \
  --protocols --std --fs --server-preference --server-defaults --header --vulnerable \
  --jsonfile "$WORK/testssl.json" "127.0.0.1:$PORT" >"$WORK/testssl.txt" 2>&1
testssl_exit=$?
set -e
echo "testssl: exit $testssl_exit after $(( $(date +%s) - started )) s"
if [ "$testssl_exit" = 124 ] || [ "$testssl_exit" = 137 ] || [ ! -s "$WORK/testssl.json" ]; then
  echo "tls_scan: testssl did not finish (exit $testssl_exit):"; tail -20 "$WORK/testssl.txt"
  status=1
else
  # testssl's exit code counts findings at any severity; the JSON says which ones matter.
  python3 - "$WORK/testssl.json" <<'EOF' || status=1
import json, sys
# Findings about the self-signed certificate's trust, which no test certificate can pass.
TRUST = {"cert_chain_of_trust", "cert_trust"}
findings = json.load(open(sys.argv[1]))
bad = [f for f in findings
       if f.get("severity") in ("HIGH", "CRITICAL") and f.get("id") not in TRUST]
for f in findings:
    if f.get("severity") in ("HIGH", "CRITICAL", "WARN"):
        tag = "accepted (certificate trust)" if f.get("id") in TRUST else f["severity"]
        print("  testssl {:<28} {:<28} {}".format(f["id"], tag, f.get("finding", "")))
if bad:
    print("tls_scan: testssl found {} HIGH/CRITICAL issue(s) beyond certificate trust".format(len(bad)))
    sys.exit(1)
print("testssl: no HIGH or CRITICAL finding beyond certificate trust")
EOF
fi

echo "== sslscan"
set +e
timeout -k 5 60 sslscan --no-colour --xml="$WORK/sslscan.xml" "127.0.0.1:$PORT" >"$WORK/sslscan.txt" 2>&1
sslscan_exit=$?
set -e
if [ "$sslscan_exit" != 0 ] || [ ! -s "$WORK/sslscan.xml" ]; then
  echo "tls_scan: sslscan failed (exit $sslscan_exit):"; tail -20 "$WORK/sslscan.txt"
  status=1
else
  python3 - "$WORK/sslscan.xml" <<'EOF' || status=1
import sys
import xml.etree.ElementTree as ET
test = ET.parse(sys.argv[1]).getroot().find("ssltest")
problems = []
for protocol in test.findall("protocol"):
    name = "{} {}".format(protocol.get("type").upper(), protocol.get("version"))
    wanted_off = (protocol.get("type") == "ssl"
                  or protocol.get("version") in ("1.0", "1.1"))
    enabled = protocol.get("enabled") == "1"
    print("  sslscan {:<10} {}".format(name, "enabled" if enabled else "disabled"))
    if wanted_off and enabled:
        problems.append(name + " is enabled")
for renegotiation in test.findall("renegotiation"):
    supported = renegotiation.get("supported") == "1"
    secure = renegotiation.get("secure") == "1"
    print("  sslscan renegotiation supported={} secure={}".format(supported, secure))
    if supported and not secure:
        problems.append("insecure renegotiation is supported")
compression = test.findall("compression")
for element in compression:
    print("  sslscan compression supported={}".format(element.get("supported")))
    if element.get("supported") == "1":
        problems.append("TLS compression is on (CRIME)")
if not compression:
    # Debian's sslscan is built without zlib and cannot test it; testssl's CRIME_TLS check
    # (above) covers compression.
    print("  sslscan compression: not tested by this sslscan build (testssl's CRIME_TLS is)")
for heartbleed in test.findall("heartbleed"):
    if heartbleed.get("vulnerable") == "1":
        problems.append("heartbleed under " + heartbleed.get("sslversion"))
ciphers = test.findall("cipher")
for cipher in ciphers:
    bits = int(cipher.get("bits", "0"))
    strength = cipher.get("strength", "")
    print("  sslscan {:<8} {:<8} {:>3} bits {:<32} {}".format(
        cipher.get("status"), cipher.get("sslversion"), bits, cipher.get("cipher"), strength))
    if bits < 128 or strength in ("null", "anonymous", "weak", "medium"):
        problems.append("weak cipher {} ({} bits, {})".format(cipher.get("cipher"), bits, strength))
if not ciphers:
    problems.append("no cipher accepted at all")
for problem in problems:
    print("tls_scan: sslscan: " + problem)
if problems:
    sys.exit(1)
print("sslscan: clean")
EOF
fi

if ! kill -0 "$AMPD_PID" 2>/dev/null; then
  echo "tls_scan: ampd exited during the scans:"; tail -20 "$WORK/ampd.err"
  status=1
fi
if [ "$status" = 0 ]; then echo "== tls_scan: passed"; else echo "== tls_scan: FAILED"; fi
exit "$status"
