#!/usr/bin/env bash
# dist.sh — the release artifacts, reproducibly, under dist/ (make dist):
#
#   agentd_V_linux_amd64.tar.gz   agentd, agentctl, agenthub, README.md, agentd.txt, agentctl.txt
#   agentd_V_linux_arm64.tar.gz   (same)
#   agentd_V_darwin_amd64.tar.gz  agentd, agentctl, README.md, help texts
#   agentd_V_darwin_arm64.tar.gz  (same)
#   agentd_V_windows_amd64.zip    agentd.exe, agentctl.exe, README.md, help texts
#   agentd_P_amd64.deb  agentd_P_arm64.deb  agentd-P-1.x86_64.rpm  agentd-P-1.aarch64.rpm
#   SHA256SUMS
#
# V is the version without a leading v (git describe), P the package version
# (V when it is a release tag, else 0.0.0~git<commit time>.<V>).
# agenthub is in the linux archives only: the hub is a server one runs on
# Linux; laptops get the daemon and the client.
#
# Reproducible: the same commit gives byte-identical files. CGO_ENABLED=0,
# -trimpath, -buildvcs=false, the Makefile's -X ldflags (version, commit and
# commit date from git), every timestamp = SOURCE_DATE_EPOCH = the commit time,
# tar --sort=name --owner=0 --group=0 --numeric-owner, gzip -n, zip -X with
# fixed times, nfpm with SOURCE_DATE_EPOCH and a fixed rpm build host.
#
# Environment: VERSION COMMIT DATE LDFLAGS (the Makefile passes its own),
# SOURCE_DATE_EPOCH, DIST_TARGETS (default: all five; e.g.
# DIST_TARGETS='linux/amd64 linux/arm64'), NFPM (default: nfpm on PATH).
# A target that fails to build fails the whole run, after the others were
# tried, and no SHA256SUMS is written.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
NFPM=${NFPM:-nfpm}
MODULE=github.com/devdepot-ai/agentd
DIST_TARGETS=${DIST_TARGETS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64}

die() { echo "dist: $*" >&2; exit 1; }

VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || true)}
DATE=${DATE:-$(git log -1 --format=%cI 2>/dev/null || true)}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || true)}
[[ $SOURCE_DATE_EPOCH =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH is not set and there is no git commit to take it from"
export SOURCE_DATE_EPOCH
LDFLAGS=${LDFLAGS:-"-X $MODULE/internal/version.Version=$VERSION -X $MODULE/internal/version.Commit=$COMMIT -X $MODULE/internal/version.Date=$DATE"}

V=${VERSION#v}
[[ $V =~ ^[A-Za-z0-9._+~-]+$ ]] || die "version $VERSION has characters that do not belong in a file name"
# Package version, ordered the way dpkg and rpm compare: a tag v1.2.3 is
# 1.2.3; a pre-release tag v1.2.3-rc.1 is 1.2.3~rc.1 (before 1.2.3); n commits
# after a tag (v1.2.3-4-gabc1234[-dirty]) is 1.2.3+git4.gabc1234[.dirty]
# (after 1.2.3); no tag at all is 0.0.0~git<commit time>.<commit>[.dirty].
num='[0-9]+(\.[0-9]+)*'
base=${V%-dirty} dirty=${V#"$base"}
if [[ $base =~ ^($num)(-([0-9A-Za-z.]+))?-([0-9]+)-(g[0-9a-f]+)$ ]]; then
	m=("${BASH_REMATCH[@]}")
	PKG_VERSION=${m[1]}${m[4]:+~${m[4]}}+git${m[5]}.${m[6]}${dirty:+.dirty}
elif [[ $base =~ ^($num)(-([0-9A-Za-z.]+))?$ ]]; then
	m=("${BASH_REMATCH[@]}")
	PKG_VERSION=${m[1]}${m[4]:+~${m[4]}}${dirty:++dirty}
else
	PKG_VERSION="0.0.0~git$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S).${base}${dirty:+.dirty}"
fi
case "$VERSION" in *-dirty) echo "dist: WARNING: the working tree has uncommitted changes ($VERSION): the artifacts do not match commit $COMMIT" >&2 ;; esac

for t in $DIST_TARGETS; do
	case "$t" in linux/amd64 | linux/arm64 | darwin/amd64 | darwin/arm64 | windows/amd64) ;; *) die "unknown target $t" ;; esac
done
for tool in tar gzip zip; do command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install $tool)"; done
if [[ " $DIST_TARGETS " == *" linux/"* ]]; then
	command -v "$NFPM" >/dev/null || die "nfpm is not installed: make dist-tools"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/agentd-dist.XXXXXX")
trap 'rm -rf "$work"' EXIT
rm -rf dist
mkdir -p dist

# No cgo, no VCS stamping, no paths of this machine, no symbol tables.
build() { # GOOS GOARCH OUTDIR PKG...
	local goos=$1 goarch=$2 out=$3
	shift 3
	mkdir -p "$out"
	CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch GOFLAGS=-mod=mod \
		"$GO" build -trimpath -buildvcs=false -tags "${BUILD_TAGS:-grpcnotrace}" -ldflags "$LDFLAGS -s -w" -o "$out/" "$@"
}

