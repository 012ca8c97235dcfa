#!/bin/sh
# install.sh — download, verify and install agentd and agentctl.
#
#   curl -fsSL https://EXAMPLE/agentd/install.sh | sh -s -- https://EXAMPLE/agentd/releases/latest
#   sh install.sh [--version V] [--prefix DIR | --bin-dir DIR] [BASE_URL]
#
# BASE_URL (or $AGENTD_BASE_URL) is the directory that holds a release: its
# SHA256SUMS and the agentd_<version>_<os>_<arch>.tar.gz archives that
# 'make dist' builds. With --version V (or $AGENTD_VERSION) the release is
# fetched from BASE_URL/V/ instead, and must be version V.
#
# The archive is checked against SHA256SUMS before anything is installed; a
# mismatch stops the install. Installs into ~/.local/bin (or --bin-dir DIR,
# or --prefix P for P/bin); as root into /usr/local/bin. Needs curl or wget,
# sha256sum or shasum, tar, gzip. Starts nothing: it prints the next steps.
set -eu

say() { printf '%s\n' "$*" >&2; }
die() {
	say "install.sh: error: $*"
	exit 1
}
usage() {
	sed -n '2,16s/^# \{0,1\}//p' "$0" 2>/dev/null || true
	exit "${1:-0}"
}

base=${AGENTD_BASE_URL:-}
version=${AGENTD_VERSION:-}
bindir=
while [ $# -gt 0 ]; do
	case "$1" in
	-h | --help) usage 0 ;;
	--version) [ $# -ge 2 ] || die "--version needs a value"; version=$2; shift 2 ;;
	--version=*) version=${1#*=}; shift ;;
	--prefix) [ $# -ge 2 ] || die "--prefix needs a value"; bindir=$2/bin; shift 2 ;;
	--prefix=*) bindir=${1#*=}/bin; shift ;;
	--bin-dir) [ $# -ge 2 ] || die "--bin-dir needs a value"; bindir=$2; shift 2 ;;
	--bin-dir=*) bindir=${1#*=}; shift ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) [ -z "${base_arg:-}" ] || die "more than one base URL: $base_arg $1"; base_arg=$1; shift ;;
	esac
done
base=${base_arg:-$base}
[ -n "$base" ] || die "no base URL: pass it as an argument or set AGENTD_BASE_URL (the directory holding SHA256SUMS and the archives)"
base=${base%/}
if [ -n "$version" ]; then base=$base/$version; fi

# What to fetch.
os=$(uname -s)
case "$os" in
Linux) os=linux ;;
Darwin) os=darwin ;;
MINGW* | MSYS* | CYGWIN* | Windows_NT) die "Windows: download agentd_<version>_windows_amd64.zip from $base and unpack it; this script is for Linux and macOS" ;;
*) die "unsupported operating system $os: agentd is built for Linux and macOS (and Windows, as a zip)" ;;
esac
arch=$(uname -m)
case "$arch" in
x86_64 | amd64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) die "unsupported architecture $arch on $os: agentd is built for amd64 (x86_64) and arm64 (aarch64)" ;;
esac

if [ -z "$bindir" ]; then
	if [ "$(id -u)" = 0 ]; then
		bindir=/usr/local/bin
	else
		[ -n "${HOME:-}" ] || die "HOME is not set: pass --bin-dir DIR"
		bindir=$HOME/.local/bin
	fi
fi

# Tools.
if command -v curl >/dev/null 2>&1; then
	fetch() { curl -fsSL --proto '=https,http' --retry 2 -o "$2" "$1" 2>"$tmp/fetch.err"; }
elif command -v wget >/dev/null 2>&1; then
	fetch() { wget -q -O "$2" "$1" 2>"$tmp/fetch.err"; }
else
	die "neither curl nor wget is installed: install one of them (e.g. apt-get install curl)"
fi
if command -v sha256sum >/dev/null 2>&1; then
	sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
	sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
	die "neither sha256sum nor shasum is installed: cannot verify the download"
fi
for t in tar gzip; do command -v "$t" >/dev/null 2>&1 || die "$t is not installed"; done

tmp=$(mktemp -d 2>/dev/null || mktemp -d -t agentd-install) || die "cannot create a temporary directory"
trap 'rm -rf "$tmp"' EXIT INT TERM

get() { # URL FILE WHAT
	if ! fetch "$1" "$2"; then
		err=$(cat "$tmp/fetch.err" 2>/dev/null)
		case "$err" in
		*404* | *"Not Found"*) die "$3 not found: $1 (HTTP 404). Check the base URL${version:+ and the version $version}." ;;
		esac
		die "could not download $3 from $1${err:+: $err}"
	fi
}

# The checksums, then the one archive for this machine listed in them.
get "$base/SHA256SUMS" "$tmp/SHA256SUMS" "the checksum file SHA256SUMS"
pattern="agentd_*_${os}_${arch}.tar.gz"
archive=
while read -r sum name; do
	name=${name#\*}
	# shellcheck disable=SC2254 # $pattern is a glob on purpose
	case "$name" in $pattern) [ -z "$archive" ] || die "SHA256SUMS at $base lists more than one archive for $os/$arch ($archive, $name)"; archive=$name want=$sum ;; esac
done <"$tmp/SHA256SUMS"
[ -n "$archive" ] || die "no agentd archive for $os/$arch in $base/SHA256SUMS"
if [ -n "$version" ] && [ "$archive" != "agentd_${version#v}_${os}_${arch}.tar.gz" ]; then
	die "$base holds $archive, not version $version"
fi
get "$base/$archive" "$tmp/$archive" "$archive"

got=$(sha256 "$tmp/$archive")
if [ "$got" != "$want" ]; then
	say "install.sh: error: CHECKSUM MISMATCH for $archive: refusing to install."
	say "  expected (SHA256SUMS): $want"
	say "  downloaded file:       $got"
	say "  The download is corrupt or was tampered with. Nothing was installed."
	exit 1
fi

dir=${archive%.tar.gz}
(cd "$tmp" && gzip -dc "$archive" | tar -xf -) || die "could not unpack $archive"
for b in agentd agentctl; do
	[ -f "$tmp/$dir/$b" ] || die "$archive has no $dir/$b"
done
mkdir -p "$bindir" || die "cannot create $bindir (choose another with --bin-dir DIR)"
for b in agentd agentctl; do
	# Copy then rename: replaces a running binary without "text file busy".
	cp "$tmp/$dir/$b" "$bindir/.$b.new" && chmod 0755 "$bindir/.$b.new" && mv -f "$bindir/.$b.new" "$bindir/$b" ||
		die "cannot write $bindir/$b (choose another directory with --bin-dir DIR)"
done

say "Installed $("$bindir/agentd" version 2>/dev/null || echo "agentd ($archive)")"
say "  $bindir/agentd"
say "  $bindir/agentctl"
case ":${PATH:-}:" in
*":$bindir:"*) ;;
*) say "" && say "$bindir is not on your PATH: add it, e.g. to ~/.profile: export PATH=\"$bindir:\$PATH\"" ;;
esac
say ""
say "Next steps, as the user whose machine this is:"
say "  agentd pair --hub URL --code XXXX-XXXX   # code from your hub's admin"
say "  agentd install                           # run agentd as your per-user service"
