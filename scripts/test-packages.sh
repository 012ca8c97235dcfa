#!/usr/bin/env bash
# test-packages.sh — checks what 'make dist' built under dist/ (make package-test):
#
#   1. SHA256SUMS matches the files, and the archives hold what they should;
#   2. the .deb and .rpm list the expected paths (dpkg-deb -c, rpm -qlp), with
#      the units of packaging/systemd/ and binaries for the right arch;
#   3. packaging/install.sh against dist/ served by python3 -m http.server on
#      loopback: installs a working agentd (agentd version = the version),
#      with curl and with wget, and refuses a tampered SHA256SUMS or archive
#      and a missing release;
#   4. in a Debian bookworm container (image built once from a debootstrap
#      rootfs, no registry): dpkg -i, the files, agentd version and
#      agentd install --print as a non-root user, nothing started or enabled,
#      dpkg -r keeps user data.
#
# One PASS or FAIL line per check; exits 1 if any check failed.
# Needs: dpkg-deb, rpm, python3, curl, wget, docker, debootstrap (only when the
# image is not there yet). Environment: DEBIAN_MIRROR (default: the mirror of
# this machine's apt sources, else deb.debian.org), PACKAGE_TEST_IMAGE,
# PACKAGE_TEST_SKIP_DOCKER=1 (skips part 4, reported as SKIP).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

failures=0
pass() { echo "PASS $*"; }
fail() {
	echo "FAIL $*"
	failures=$((failures + 1))
}
check() { # DESCRIPTION COMMAND...: PASS when the command succeeds
	local d=$1
	shift
	if "$@"; then pass "$d"; else fail "$d"; fi
}
die() {
	echo "FAIL $*"
	echo "package-test: FAILED (could not run the checks)"
	exit 1
}

[[ -f dist/SHA256SUMS ]] || die "dist/SHA256SUMS is missing: run make dist first"
for tool in dpkg-deb rpm python3 curl tar gzip; do
	command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install ${tool/dpkg-deb/dpkg})"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/agentd-pkgtest.XXXXXX")
