#!/usr/bin/env bash
# Installs hmn's .deb into a clean Debian root as a user would, uses it there, removes it, and
# checks that nothing it installed is left behind. Run by CI (.ci/run); needs root (debootstrap,
# chroot, mount) and Debian's mirror. About 2–3 minutes after the release build
# (docs/packaging.md).
#
#  1. scripts/release.sh: the release binary, target/dist/hmn_<version>-1_<arch>.deb and the
#     archive (its file list, and its hmn --version, checked here).
#  2. debootstrap --variant=minbase of the host's Debian release (HMN_DEB_SUITE overrides) into
#     a temporary folder, with /proc, /sys and /dev/pts mounted; its own apt installs man-db,
#     bash-completion and systemd (for systemd-analyze and deb-systemd-helper); the file list
#     is taken.
#  3. apt-get install ./hmn_….deb, then in the root: `hmn` (the RAM line, exit 0),
#     `hmn --version` (this version and commit), `man hmn`, bash completion of `hmn p<TAB>`
#     through bash-completion's own loader (offers `ps`), zsh and fish completions where their
#     shells look, `systemd-analyze verify` of the unit (and of a broken copy, which must fail),
#     the unit neither enabled nor started and listening on loopback.
#  4. systemctl enable hmn-serve (an admin's choice), then apt-get remove --purge hmn: the
#     file list must equal step 2's, the enablement symlink included, and no path names hmn.
# Nothing is cached between runs: the root is made and deleted here.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/deb-test.sh: needs root (debootstrap, chroot, mount)" >&2
  exit 2
fi
start=$SECONDS
fail() {
  echo "deb test: $*" >&2
  exit 1
}

if ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

./scripts/release.sh all
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
deb=target/dist/hmn_${version}-1_$(dpkg --print-architecture).deb
[ -f "$deb" ] || fail "no $deb after scripts/release.sh"
commit=${HMN_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "commit unknown")}

# The archive: every file in its one folder, and the binary in it runs.
name=hmn-$version-$(uname -m)-linux
archive=target/dist/$name.tar.gz
listed=$(tar -tzf "$archive" | LC_ALL=C sort | tr '\n' ' ')
expected=""
for f in / /LICENSE-APACHE /LICENSE-MIT /README.md /completions/ /completions/bash/ \
  /completions/bash/hmn /completions/fish/ /completions/fish/hmn.fish /completions/zsh/ \
  /completions/zsh/_hmn /hmn /hmn-serve.service /hmn.1; do
  expected+="$name$f "
done
[ "$listed" = "$expected" ] || fail "$archive holds: $listed; expected: $expected"
rm -rf target/dist/check && mkdir target/dist/check
tar -xzf "$archive" -C target/dist/check
line=$("target/dist/check/$name/hmn" --version)
rm -rf target/dist/check
[ "$line" = "hmn $version ($commit)" ] || fail "the archive's hmn --version printed '$line', expected 'hmn $version ($commit)'"

