#!/usr/bin/env bash
# Release artifacts of hmn for this Linux machine's architecture, in target/dist/:
#   hmn-<version>-<arch>-linux.tar.gz   the binary, man page, completions, systemd unit, README,
#                                       licences, in one folder of that name
#   hmn_<version>-1_<debarch>.deb       the same installed where Debian looks (cargo-deb)
# Usage: scripts/release.sh [archive|deb|all]   (default: all)
#
# Builds `hmn` with the release profile (stripped, fat LTO), generates the man page and the
# completions from that binary into target/release/hmn-assets, and the packaged unit
# (deploy/hmn-serve.service with ExecStart /usr/bin/hmn) and the Debian copyright file (from
# LICENSE-MIT) into target/dist/debian: the paths crates/hmn/Cargo.toml's
# [package.metadata.deb] names (cargo-deb maps target/release/ to the real target dir). cargo-deb is
# installed with `cargo install --locked` at the pinned version below when it is missing or
# another version. File times are the commit's (SOURCE_DATE_EPOCH), so the same commit gives
# the same archive. docs/packaging.md.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0

what=${1:-all}
case $what in
archive | deb | all) ;;
*)
  echo "usage: scripts/release.sh [archive|deb|all]" >&2
  exit 2
  ;;
esac

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
arch=$(uname -m)
dist=target/dist
bin=${CARGO_TARGET_DIR:-target}/release/hmn
assets=${CARGO_TARGET_DIR:-target}/release/hmn-assets
debian=$dist/debian
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

echo "== release: cargo build --release -p hmn"
cargo build --release --locked -p hmn
ls -l "$bin"
line=$("$bin" --version)
case $line in
"hmn $version ("*")") ;;
*)
  echo "release: \`hmn --version\` printed '$line', expected 'hmn $version (COMMIT)'" >&2
  exit 1
  ;;
esac

echo "== release: generated files in $assets and $debian"
rm -rf "$assets" "$debian"
mkdir -p "$assets/completions" "$debian"
"$bin" man >"$assets/hmn.1"
gzip -9n <"$assets/hmn.1" >"$assets/hmn.1.gz"
"$bin" completions bash >"$assets/completions/hmn"
"$bin" completions zsh >"$assets/completions/_hmn"
"$bin" completions fish >"$assets/completions/hmn.fish"
# The package's binary is /usr/bin/hmn; the unit in deploy/ is for a hand install in /usr/local.
unit=$debian/hmn-serve.service
sed 's#^ExecStart=/usr/local/bin/hmn #ExecStart=/usr/bin/hmn #' deploy/hmn-serve.service >"$unit"
if [ "$(grep -c '^ExecStart=' "$unit")" != 1 ] || ! grep -q '^ExecStart=/usr/bin/hmn serve --listen 127\.0\.0\.1:' "$unit"; then
  echo "release: deploy/hmn-serve.service has no single 'ExecStart=/usr/local/bin/hmn serve --listen 127.0.0.1:…' line to point at /usr/bin/hmn" >&2
  exit 1
fi
# Debian's machine-readable copyright file: the MIT text (from LICENSE-MIT, without its title and
# copyright lines) in full, Apache-2.0 by reference to /usr/share/common-licenses.
{
  cat <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: hmn
Source: https://github.com/hypomnesis/hmn

Files: *
Copyright: $(sed -n 's/^Copyright (c) //p' LICENSE-MIT)
License: MIT or Apache-2.0

License: MIT
EOF
  sed -n '/^Permission is hereby granted/,$p' LICENSE-MIT | sed 's/^$/./; s/^/ /'
  cat <<'EOF'

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may not
 use this software except in compliance with the License.
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
 WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
 License for the specific language governing permissions and limitations
 under the License.
 .
 On Debian systems, the full text of the Apache License, Version 2.0 can be
 found in "/usr/share/common-licenses/Apache-2.0".
EOF
} >"$debian/copyright"

if [ "$what" != deb ]; then
  name=hmn-$version-$arch-linux
  echo "== release: $dist/$name.tar.gz"
  rm -rf "${dist:?}/$name" "$dist/$name.tar.gz"
  mkdir -p "$dist/$name/completions/bash" "$dist/$name/completions/zsh" "$dist/$name/completions/fish"
  install -m 755 "$bin" "$dist/$name/hmn"
  install -m 644 "$assets/hmn.1" "$dist/$name/hmn.1"
  install -m 644 "$assets/completions/hmn" "$dist/$name/completions/bash/hmn"
  install -m 644 "$assets/completions/_hmn" "$dist/$name/completions/zsh/_hmn"
  install -m 644 "$assets/completions/hmn.fish" "$dist/$name/completions/fish/hmn.fish"
  install -m 644 deploy/hmn-serve.service README.md LICENSE-MIT LICENSE-APACHE "$dist/$name/"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
    -C "$dist" -cf - "$name" | gzip -9n >"$dist/$name.tar.gz"
  rm -rf "${dist:?}/$name"
  ls -l "$dist/$name.tar.gz"
fi

if [ "$what" != archive ]; then
  if [ "$(cargo deb --version 2>/dev/null)" != "cargo-deb $CARGO_DEB_VERSION" ]; then
    echo "== release: cargo install cargo-deb --version $CARGO_DEB_VERSION --locked"
    cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked
  fi
  echo "== release: cargo deb -p hmn --no-build"
  cargo deb -p hmn --no-build --output "$dist/"
  ls -l "$dist"/hmn_"$version"-*.deb
fi
