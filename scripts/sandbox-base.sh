#!/usr/bin/env bash
# sandbox-base.sh — builds the sandbox images locally, with no registry
# (make sandbox-base):
#
#   ghcr.io/devdepot-ai/sandbox-base:1  the base every sandbox image is built
#       FROM: a Debian bookworm rootfs (debootstrap --variant=minbase) with the
#       tools an agent expects (bash, git, curl, ripgrep, python3 + pip + venv,
#       node + npm, jq, …), a user agent (1000:1000, HOME /home/agent),
#       /workspace owned by 1000, pip that installs into HOME for uid 1000,
#       USER 1000:1000, WORKDIR /workspace, and the base marker labels
#       (internal/sandbox/driver.go: LabelBaseMarker, LabelBaseBuild).
#   agentd-test/minimal:1  a test image that stands in for Alpine-style images:
#       only a static busybox (Debian's busybox-static), no bash, no glibc, no
#       python; the same marker labels. Tests use it to show that the static
#       agentd runs on an image that has none of Debian's userland.
#   agentd-test/debian-slim:1  a test image that stands in for Debian slim
#       (docker.io/library/debian:*-slim, which no registry here serves): the
#       same minbase rootfs with ca-certificates and curl, USER root, no
#       marker. The runner-image tests build FROM it: small, so each build
#       step commits fast, and it has what the tool base installs.
#
# The build id (label ai.devdepot.sandbox-base.build) is the first 12 hex of
# sha256(this script + the package list): an image whose label equals it is
# up to date and is left alone, so running this again does nothing; a changed
# script gives a new id and a rebuild. Progress goes to stderr.
#
# Usage: scripts/sandbox-base.sh [--base] [--minimal] [--slim] [--force]
#   --base, --minimal, --slim  only the images named (default: all three)
#   --force     rebuild even when the image carries the current build id
#
# Needs: docker; for the base image root, debootstrap and chroot (apt-get
# install debootstrap); for the minimal image busybox-static (installed with
# apt-get when missing). .debs are cached under .cache/debootstrap.
# Environment: DEBIAN_MIRROR (default: the mirror of this machine's apt
# sources, else deb.debian.org), DEBIAN_SECURITY_MIRROR (likewise for
# bookworm-security), SANDBOX_BASE_IMAGE, SANDBOX_MINIMAL_IMAGE,
# SANDBOX_SLIM_IMAGE (the tags).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
script=$root/scripts/sandbox-base.sh

base_image=${SANDBOX_BASE_IMAGE:-ghcr.io/devdepot-ai/sandbox-base:1}
minimal_image=${SANDBOX_MINIMAL_IMAGE:-agentd-test/minimal:1}
slim_image=${SANDBOX_SLIM_IMAGE:-agentd-test/debian-slim:1}
# internal/sandbox/driver.go: LabelBaseMarker, LabelBaseBuild, BaseContract.
label_marker=ai.devdepot.sandbox-base.contract
label_build=ai.devdepot.sandbox-base.build
contract=1

# What the base image adds to debootstrap's minbase. python-is-python3: agents
# type "python".
packages=(bash coreutils git curl ca-certificates ripgrep python3 python3-pip python3-venv
	python-is-python3 nodejs npm procps less file jq xz-utils)
# What the slim image adds to minbase: what the runner images' tool base needs.
slim_packages=(ca-certificates curl)

log() { echo "sandbox-base: $*" >&2; }
die() {
	echo "sandbox-base: FAILED: $*" >&2
	exit 1
}

want_base=0 want_minimal=0 want_slim=0 force=0
for arg in "$@"; do
	case $arg in
	--base) want_base=1 ;;
	--minimal) want_minimal=1 ;;
	--slim) want_slim=1 ;;
	--force) force=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown argument $arg (usage: $0 [--base] [--minimal] [--slim] [--force])" ;;
	esac
done
if [[ $want_base == 0 && $want_minimal == 0 && $want_slim == 0 ]]; then
	want_base=1 want_minimal=1 want_slim=1
fi