# shellcheck disable=SC1091
suite=${HMN_DEB_SUITE:-$(. /etc/os-release && [ "$ID" = debian ] && echo "$VERSION_CODENAME" || echo bookworm)}
mirror=${HMN_DEB_MIRROR:-http://deb.debian.org/debian}
root=$(mktemp -d "${TMPDIR:-/tmp}/hmn-deb-root.XXXXXX")
chmod 755 "$root" # apt's download user must reach the root's /var/cache/apt
cleanup() {
  for m in dev/pts sys proc; do
    if mountpoint -q "$root/$m"; then umount -l "$root/$m"; fi
  done
  # --one-file-system: never into a mount that did not come off.
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT
in_root() {
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive "$@"
}
# A command in the root whose output is shown only when it fails (apt's and debconf's chatter).
quiet() {
  in_root "$@" >"$root/tmp/log" 2>&1 || { cat "$root/tmp/log" >&2; fail "$* failed in the root"; }
}
# Every path in the root but the kernel's, apt's downloads and logs, with its type and link target.
snapshot() {
  in_root find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp \
    -o -path /var/cache/apt -o -path /var/lib/apt/lists -o -path /var/log \) -prune \
    -o -printf '%y %p -> %l\n' | LC_ALL=C sort
}

echo "== deb test: debootstrap --variant=minbase $suite ($mirror)"
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 ||
  { tail -n 20 "$root.log" >&2; rm -f "$root.log"; fail "debootstrap failed"; }
rm -f "$root.log"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mkdir -p "$root/dev/pts"
mount --bind /dev/pts "$root/dev/pts"
echo "== deb test: apt-get install man-db bash-completion systemd (in the root, $((SECONDS - start)) s)"
quiet apt-get update
quiet apt-get install -y --no-install-recommends man-db bash-completion systemd
# man-db's caches as they will be (its tag files), so only the package's own files can differ.
in_root mandb -q
snapshot >"$root/tmp/before"

echo "== deb test: apt-get install ./$(basename "$deb")"
cp "$deb" "$root/tmp/"
quiet apt-get install -y "/tmp/$(basename "$deb")"
in_root dpkg -L hmn >"$root/tmp/files"
for f in /usr/bin/hmn /usr/share/man/man1/hmn.1.gz /usr/share/bash-completion/completions/hmn \
  /usr/share/zsh/vendor-completions/_hmn /usr/share/fish/vendor_completions.d/hmn.fish \
  /usr/lib/systemd/system/hmn-serve.service /usr/share/doc/hmn/README.md /usr/share/doc/hmn/copyright; do
  grep -qx "$f" "$root/tmp/files" || fail "the package does not install $f"
done

echo "== deb test: hmn, hmn --version, man hmn"
out=$(in_root hmn 2>"$root/tmp/err") || fail "hmn exited $?: $(cat "$root/tmp/err")"
grep -q '^RAM: .* available / ' <<<"$out" || fail "hmn printed no RAM line: $out"
line=$(in_root hmn --version)
[ "$line" = "hmn $version ($commit)" ] || fail "hmn --version printed '$line', expected 'hmn $version ($commit)'"
# Width 100: man-db keeps formatted copies (cat pages) only of 80-column renderings.
page=$(in_root env MANPAGER=cat MANWIDTH=100 man hmn 2>"$root/tmp/err") || fail "man hmn failed: $(cat "$root/tmp/err")"
[ ! -s "$root/tmp/err" ] || fail "man hmn warned: $(cat "$root/tmp/err")"
grep -q '^NAME' <<<"$page" && grep -q 'hmn - RAM and GPU memory, measured' <<<"$page" &&
  grep -q 'HMN PS' <<<"$page" || fail "man hmn is not hmn's page: $(head -n 5 <<<"$page")"

echo "== deb test: bash completion of 'hmn p<TAB>'"
# bash-completion finds the file in its system folder by the command's name, as an interactive
# shell does on the first <TAB>.
words=$(in_root bash -c '
  source /usr/share/bash-completion/bash_completion
  __load_completion hmn || exit 3
  spec=$(complete -p hmn) || exit 4
  fn=${spec##*-F }; fn=${fn%% *}
  COMP_WORDS=(hmn p); COMP_CWORD=1; COMP_LINE="hmn p"; COMP_POINT=${#COMP_LINE}
  "$fn" hmn p hmn
  printf "%s\n" "${COMPREPLY[@]}"') || fail "bash completion did not load (exit $?)"
grep -qx ps <<<"$words" || fail "hmn p<TAB> does not offer ps: $words"
if grep -v '^p' <<<"$words" | grep -q .; then fail "hmn p<TAB> offers words not starting with p: $words"; fi
in_root grep -q '^#compdef hmn' /usr/share/zsh/vendor-completions/_hmn || fail "_hmn is no zsh completion"
in_root grep -q '^complete -c hmn' /usr/share/fish/vendor_completions.d/hmn.fish || fail "hmn.fish is no fish completion"

echo "== deb test: systemd-analyze verify hmn-serve.service; not enabled, not started, loopback"
unit=/usr/lib/systemd/system/hmn-serve.service
in_root systemd-analyze verify "$unit" >"$root/tmp/verify" 2>&1 || fail "systemd-analyze verify: $(cat "$root/tmp/verify")"
[ ! -s "$root/tmp/verify" ] || fail "systemd-analyze verify warned: $(cat "$root/tmp/verify")"
# The same check on a copy that names a missing binary must fail, or it checks nothing.
sed 's#^ExecStart=/usr/bin/hmn #ExecStart=/usr/bin/hmn-missing #' "$root$unit" >"$root/tmp/hmn-broken.service"
if in_root systemd-analyze verify /tmp/hmn-broken.service >/dev/null 2>&1; then
  fail "systemd-analyze verify passes a unit whose binary is missing: it checks nothing here"
fi
grep -q '^ExecStart=/usr/bin/hmn serve --listen 127\.0\.0\.1:9835 ' "$root$unit" || fail "the unit does not run /usr/bin/hmn on loopback: $(grep ExecStart "$root$unit")"
state=$(in_root systemctl is-enabled hmn-serve.service || true)
[ "$state" = disabled ] || fail "hmn-serve.service is '$state' after install, expected disabled"
# No running systemd in a chroot: the maintainer scripts must not start or enable it anyway.
if grep -Eq 'deb-systemd-invoke (start|restart) |systemctl (enable|start)' "$root/var/lib/dpkg/info/hmn.postinst"; then
  fail "hmn.postinst starts or enables the unit"
fi

echo "== deb test: systemctl enable hmn-serve, then apt-get remove --purge hmn"
in_root systemctl enable hmn-serve.service >/dev/null 2>&1
[ -L "$root/etc/systemd/system/multi-user.target.wants/hmn-serve.service" ] || fail "systemctl enable made no symlink"
quiet apt-get remove --purge -y hmn
snapshot >"$root/tmp/after"
if ! diff -u "$root/tmp/before" "$root/tmp/after" >"$root/tmp/diff"; then
  cat "$root/tmp/diff" >&2
  fail "the root after purging hmn differs from the root before installing it (above)"
fi
left=$(in_root find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp \) -prune -o -name '*hmn*' -print)
[ -z "$left" ] || fail "paths named hmn left after purge: $left"
if in_root dpkg -s hmn >/dev/null 2>&1; then fail "dpkg still knows hmn after purge"; fi

echo "== deb test passed: $(basename "$deb") ($(stat -c %s "$deb") bytes) installs, runs, purges clean in Debian $suite ($((SECONDS - start)) s)"
