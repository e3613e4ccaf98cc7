#!/usr/bin/env bash
# Windows and macOS from Linux (issue 11): installs what it needs, then
#   1. clippy -D warnings for x86_64-pc-windows-gnu and aarch64-apple-darwin (the library with
#      default and with all features, the CLI, the test bed),
#   2. the Windows test binary (crates/hypomnesis/tests/windows/main.rs) cross-compiled with mingw
#      and run under Wine (scripts/wine/runner.sh: our ProcessPrng shim beside each .exe).
# macOS is compile-checked only (no macOS runner here). A part whose tools cannot be installed
# prints ONE loud line and fails; the other parts still run; the exit status is non-zero if any
# part failed. Never a silent pass.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
failed=()
loud() { echo "!!!!!!!! CROSS: $1 !!!!!!!!" >&2; failed+=("$1"); }
step() { echo "== cross: $*"; }
started=$(date +%s)

WIN=x86_64-pc-windows-gnu
MAC=aarch64-apple-darwin
have_win=1 have_mac=1 have_wine=1

step "rustup targets"
installed=$(rustup target list --installed 2>/dev/null || true)
for t in $WIN $MAC; do
    if ! grep -qx "$t" <<<"$installed"; then
        rustup target add "$t" || true
    fi
done
installed=$(rustup target list --installed 2>/dev/null || true)
grep -qx $WIN <<<"$installed" || { loud "Rust target $WIN could not be installed: Windows not checked"; have_win=0; }
grep -qx $MAC <<<"$installed" || { loud "Rust target $MAC could not be installed: macOS not checked"; have_mac=0; }

wine_bin() { for w in wine64 /usr/lib/wine/wine64 wine; do command -v "$w" >/dev/null 2>&1 && { echo "$w"; return 0; }; done; return 1; }
if ! command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || ! wine_bin >/dev/null; then
    step "apt-get install gcc-mingw-w64-x86-64 wine64"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-mingw-w64-x86-64 wine64; } >/dev/null 2>&1 || true
fi
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || { loud "mingw (gcc-mingw-w64-x86-64) could not be installed: Windows not checked"; have_win=0; }
WINE=$(wine_bin) || { loud "wine64 could not be installed: the Windows tests did not run"; have_wine=0; }
export WINE="${WINE:-}"

run() { # run NAME CMD...: one part; a failure is recorded, the script goes on
    local name=$1; shift
    step "$name"
    "$@" || loud "$name FAILED"
}

hmn_smoke() { # hmn.exe itself under Wine: the device view and `hmn run`'s exit code
    cargo build -q -p hmn --target $WIN || return 1
    local exe=${CARGO_TARGET_DIR:-$root/target}/$WIN/debug/hmn.exe out rc
    out=$("$root/scripts/wine/runner.sh" "$exe" 2>&1) || { echo "$out"; return 1; }
    grep -q '^RAM: .* available / ' <<<"$out" || { echo "no RAM line: $out"; return 1; }
    "$root/scripts/wine/runner.sh" "$exe" run -- cmd.exe /c exit 3 2>/tmp/hmn-run-$$.txt
    rc=$?
    grep -q 'exit status   3' /tmp/hmn-run-$$.txt || { cat /tmp/hmn-run-$$.txt; rc=99; }
    rm -f /tmp/hmn-run-$$.txt
    [ "$rc" = 3 ] || { echo "hmn run exit $rc, want 3"; return 1; }
    hmn_record_smoke "$exe"
}

hmn_record_smoke() { # `hmn record` writes snapshots; `hmn top` replays or refuses without a terminal
    local exe=$1 rec=/tmp/hmn-rec-$$.jsonl out rc
    "$root/scripts/wine/runner.sh" "$exe" record --interval 300ms --duration 1s "$rec" 2>/dev/null \
        || { echo "hmn record failed"; return 1; }
    python3 - "$rec" <<'PY' || { rm -f "$rec"; return 1; }
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) >= 2, f"want >= 2 samples, got {len(lines)}"
for l in lines:
    s = json.loads(l)
    assert s["format"] == "hmn-top", s
    assert s["host"]["memory_total_bytes"] > 0, s["host"]
    assert s["no_gpu"].startswith("no GPU found"), s.get("no_gpu")
PY
    out=$("$root/scripts/wine/runner.sh" "$exe" top --replay "$rec" </dev/null 2>&1)
    rc=$?
    rm -f "$rec"
    [ "$rc" = 2 ] && grep -q 'needs a terminal' <<<"$out" || { echo "hmn top without a terminal: exit $rc: $out"; return 1; }
    # `hmn doctor`: Windows' checks, each with a verdict (no GPU under Wine: all ok)
    out=$("$root/scripts/wine/runner.sh" "$exe" doctor --json 2>/dev/null)
    rc=$?
    python3 -c '
import json, sys
v = json.loads(sys.argv[1])
ids = [c["id"] for c in v["checks"]]
assert ids == ["nvml", "nvidia-smi", "accounting", "gpu-backends", "memory-health", "unattributed", "compute-mode"], ids
assert all(c["status"] in ("ok", "warn", "fail") and c["saw"] for c in v["checks"]), v
assert v["status"] == "ok", v
' "$out" && [ "$rc" = 0 ] || { echo "hmn doctor: exit $rc: $out"; return 1; }
}

if [ $have_win = 1 ]; then
    run "clippy $WIN (library, default features)" cargo clippy -p hypomnesis --target $WIN -- -D warnings
    run "clippy $WIN (library, all features)" cargo clippy -p hypomnesis --target $WIN --all-features -- -D warnings
    run "clippy $WIN (library, no default features)" cargo clippy -p hypomnesis --target $WIN --lib --no-default-features -- -D warnings
    run "clippy $WIN (hmn, test bed, Windows tests)" cargo clippy -p hmn -p hmn-testbed --target $WIN -- -D warnings
    run "clippy $WIN (tests/windows/main.rs)" cargo clippy -p hypomnesis --target $WIN --test windows -- -D warnings
fi
if [ $have_mac = 1 ]; then
    # Dependencies' C helpers (signal-hook) need Apple's SDK; a check links nothing, so a
    # stand-in compiler writes empty objects (scripts/cross/check-cc.sh).
    export CC_aarch64_apple_darwin=$root/scripts/cross/check-cc.sh AR_aarch64_apple_darwin=ar
    run "clippy $MAC (library, default features)" cargo clippy -p hypomnesis --target $MAC -- -D warnings
    run "clippy $MAC (library, all features)" cargo clippy -p hypomnesis --target $MAC --all-features -- -D warnings
    run "clippy $MAC (library, no default features)" cargo clippy -p hypomnesis --target $MAC --lib --no-default-features -- -D warnings
    run "clippy $MAC (hmn)" cargo clippy -p hmn --target $MAC -- -D warnings
fi
if [ $have_win = 1 ] && [ $have_wine = 1 ]; then
    export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=$root/scripts/wine/runner.sh
    run "Windows tests under Wine (tests/windows/main.rs)" cargo test -p hypomnesis --target $WIN --test windows
    run "hmn.exe under Wine (host RAM line; run passes exit code 3 through; record; top refuses without a terminal; doctor)" hmn_smoke
fi

echo "== cross: $(( $(date +%s) - started )) s"
if [ ${#failed[@]} -gt 0 ]; then
    printf '!!!!!!!! CROSS FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
echo "== cross passed"