server_pid=
cleanup() {
	[[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

# The version, from the linux/amd64 archive's name: agentd_V_linux_amd64.tar.gz.
archive=$(cd dist && ls agentd_*_linux_amd64.tar.gz 2>/dev/null | head -1)
[[ -n $archive ]] || die "dist/ has no agentd_*_linux_amd64.tar.gz"
V=${archive#agentd_}
V=${V%_linux_amd64.tar.gz}
echo "=== checking dist/ (version $V)"

# 1. Checksums and archives.
check "SHA256SUMS matches every file in dist/" bash -c 'cd dist && sha256sum --quiet -c SHA256SUMS'
check "SHA256SUMS lists every file in dist/" bash -c \
	'diff <(cd dist && LC_ALL=C ls | grep -vx SHA256SUMS) <(awk "{print \$2}" dist/SHA256SUMS | sed "s/^\*//" | LC_ALL=C sort)'
tarlist() { tar -tzf "dist/$1" | LC_ALL=C sort | tr '\n' ' '; }
for f in dist/*.tar.gz; do
	f=${f#dist/}
	n=${f%.tar.gz}
	want="$n/ $n/README.md $n/agentctl $n/agentctl.txt $n/agentd $n/agentd.txt "
	[[ $f == *_linux_* ]] && want="$n/ $n/README.md $n/agentctl $n/agentctl.txt $n/agentd $n/agentd.txt $n/agenthub "
	got=$(tarlist "$f")
	if [[ $got == "$want" ]]; then pass "$f holds $n/{${want//$n\//}}"; else fail "$f holds [$got], want [$want]"; fi
	owners=$(tar -tvzf "dist/$f" | awk '{print $2}' | sort -u | tr '\n' ' ')
	check "$f: every entry owned by 0/0 ($owners)" test "$owners" = "0/0 "
done
for f in dist/*.zip; do
	[[ -e $f ]] || continue
	n=$(basename "$f" .zip)
	got=$(unzip -Z1 "$f" | LC_ALL=C sort | tr '\n' ' ')
	want="$n/README.md $n/agentctl.exe $n/agentctl.txt $n/agentd.exe $n/agentd.txt "
	if [[ $got == "$want" ]]; then pass "$(basename "$f") holds $n/{${want//$n\//}}"; else fail "$(basename "$f") holds [$got], want [$want]"; fi
done

# 2. Packages.
debarch() { case $1 in amd64) echo amd64 ;; arm64) echo arm64 ;; esac; }
rpmarch() { case $1 in amd64) echo x86_64 ;; arm64) echo aarch64 ;; esac; }
pkgpaths=(/usr/bin/agentd /usr/bin/agentctl /usr/lib/systemd/user/agentd.service /usr/lib/systemd/system/agentd@.service
	/usr/share/doc/agentd/config.example /usr/share/doc/agentd/agentd.txt /usr/share/doc/agentd/agentctl.txt
	/usr/share/doc/agentd/README.md /usr/share/doc/agentd/copyright)
gobuildinfo() { # FILE GOARCH: a static (no cgo) Go binary for linux/GOARCH, built with -trimpath
	local info
	info=$(go version -m "$1") || return 1
	grep -q "build[[:space:]]GOARCH=$2\$" <<<"$info" && grep -q "build[[:space:]]GOOS=linux\$" <<<"$info" &&
		grep -q "build[[:space:]]CGO_ENABLED=0\$" <<<"$info" && grep -q "build[[:space:]]-trimpath=true\$" <<<"$info"
}
for goarch in amd64 arm64; do
	deb=$(ls dist/agentd_*_"$(debarch $goarch)".deb 2>/dev/null | head -1)
	rpmf=$(ls dist/agentd-*."$(rpmarch $goarch)".rpm 2>/dev/null | head -1)
	if [[ -z $deb || -z $rpmf ]]; then
		fail "dist/ has a .deb and an .rpm for linux/$goarch (deb: ${deb:-none}, rpm: ${rpmf:-none})"
		continue
	fi
	b=$(basename "$deb")
	list=$(dpkg-deb -c "$deb") || fail "dpkg-deb -c $b"
	for p in "${pkgpaths[@]}"; do
		check "$b contains $p" grep -qE "[[:space:]]\.$p\$" <<<"$list"
	done
	check "$b: /usr/bin/agentd is -rwxr-xr-x root/root" grep -qE '^-rwxr-xr-x root/root .* \./usr/bin/agentd$' <<<"$list"
	check "$b: Architecture is $(debarch $goarch)" test "$(dpkg-deb -f "$deb" Architecture)" = "$(debarch $goarch)"
	check "$b: has no conffiles (agentd reads no file under /etc)" bash -c "! dpkg-deb -I '$deb' conffiles 2>/dev/null | grep -q ."
	check "$b: installs nothing under /etc" bash -c '! grep -qE "[[:space:]]\./etc/" <<<"$1"' _ "$list"
	x=$work/deb-$goarch
	mkdir -p "$x" && dpkg-deb -x "$deb" "$x"
	check "$b: the user unit is packaging/systemd/agentd.service" cmp -s "$x/usr/lib/systemd/user/agentd.service" packaging/systemd/agentd.service
	check "$b: the system unit is packaging/systemd/agentd@.service" cmp -s "$x/usr/lib/systemd/system/agentd@.service" packaging/systemd/agentd@.service
	check "$b: /usr/bin/agentd is a static linux/$goarch Go binary built with -trimpath" gobuildinfo "$x/usr/bin/agentd" "$goarch"
	check "$b: agentd.txt has the help of every agentd command" bash -c \
		"for c in serve pair run install uninstall start stop restart status unpair log version; do grep -qx \"agentd \$c\" '$x/usr/share/doc/agentd/agentd.txt' || { echo \"  no help for agentd \$c\"; exit 1; }; done"
	check "$b: agentctl.txt has the help of agentctl's commands and subcommands" bash -c \
		"for c in exec sh ps read edit grep 'snapshot create' validate machines 'admin pair-code create'; do grep -qx \"agentctl \$c\" '$x/usr/share/doc/agentd/agentctl.txt' || { echo \"  no help for agentctl \$c\"; exit 1; }; done"
	# The script's code (its messages, here-documents ending in MSG, left out)
	# starts, restarts or enables no service.
	check "$b: postinst prints the next steps and starts or enables nothing" bash -c \
		"s=\$(dpkg-deb -I '$deb' postinst) && grep -q 'agentd pair --hub URL --code XXXX-XXXX' <<<\"\$s\" && grep -q 'agentd install' <<<\"\$s\" &&
		code=\$(awk '/<<.?MSG.?\$/ { h = 1; next } h && /^MSG\$/ { h = 0; next } !h' <<<\"\$s\") &&
		! grep -qE 'systemctl[[:space:]]+(-[^[:space:]]+[[:space:]]+)*(start|enable|restart|try-restart|reload-or-restart)|deb-systemd-invoke|deb-systemd-helper[[:space:]]+enable|invoke-rc.d|start-stop-daemon|(^|[[:space:]])service[[:space:]]' <<<\"\$code\""

	r=$(basename "$rpmf")
	list=$(rpm -qlp "$rpmf" 2>/dev/null) || fail "rpm -qlp $r"
	for p in "${pkgpaths[@]}"; do
		check "$r contains $p" grep -qx "$p" <<<"$list"
	done
	check "$r: arch is $(rpmarch $goarch)" test "$(rpm -qp --qf '%{ARCH}' "$rpmf" 2>/dev/null)" = "$(rpmarch $goarch)"
	check "$r: has no %config files" bash -c "! rpm -qp --configfiles '$rpmf' 2>/dev/null | grep -q '^/'"
	check "$r: installs nothing under /etc" bash -c '! grep -q "^/etc/" <<<"$1"' _ "$list"
	check "$r: %post prints the next steps" bash -c "rpm -qp --scripts '$rpmf' 2>/dev/null | grep -q 'agentd pair --hub URL --code XXXX-XXXX'"
	check "$r: the payload's /usr/bin/agentd equals the .deb's" bash -c \
		"cd '$work' && mkdir -p rpm-$goarch && cd rpm-$goarch && rpm2archive - <'$root/$rpmf' | tar -xzf - ./usr/bin/agentd && cmp -s usr/bin/agentd '$x/usr/bin/agentd'"
done

# 3. install.sh against dist/ on a loopback HTTP server.
echo "=== install.sh"
srv=$work/srv
mkdir -p "$srv/tampered-sums" "$srv/tampered-archive"
ln -s "$root/dist" "$srv/latest"
ln -s "$root/dist" "$srv/$V"
cp dist/SHA256SUMS dist/"$archive" "$srv/tampered-sums/"
cp dist/SHA256SUMS dist/"$archive" "$srv/tampered-archive/"
# A SHA256SUMS whose line for the archive carries another file's checksum.
other=$(sha256sum dist/SHA256SUMS | cut -d' ' -f1)
sed -i "s/^[0-9a-f]\{64\}\(  $archive\)\$/$other\1/" "$srv/tampered-sums/SHA256SUMS"
printf 'X' >>"$srv/tampered-archive/$archive"
python3 -u -m http.server --bind 127.0.0.1 --directory "$srv" 0 >"$work/http.log" 2>&1 &
server_pid=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$work/http.log" | head -1)
	[[ -n $port ]] && break
	sleep 0.1
done
[[ -n $port ]] || die "python3 -m http.server did not start: $(cat "$work/http.log")"
base=http://127.0.0.1:$port
echo "serving $srv on $base"

host_goarch=$(case "$(uname -m)" in x86_64) echo amd64 ;; aarch64 | arm64) echo arm64 ;; esac)
installsh() { # OUT-FILE ARGS...: runs install.sh with the system sh (dash on Debian)
	local out=$1
	shift
	sh packaging/install.sh "$@" >"$out" 2>&1
}
if [[ $host_goarch != amd64 && $host_goarch != arm64 ]] || [[ $(uname -s) != Linux ]]; then
	fail "install.sh tests need a linux amd64 or arm64 machine (this is $(uname -s) $(uname -m))"
else
	bin=$work/i1/bin
	if installsh "$work/i1.log" --bin-dir "$bin" "$base/latest"; then
		out=$("$bin/agentd" version 2>&1)
		check "install.sh (curl) installed agentd; 'agentd version' prints $V: $out" grep -qE "^agentd v?$V " <<<"$out"
		check "install.sh installed agentctl" test -x "$bin/agentctl"
		check "install.sh printed the next steps" grep -q 'agentd pair --hub URL --code XXXX-XXXX' "$work/i1.log"
	else
		fail "install.sh --bin-dir $bin $base/latest: $(cat "$work/i1.log")"
	fi

	if AGENTD_BASE_URL=$base installsh "$work/i2.log" --version "$V" --prefix "$work/i2"; then
		check "install.sh --version $V --prefix P (base from AGENTD_BASE_URL) installs P/bin/agentd" bash -c "'$work/i2/bin/agentd' version | grep -qE '^agentd v?$V '"
	else
		fail "install.sh --version $V --prefix: $(cat "$work/i2.log")"
	fi

	# Not root, no --bin-dir: ~/.local/bin. As the account nobody when we are root.
	if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
		nhome=$work/nobody-home
		mkdir -p "$nhome" && chmod 0755 "$work" && chown 65534:65534 "$nhome"
		if setpriv --reuid 65534 --regid 65534 --clear-groups env -i PATH=/usr/bin:/bin HOME="$nhome" \
			sh "$root/packaging/install.sh" "$base/latest" >"$work/i4.log" 2>&1; then
			check "install.sh as a non-root user installs into ~/.local/bin" bash -c "'$nhome/.local/bin/agentd' version | grep -qE '^agentd v?$V '"
			check "install.sh as a non-root user says ~/.local/bin is not on PATH" grep -q "is not on your PATH" "$work/i4.log"
		else
			fail "install.sh as a non-root user: $(cat "$work/i4.log")"
		fi
	elif [[ $(id -u) != 0 ]]; then
		if HOME=$work/home installsh "$work/i4.log" "$base/latest"; then
			check "install.sh as a non-root user installs into ~/.local/bin" test -x "$work/home/.local/bin/agentd"
		else
			fail "install.sh as a non-root user: $(cat "$work/i4.log")"
		fi
	fi

	# wget only: a PATH of the real tools install.sh uses, without curl.
	nocurl=$work/nocurl
	mkdir -p "$nocurl"
	for t in sh uname id mktemp wget sha256sum cut cat tar gzip mkdir cp chmod mv rm sed; do
		p=$(command -v "$t") && ln -s "$p" "$nocurl/$t"
	done
	if PATH=$nocurl "$nocurl/sh" packaging/install.sh --bin-dir "$work/i3/bin" "$base/latest" >"$work/i3.log" 2>&1; then
		check "install.sh with wget (no curl on PATH) installs agentd" bash -c "'$work/i3/bin/agentd' version | grep -qE '^agentd v?$V '"
	else
		fail "install.sh with wget: $(cat "$work/i3.log")"
	fi

	if installsh "$work/t1.log" --bin-dir "$work/t1/bin" "$base/tampered-sums"; then
		fail "install.sh installed from a tampered SHA256SUMS"
	else
		check "install.sh refuses a tampered SHA256SUMS with a clear message" grep -q "CHECKSUM MISMATCH for $archive: refusing to install" "$work/t1.log"
		check "install.sh installed nothing after the mismatch" test ! -e "$work/t1/bin/agentd"
	fi
	if installsh "$work/t2.log" --bin-dir "$work/t2/bin" "$base/tampered-archive"; then
		fail "install.sh installed a tampered archive"
	else
		check "install.sh refuses a tampered archive" grep -q "CHECKSUM MISMATCH" "$work/t2.log"
	fi
	if installsh "$work/t3.log" --bin-dir "$work/t3/bin" --version v0.0.0-missing "$base"; then
		fail "install.sh installed a version that does not exist"
	else
		check "install.sh says 404 for a missing release: $(tail -1 "$work/t3.log")" grep -q "HTTP 404" "$work/t3.log"
	fi
	if installsh "$work/t4.log" --bin-dir "$work/t4/bin"; then
		fail "install.sh ran without a base URL"
	else
		check "install.sh without a base URL says how to give one" grep -q "AGENTD_BASE_URL" "$work/t4.log"
	fi
fi

# 4. The .deb in a Debian container.
echo "=== the .deb in a Debian bookworm container"
image=${PACKAGE_TEST_IMAGE:-agentd-test-debian:bookworm}
deb=$(ls dist/agentd_*_"$host_goarch".deb 2>/dev/null | head -1)
mirror() { # the Debian mirror this machine's apt uses
	if [[ -n ${DEBIAN_MIRROR:-} ]]; then echo "$DEBIAN_MIRROR"; return; fi
	local m
	m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/{u=$2} /^Suites:/ && / bookworm( |$)/ {print u; exit}')
	[[ -z $m ]] && m=$(grep -hE '^deb\s+(\[[^]]*\]\s+)?https?://\S+\s+bookworm\s' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		sed -E 's/^deb\s+(\[[^]]*\]\s+)?//' | awk '{print $1; exit}')
	echo "${m:-http://deb.debian.org/debian}"
}
if [[ ${PACKAGE_TEST_SKIP_DOCKER:-} == 1 ]]; then
	echo "SKIP the container checks (PACKAGE_TEST_SKIP_DOCKER=1)"
elif ! docker info >/dev/null 2>&1; then
	fail "the Docker engine is not reachable (docker info failed); set PACKAGE_TEST_SKIP_DOCKER=1 to skip these checks"
elif [[ -z $deb ]]; then
	fail "dist/ has no .deb for $host_goarch"
else
	if docker image inspect "$image" >/dev/null 2>&1; then
		echo "using the image $image (docker rmi it to rebuild)"
	else
		command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap): needed once, to build $image"
		m=$(mirror)
		echo "building $image: debootstrap --variant=minbase bookworm from $m (cache: .cache/debootstrap)"
		rootfs=$work/rootfs
		mkdir -p "$root/.cache/debootstrap"
		debootstrap --variant=minbase --cache-dir="$root/.cache/debootstrap" bookworm "$rootfs" "$m" >"$work/debootstrap.log" 2>&1 ||
			die "debootstrap failed: $(tail -20 "$work/debootstrap.log")"
		tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' - "$image" >/dev/null || die "docker import failed"
		rm -rf "$rootfs"
	fi
	debname=$(basename "$deb")
	docker run --rm -i --network none -v "$root/dist:/dist:ro" -e DEB="/dist/$debname" -e V="$V" "$image" bash -s >"$work/docker.log" 2>&1 <<'EOF'
set -u
pass() { echo "PASS [container] $*"; }
fail() { echo "FAIL [container] $*"; }
check() { local d=$1; shift; if "$@"; then pass "$d"; else fail "$d"; fi; }
# Processes other than this script (pid 1) and the subshell listing them.
others() {
	local me=$BASHPID pid comm state ppid rest
	for d in /proc/[0-9]*; do
		read -r pid comm state ppid rest <"$d/stat" 2>/dev/null || continue
		[[ $pid == 1 || $pid == "$me" || $ppid == "$me" ]] && continue
		echo "$pid $comm"
	done
}
if out=$(dpkg -i "$DEB" 2>&1); then pass "dpkg -i $(basename "$DEB")"; else fail "dpkg -i: $out"; exit 0; fi
printf '%s\n' "$out" | sed 's/^/    | /'
check "postinst printed 'agentd pair --hub URL --code XXXX-XXXX'" grep -q 'agentd pair --hub URL --code XXXX-XXXX' <<<"$out"
check "postinst printed 'agentd install'" grep -q '^  agentd install' <<<"$out"
check "dpkg says agentd is installed" bash -c "dpkg-query -W -f='\${Status}' agentd | grep -qx 'install ok installed'"
for p in /usr/bin/agentd /usr/bin/agentctl /usr/lib/systemd/user/agentd.service /usr/lib/systemd/system/agentd@.service \
	/usr/share/doc/agentd/config.example /usr/share/doc/agentd/agentd.txt /usr/share/doc/agentd/agentctl.txt /usr/share/doc/agentd/copyright; do
	check "$p is installed" test -s "$p"
done
left=$(others)
check "postinst left no process running${left:+: $left}" test -z "$left"
check "postinst enabled no unit (no agentd link under /etc/systemd)" test -z "$(find /etc/systemd -name 'agentd*' 2>/dev/null)"

useradd -m -s /bin/bash alice
out=$(runuser -u alice -- env HOME=/home/alice agentd version 2>&1)
check "agentd version as alice: $out" grep -qE "^agentd v?$V " <<<"$out"
out=$(runuser -u alice -- env HOME=/home/alice agentctl --help 2>&1)
check "agentctl --help as alice" grep -q 'agentctl' <<<"$out"
unit=$(runuser -u alice -- env HOME=/home/alice agentd install --print 2>&1)
printf '%s\n' "$unit" | sed 's/^/    | /'
check "agentd install --print as alice prints a user unit running /usr/bin/agentd run" grep -qx 'ExecStart=/usr/bin/agentd run' <<<"$unit"
check "... wanted by default.target (the user manager's target)" grep -qx 'WantedBy=default.target' <<<"$unit"
check "... with no User= line: it runs as alice, whose manager starts it" bash -c '! grep -q "^User=" <<<"$1"' _ "$unit"
check "... and changed nothing (no ~alice/.config/systemd)" test ! -e /home/alice/.config/systemd
sys=$(agentd install --system --user alice --print 2>&1)
check "agentd install --system --user alice --print has User=alice" grep -qx 'User=alice' <<<"$sys"
check "agentd status as alice says not installed, exit non-zero" bash -c '! runuser -u alice -- env HOME=/home/alice agentd status >/dev/null 2>&1'

mkdir -p /home/alice/.config/agentd && echo keep >/home/alice/.config/agentd/machine.json && chown -R alice: /home/alice/.config
if out=$(dpkg -r agentd 2>&1); then pass "dpkg -r agentd"; else fail "dpkg -r: $out"; fi
printf '%s\n' "$out" | sed 's/^/    | /'
check "removal deleted /usr/bin/agentd" test ! -e /usr/bin/agentd
check "removal kept the user's ~/.config/agentd" grep -qx keep /home/alice/.config/agentd/machine.json
check "removal deleted /usr/share/doc/agentd/config.example (documentation, not a conffile)" test ! -e /usr/share/doc/agentd/config.example
check "nothing was ever put in /etc/agentd" test ! -e /etc/agentd
EOF
	rc=$?
	cat "$work/docker.log"
	if ((rc != 0)); then
		fail "docker run $image exited $rc"
	fi
	n=$(grep -c '^FAIL' "$work/docker.log")
	failures=$((failures + n))
	grep -q '^PASS \[container\] dpkg -r agentd' "$work/docker.log" || fail "the container checks did not run to the end"
fi

echo
if ((failures)); then
	echo "package-test: FAILED ($failures failed checks)"
	exit 1
fi
echo "package-test: all checks passed"
