#!/usr/bin/env bash
# A free-threaded CPython (configure --disable-gil) for `make freethreaded`, installed
# under PREFIX (outside the clone, so every clone and CI run on the machine reuses it).
# Reuses PREFIX when it already holds a free-threaded build of VERSION; otherwise builds
# one from Debian trixie's CPython source package (the machines run Debian 12, whose
# archive has no 3.13): a deb-src entry for trixie with the machine's own mirror, `apt-get
# source`, configure, make, make install (about 15 minutes on a loaded 2-core machine).
# Needs root for the apt steps and the build dependencies CPython needs (libssl-dev,
# libffi-dev, zlib1g-dev, libbz2-dev, liblzma-dev, libsqlite3-dev, libreadline-dev,
# libncurses-dev), which it installs if one is missing.
# Usage: scripts/build_freethreaded.sh PREFIX [VERSION [DEBIAN_VERSION]]
set -euo pipefail
PREFIX="${1:?usage: build_freethreaded.sh PREFIX [VERSION [DEBIAN_VERSION]]}"
VERSION="${2:-3.13.5}"
DEBIAN_VERSION="${3:-3.13.5-2+deb13u5}"
MINOR="${VERSION%.*}"                      # 3.13
PY="$PREFIX/bin/python${MINOR}t"

is_wanted_build() {
    [ -x "$PY" ] && "$PY" -c "
import sys, sysconfig
wanted = tuple(int(part) for part in '$VERSION'.split('.'))
sys.exit(0 if sysconfig.get_config_var('Py_GIL_DISABLED') == 1
         and sys.version_info[:3] == wanted else 1)"
}

if is_wanted_build; then
    echo "free-threaded CPython $VERSION found in $PREFIX (reused)"
    exit 0
fi
if [ -e "$PREFIX" ] && [ -n "$(ls -A "$PREFIX" 2>/dev/null)" ]; then
    echo "$PREFIX exists but holds no free-threaded CPython $VERSION: remove it first" >&2
    exit 1
fi

echo "building free-threaded CPython $VERSION into $PREFIX (about 15 minutes)"
WORK="$(mktemp -d /tmp/kpurgatory-cpython.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

SOURCES=/etc/apt/sources.list.d/kpurgatory-trixie-src.sources
if ! grep -ls 'deb-src' /etc/apt/sources.list.d/* 2> /dev/null | xargs -r grep -ls trixie \
    | grep -q .; then
    uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    printf 'Types: deb-src\nURIs: %s\nSuites: trixie\nComponents: main\n' "$uri" > "$SOURCES"
fi
apt-get update -qq
missing=()
for package in build-essential libssl-dev libffi-dev zlib1g-dev libbz2-dev liblzma-dev \
    libsqlite3-dev libreadline-dev libncurses-dev; do
    dpkg -s "$package" > /dev/null 2>&1 || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get install -y -qq "${missing[@]}"
fi

cd "$WORK"
apt-get source --download-only "python${MINOR}=$DEBIAN_VERSION"
tar xf "python${MINOR}_${VERSION}.orig.tar.xz"
cd "Python-$VERSION"
./configure --disable-gil --prefix="$PREFIX" --with-ensurepip=install > "$WORK/configure.log"
make -j"$(nproc)" > "$WORK/make.log" 2>&1 || { tail -50 "$WORK/make.log" >&2; exit 1; }
make install > "$WORK/install.log" 2>&1 || { tail -50 "$WORK/install.log" >&2; exit 1; }
is_wanted_build || { echo "the build in $PREFIX is not a free-threaded $VERSION" >&2; exit 1; }
echo "free-threaded CPython $VERSION installed in $PREFIX"