# The help texts, from binaries for this machine (flag defaults read from the
# environment, like --hub from $AGENTD_HUB, are kept out by env -i).
echo "=== help texts"
build "$("$GO" env GOHOSTOS)" "$("$GO" env GOHOSTARCH)" "$work/host" ./cmd/agentd ./cmd/agentctl
helptree() { # BIN [SUBCOMMAND...]: help of the command, then of each subcommand, recursively
	local bin=$1
	shift
	local out
	out=$(env -i HOME=/nonexistent PATH=/usr/bin:/bin LANG=C TERM=dumb "$bin" "$@" --help) || die "$(basename "$bin") $* --help failed"
	printf '%s\n' "================================================================================"
	printf '%s\n\n%s\n\n' "$(basename "$bin")${*:+ $*}" "$out"
	local sub
	# Subcommands: the "  name   description" lines of the sections after
	# Usage: ("Available Commands:" or the command groups, like "Files:").
	for sub in $(awk '
		/^Usage:/ { after = 1; next }
		!after { next }
		/^[^ \t].*:$/ { skip = ($0 ~ /^(Usage|Aliases|Examples|Flags|Global Flags|Additional help topics):$/); next }
		!skip && /^  [a-z][a-z0-9-]*  +[^ ]/ { print $1 }' <<<"$out"); do
		case "$sub" in help | completion) continue ;; esac
		helptree "$bin" "$@" "$sub"
	done
}
mkdir -p "$work/doc"
for p in agentd agentctl; do
	{
		echo "$p $V — command reference (the --help of every command)"
		echo
		helptree "$work/host/$p"
	} >"$work/doc/$p.txt"
done

failed=()
for t in $DIST_TARGETS; do
	goos=${t%/*} goarch=${t#*/}
	name=agentd_${V}_${goos}_${goarch}
	echo "=== $t"
	pkgs=(./cmd/agentd ./cmd/agentctl)
	[[ $goos == linux ]] && pkgs+=(./cmd/agenthub)
	stage=$work/stage/$name
	if ! build "$goos" "$goarch" "$stage" "${pkgs[@]}"; then
		echo "dist: FAILED to build $t" >&2
		failed+=("$t")
		continue
	fi
	cp README.md "$work/doc/agentd.txt" "$work/doc/agentctl.txt" "$stage/"
	[[ -f LICENSE ]] && cp LICENSE "$stage/"
	find "$stage" -type d -exec chmod 0755 {} +
	find "$stage" -type f -exec chmod 0644 {} +
	for b in agentd agentctl agenthub; do
		for f in "$stage/$b" "$stage/$b.exe"; do [[ -f $f ]] && chmod 0755 "$f"; done
	done
	find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	if [[ $goos == windows ]]; then
		# zip stores local time: TZ=UTC; -X leaves out uid/gid and extra times;
		# names in sorted order.
		(cd "$work/stage" && find "$name" -type f | LC_ALL=C sort | TZ=UTC zip -q -X -D -9 "$OLDPWD/dist/$name.zip" -@)
	else
		tar -C "$work/stage" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
			--format=gnu -cf - "$name" | gzip -n -9 >"dist/$name.tar.gz"
	fi
	if [[ $goos == linux ]]; then
		for fmt in deb rpm; do
			case "$fmt/$goarch" in
			deb/*) file=agentd_${PKG_VERSION}_${goarch}.deb ;;
			rpm/amd64) file=agentd-${PKG_VERSION}-1.x86_64.rpm ;;
			rpm/arm64) file=agentd-${PKG_VERSION}-1.aarch64.rpm ;;
			esac
			ARCH=$goarch PKG_VERSION=$PKG_VERSION BIN_DIR=$stage DOC_DIR=$work/doc \
				"$NFPM" package --config packaging/nfpm.yaml --packager "$fmt" --target "dist/$file" >/dev/null ||
				die "nfpm $fmt $goarch failed"
			echo "dist/$file"
		done
	fi
	ls dist/"$name".*
done

if ((${#failed[@]})); then
	echo >&2
	echo "dist: FAILED: ${failed[*]} did not build (errors above); no SHA256SUMS written." >&2
	echo "dist: to build the others alone: DIST_TARGETS='$(printf '%s\n' $DIST_TARGETS | grep -vxF -f <(printf '%s\n' "${failed[@]}") | tr '\n' ' ' | sed 's/ $//')' make dist" >&2
	exit 1
fi

(cd dist && LC_ALL=C ls | grep -vx SHA256SUMS | xargs sha256sum >SHA256SUMS)
echo "=== dist/SHA256SUMS (version $VERSION, package version $PKG_VERSION, SOURCE_DATE_EPOCH $SOURCE_DATE_EPOCH)"
cat dist/SHA256SUMS