build_id=$( { cat "$script"; printf '%s\n' "${packages[@]}" "${slim_packages[@]}"; } | sha256sum | cut -c1-12)

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the Docker engine is not reachable (docker info failed)"

# up_to_date IMAGE: the image exists and carries this build id.
up_to_date() {
	[[ $force == 0 ]] || return 1
	local got
	got=$(docker image inspect -f "{{index .Config.Labels \"$label_build\"}}" "$1" 2>/dev/null) || return 1
	[[ $got == "$build_id" ]]
}

# import_rootfs ROOTFS IMAGE SHELL [slim]: docker import of the rootfs with the
# image config (slim: root, no HOME, WORKDIR or marker, as Debian's slim
# images); removes the image the tag pointed at before, when nothing else
# uses it.
import_rootfs() {
	local rootfs=$1 image=$2 shell=$3 kind=${4:-} old
	local config=(
		-c 'ENV HOME=/home/agent'
		-c 'ENV PATH=/home/agent/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
		-c 'USER 1000:1000'
		-c 'WORKDIR /workspace'
		-c "LABEL $label_marker=$contract"
	)
	if [[ $kind == slim ]]; then
		config=(-c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin')
	fi
	old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
	log "docker import $image"
	tar -C "$rootfs" --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . |
		docker import "${config[@]}" \
			-c "CMD [\"$shell\"]" \
			-c "LABEL $label_build=$build_id" \
			-m "scripts/sandbox-base.sh build $build_id" \
			- "$image" >/dev/null || die "docker import $image failed"
	local new
	new=$(docker image inspect -f '{{.Id}}' "$image")
	if [[ -n $old && $old != "$new" ]] && docker rmi "$old" >/dev/null 2>&1; then
		log "removed the previous build ${old:7:12}"
	fi
	local size
	size=$(docker image inspect -f '{{.Size}}' "$image")
	log "$image: build $build_id, $((size / 1024 / 1024)) MiB ($size bytes)"
}

# mirror [SUITE]: the Debian mirror this machine's apt uses for SUITE (as in
# scripts/test-packages.sh), else the public one.
mirror() {
	local suite=${1:-bookworm} m
	m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v s="$suite" '
		/^URIs:/ { u = $2 }
		/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) { print u; exit } }')
	[[ -z $m ]] && m=$(grep -hE "^deb\s+(\[[^]]*\]\s+)?https?://\S+\s+$suite\s" /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		sed -E 's/^deb\s+(\[[^]]*\]\s+)?//' | awk '{print $1; exit}')
	echo "$m"
}

work=
proc_mounted=
cleanup() {
	if [[ -n $proc_mounted ]]; then umount "$proc_mounted" 2>/dev/null || umount -l "$proc_mounted" 2>/dev/null || true; fi
	# --one-file-system: never descend into anything still mounted in the rootfs.
	if [[ -n $work ]]; then rm -rf --one-file-system "$work"; fi
}
trap cleanup EXIT
workdir() {
	[[ -n $work ]] || work=$(mktemp -d "${TMPDIR:-/tmp}/agentd-sandbox-base.XXXXXX")
}

