#!/usr/bin/env bash
# setup.sh - everything the benchmarks in bench/ need on a fresh Debian machine, from a clone:
# the peer servers and the load generator (Debian packages), the document root the benchmarks
# request, and howl (bench/howl.c, the "fastest possible" reference server). Run as root, from
# anywhere; running it again only redoes what is missing.
#
#   sudo bash bench/setup.sh
#
# Packages: nginx, lighttpd, apache2 (event MPM), h2o (where this Debian release has it), wrk,
# curl, gcc; for bench/h2.sh nghttp2-client (h2load, nghttp); for bench/dynamic.sh php8.2-fpm, Perl's FCGI module (libfcgi-perl) and
# python3-venv (its flup environment); for bench/instructions.sh valgrind. Installing them must not leave their system services running (they would take
# port 80 and share the benchmark's CPUs): services are kept from starting during the install
# (policy-rc.d) and any that started anyway are stopped, by the pid the install created only.
#
# The document root $WWW [/tmp/bench/www]:
#   f64.bin f1k.bin f4k.bin f16k.bin f100k.bin f1m.bin f10m.bin   exact sizes, random bytes
#   specweb/dirNNNNN/classC_I  the SPECweb96 file set (bench/wrk/specweb.lua, ampd-bench
#                              specweb96): $SPEC_DIRS [10] directories of 4 classes x 9 files,
#                              class C file I holding (I+1) * 1024 * 10^C / 10 bytes
#   index.html
# howl is built into $BENCH_ROOT/bin/howl.
#
# Knobs: BENCH_ROOT [/tmp/bench]  WWW [$BENCH_ROOT/www]  SPEC_DIRS [10]
#        SKIP_PACKAGES=1 (only the document root and howl: no root needed if the tools exist)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_ROOT=${BENCH_ROOT:-/tmp/bench}
WWW=${WWW:-$BENCH_ROOT/www}
SPEC_DIRS=${SPEC_DIRS:-10}
PACKAGES=(nginx lighttpd apache2 wrk nghttp2-client curl gcc libc6-dev php8.2-fpm libfcgi-perl python3-venv
  valgrind)
OPTIONAL=(h2o)
# Where each service's init script records its pid: how an auto-started one is found.
declare -A SERVICE_PID=([nginx]=/run/nginx.pid [lighttpd]=/run/lighttpd.pid
                        [apache2]=/run/apache2/apache2.pid [h2o]=/run/h2o.pid
                        [php8.2-fpm]=/run/php/php8.2-fpm.pid)

say() { printf '[setup] %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
pid_from() { [ -s "$1" ] && tr -dc '0-9' < "$1" || true; }

install_packages() {
  [ "$(id -u)" = 0 ] || die "installing packages needs root (or SKIP_PACKAGES=1)"
  local wanted=() package
  for package in "${PACKAGES[@]}"; do installed "$package" || wanted+=("$package"); done
  for package in "${OPTIONAL[@]}"; do
    installed "$package" && continue
    if apt-cache show "$package" >/dev/null 2>&1; then wanted+=("$package")
    else say "$package is not in this release's archive: the benchmarks run without it"; fi
  done
  if [ ${#wanted[@]} = 0 ]; then say "packages already installed"; return; fi

  declare -A before=()
  local service
  for service in "${!SERVICE_PID[@]}"; do before[$service]=$(pid_from "${SERVICE_PID[$service]}"); done
  # invoke-rc.d asks /usr/sbin/policy-rc.d whether a service may start; 101 means no.
  local our_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# bench/setup.sh: no service starts while the peers install\nexit 101\n' \
      > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    our_policy=1
  fi
  say "installing: ${wanted[*]}"
  export DEBIAN_FRONTEND=noninteractive
  local status=0
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${wanted[@]}" >/dev/null; } \
    || status=$?
  [ "$our_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ "$status" = 0 ] || die "apt-get failed ($status)"

  # A service that started anyway (a system without invoke-rc.d): stop the one this install
  # started, never one that was running before.
  local pid
  for service in "${!SERVICE_PID[@]}"; do
    pid=$(pid_from "${SERVICE_PID[$service]}")
    [ -n "$pid" ] && [ "$pid" != "${before[$service]}" ] && kill -0 "$pid" 2>/dev/null || continue
    say "stopping $service, started by the install (pid $pid)"
    service "$service" stop >/dev/null 2>&1 || kill -TERM "$pid" 2>/dev/null || true
  done
}

# make_file PATH BYTES: exactly BYTES random (incompressible) bytes; kept if already that size.
make_file() {
  [ -f "$1" ] && [ "$(stat -c %s "$1")" = "$2" ] && return
  head -c "$2" /dev/urandom > "$1.part"
  chmod 644 "$1.part"
  mv "$1.part" "$1"
}

make_docroot() {
  say "document root $WWW"
  mkdir -p "$WWW/specweb" "$BENCH_ROOT/bin"
  chmod 755 "$BENCH_ROOT" "$WWW" "$WWW/specweb"
  local name bytes dir class index
  for name in f64:64 f1k:1024 f4k:4096 f16k:16384 f100k:102400 f1m:1048576 f10m:10485760; do
    make_file "$WWW/${name%%:*}.bin" "${name#*:}"
  done
  for ((dir = 0; dir < SPEC_DIRS; dir++)); do
    printf -v name '%s/specweb/dir%05d' "$WWW" "$dir"
    mkdir -p "$name"
    chmod 755 "$name"
    for class in 0 1 2 3; do
      for index in 0 1 2 3 4 5 6 7 8; do
        bytes=$(((index + 1) * 1024 * 10 ** class / 10))
        make_file "$name/class${class}_$index" "$bytes"
      done
    done
  done
  cat > "$WWW/index.html" <<'EOF'
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ampd benchmarks</title></head>
<body><p>The ampd benchmark document root (bench/setup.sh).</p></body></html>
EOF
  chmod 644 "$WWW/index.html"
  # Read it all once so that the first measured run does not wait for the disk.
  cat "$WWW"/*.bin "$WWW"/specweb/*/* > /dev/null
  say "$(find "$WWW" -type f | wc -l) files, $(du -sh "$WWW" | cut -f1)"
}

build_howl() {
  command -v gcc >/dev/null || die "gcc is not installed"
  gcc -O2 -Wall -Wextra -o "$BENCH_ROOT/bin/howl.part" "$HERE/howl.c"
  mv "$BENCH_ROOT/bin/howl.part" "$BENCH_ROOT/bin/howl"
  say "howl: $BENCH_ROOT/bin/howl"
}

versions() {
  first() { "$@" 2>&1 | head -n1 || true; }
  {
    echo "nginx:    $(first nginx -v)"
    echo "lighttpd: $(first lighttpd -v)"
    echo "apache2:  $(first apache2 -v)"
    echo "h2o:      $(command -v h2o >/dev/null && first h2o --version || echo 'not installed')"
    echo "php-fpm:  $(first php-fpm8.2 -v)"
    echo "wrk:      $(first wrk -v)"
    echo "h2load:   $(first h2load --version)"
  } | tee "$BENCH_ROOT/versions.txt" >&2
}

mkdir -p "$BENCH_ROOT"
[ "${SKIP_PACKAGES:-0}" = 1 ] || install_packages
make_docroot
build_howl
versions
say "done"
