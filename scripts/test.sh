#!/usr/bin/env bash
# Runs the whole test suite: `cargo test --workspace`, after installing the Debian packages
# some tests run (python3, GNU time, prometheus + promtool, tmux, man-db + groff for `man -l`)
# when they are missing. Installing
# needs root (as in CI); otherwise the missing packages are named and the script stops.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v python3 >/dev/null || need+=(python3)
[ -x /usr/bin/time ] || need+=(time)
{ command -v promtool >/dev/null && command -v prometheus >/dev/null; } || need+=(prometheus)
command -v tmux >/dev/null || need+=(tmux)  # the end-to-end tests of `hmn top`
command -v man >/dev/null || need+=(man-db)
command -v groff >/dev/null || need+=(groff)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: the tests need these Debian packages: ${need[*]} (run as root, or apt-get install them)" >&2
    exit 2
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # The package may start a Prometheus service on :9090; the tests start their own on a free port.
  (command -v systemctl >/dev/null && systemctl stop prometheus 2>/dev/null) || true
fi

exec cargo test --workspace "$@"