# prepare_minbase: a bookworm minbase rootfs in $work/minbase with apt set up
# for the chroot (no daemons started, no docs or man pages unpacked — the
# excludes stay in the images, as in slim images: later installs skip them
# too — the .debs of earlier builds reused), made once per run.
prepare_minbase() {
	[[ $(id -u) == 0 ]] || die "building the Debian images needs root (debootstrap, chroot); run as root or with sudo"
	command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
	command -v chroot >/dev/null || die "chroot is not installed (coreutils)"
	workdir
	local rootfs=$work/minbase
	[[ -d $rootfs ]] && return
	local m sm cache=$root/.cache/debootstrap debs=$root/.cache/debootstrap/apt
	m=${DEBIAN_MIRROR:-$(mirror bookworm)}
	m=${m:-http://deb.debian.org/debian}
	sm=${DEBIAN_SECURITY_MIRROR:-$(mirror bookworm-security)}
	sm=${sm:-http://deb.debian.org/debian-security}
	mkdir -p "$cache" "$debs"

	log "debootstrap --variant=minbase bookworm from $m (cache: .cache/debootstrap)"
	debootstrap --variant=minbase --cache-dir="$cache" bookworm "$rootfs" "$m" >"$work/debootstrap.log" 2>&1 ||
		die "debootstrap failed: $(tail -20 "$work/debootstrap.log")"
	printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
	chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
	cat >"$rootfs/etc/dpkg/dpkg.cfg.d/sandbox-base-excludes" <<'EOF'
# sandbox-base: no documentation or message translations in the image
# (copyright files are kept).
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/locale/*/LC_MESSAGES/*.mo
EOF
	cat >"$rootfs/etc/apt/apt.conf.d/90sandbox-base" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Retries "3";
EOF
	cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $m bookworm main
deb $m bookworm-updates main
deb $sm bookworm-security main
EOF
	link_debs "$debs" "$rootfs/var/cache/apt/archives"
}

# link_debs FROM TO: the .debs in FROM that TO lacks, hard-linked (copied
# across file systems).
link_debs() {
	local f t
	for f in "$1"/*.deb; do
		[[ -e $f ]] || continue
		t=$2/${f##*/}
		[[ -e $t ]] || ln "$f" "$t" 2>/dev/null || cp "$f" "$t"
	done
}

# apt_in ROOTFS PACKAGE...: apt-get update, upgrade (security updates) and
# install in the chroot; the log goes to $work/apt.log.
apt_in() {
	local rootfs=$1
	shift
	mount -t proc proc "$rootfs/proc"
	proc_mounted=$rootfs/proc
	log "apt-get install $* (and security updates)"
	chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 \
		bash -euo pipefail -c 'apt-get update -q && apt-get -y -q upgrade && apt-get -y -q install "$@"' _ "$@" \
		>"$work/apt.log" 2>&1 || die "apt-get in the chroot failed: $(tail -30 "$work/apt.log")"
	umount "$rootfs/proc"
	proc_mounted=
}

# clean_rootfs ROOTFS: Debian's own apt sources (what a FROM-built image
# gets), no apt lists, caches, docs or logs, no host details.
clean_rootfs() {
	local rootfs=$1
	cat >"$rootfs/etc/apt/sources.list" <<'EOF'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
	log "cleaning apt lists and caches"
	rm -f "$rootfs/usr/sbin/policy-rc.d" "$rootfs/etc/apt/apt.conf.d/90sandbox-base"
	rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
		"$rootfs"/var/lib/dpkg/*-old "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/var/tmp/* "$rootfs"/root/.cache \
		"$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
	find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
	find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
	# Host details debootstrap copied in (the engine mounts its own).
	: >"$rootfs/etc/resolv.conf"
	echo localhost >"$rootfs/etc/hostname"
	chmod 1777 "$rootfs/tmp" "$rootfs/var/tmp"
}

build_slim() {
	prepare_minbase
	local rootfs=$work/slim
	cp -a "$work/minbase" "$rootfs"
	apt_in "$rootfs" "${slim_packages[@]}"
	clean_rootfs "$rootfs"
	import_rootfs "$rootfs" "$slim_image" /bin/bash slim
	rm -rf --one-file-system "$rootfs"
}

build_base() {
	prepare_minbase
	local rootfs=$work/base debs=$root/.cache/debootstrap/apt
	cp -a "$work/minbase" "$rootfs"
	apt_in "$rootfs" "${packages[@]}"
	log "$(grep -cE '^(Setting up|Unpacking) ' "$work/apt.log" | awk '{print $1}') unpack/setup steps; $(find "$rootfs/var/cache/apt/archives" -maxdepth 1 -name '*.deb' | wc -l) .debs (cached in .cache/debootstrap/apt)"
	# The cache keeps exactly this build's .debs (older versions go).
	find "$debs" -maxdepth 1 -name '*.deb' -delete
	link_debs "$rootfs/var/cache/apt/archives" "$debs"

	log "configuring: user agent 1000:1000, /workspace, pip"
	chroot "$rootfs" groupadd --gid 1000 agent
	chroot "$rootfs" useradd --uid 1000 --gid 1000 --home-dir /home/agent --create-home --shell /bin/bash agent
	install -d -m 0755 -o 1000 -g 1000 "$rootfs/workspace" "$rootfs/home/agent"
	# bookworm's Python is externally managed (PEP 668): a plain pip install
	# refuses. With break-system-packages pip installs anyway: as uid 1000,
	# whose system site-packages are not writable, into ~/.local ("Defaulting
	# to user installation"); as root in a Dockerfile FROM this image, into
	# /usr/local for every user; in a venv, into the venv. Not "user = true":
	# it breaks pip in every venv and sends root's installs to /root/.local,
	# where uid 1000 does not see them.
	cat >"$rootfs/etc/pip.conf" <<'EOF'
[global]
break-system-packages = true
EOF
	clean_rootfs "$rootfs"
	import_rootfs "$rootfs" "$base_image" /bin/bash
	rm -rf --one-file-system "$rootfs"
}

build_minimal() {
	local bb=/bin/busybox
	if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'; then
		[[ $(id -u) == 0 ]] || die "busybox-static is not installed (apt-get install busybox-static)"
		log "apt-get install busybox-static"
		{ apt-get install -y -q busybox-static || { apt-get update -q && apt-get install -y -q busybox-static; }; } >&2 ||
			die "apt-get install busybox-static failed"
	fi
	[[ -x $bb ]] || die "$bb is missing although busybox-static is installed"
	[[ $(LC_ALL=C ldd "$bb" 2>&1) == *'not a dynamic executable'* ]] || die "$bb is dynamically linked (the busybox package, not busybox-static?)"
	workdir
	local rootfs=$work/minimal applet n=0
	log "minimal rootfs: busybox $("$bb" | head -1 | awk '{print $2}') from busybox-static, no bash, no glibc"
	mkdir -p "$rootfs"/{bin,sbin,usr/bin,usr/sbin,etc,root,proc,sys,dev,tmp,workspace,home/agent}
	cp "$bb" "$rootfs/bin/busybox"
	chmod 0755 "$rootfs/bin/busybox"
	while read -r applet; do # usr/bin/wget, bin/sh, …
		[[ $applet == */* && $applet != bin/busybox && ${applet##*/} != bash ]] || continue
		[[ -e $rootfs/$applet ]] && continue
		ln -s /bin/busybox "$rootfs/$applet"
		n=$((n + 1))
	done < <("$bb" --list-full)
	[[ -L $rootfs/bin/sh ]] || die "busybox --list-full has no bin/sh"
	cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
agent:x:1000:1000:agent:/home/agent:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
	cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
agent:x:1000:
nogroup:x:65534:
EOF
	chmod 0700 "$rootfs/root"
	chmod 1777 "$rootfs/tmp"
	chown 1000:1000 "$rootfs/workspace" "$rootfs/home/agent"
	chmod 0755 "$rootfs/workspace" "$rootfs/home/agent"
	log "$n applet links"
	import_rootfs "$rootfs" "$minimal_image" /bin/sh
	rm -rf --one-file-system "$rootfs"
}

start=$SECONDS
# build_if_stale WANT IMAGE FUNC: FUNC builds IMAGE unless it is up to date.
build_if_stale() {
	[[ $1 == 1 ]] || return 0
	if up_to_date "$2"; then
		log "$2 is up to date (build $build_id): nothing to do (--force rebuilds)"
	else
		log "building $2 (build $build_id)"
		"$3"
	fi
}
build_if_stale "$want_slim" "$slim_image" build_slim
build_if_stale "$want_base" "$base_image" build_base
build_if_stale "$want_minimal" "$minimal_image" build_minimal
for pair in "$want_base:$base_image" "$want_minimal:$minimal_image" "$want_slim:$slim_image"; do
	[[ ${pair%%:*} == 1 ]] || continue
	image=${pair#*:}
	size=$(docker image inspect -f '{{.Size}}' "$image")
	log "$image: $((size / 1024 / 1024)) MiB"
done
log "done in $((SECONDS - start)) s"
