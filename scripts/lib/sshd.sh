# Shared by scripts/bench.sh and scripts/bench-hub.sh (sourced, not run):
# start_sshd starts a throwaway sshd on loopback with a multiplexed master
# connection, for the ssh baselines. It needs from the caller: $tmp (a temp
# dir), $raw (the raw results file), $SSH_PORT, note and apt_install; it
# sets sshd_pid, ssh_master, ssh_base, ssh_rc and ssh_dest, which the
# caller's cleanup uses, and ssh_port and ssh_key (the user's key, for Go
# clients). sshc runs a command through the master.
start_sshd() {
	local sshd
	sshd=$(command -v sshd || echo /usr/sbin/sshd)
	if [[ ! -x $sshd ]] || ! command -v ssh >/dev/null || ! command -v ssh-keygen >/dev/null; then
		apt_install openssh-server openssh-client || { note "no sshd/ssh and cannot install them: skipping the ssh baselines"; return 1; }
		sshd=$(command -v sshd || echo /usr/sbin/sshd)
	fi
	local d=$tmp/ssh user port
	user=$(id -un)
	mkdir -p "$d" && chmod 700 "$d"
	ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" -C bench-host
	ssh-keygen -q -t ed25519 -N '' -f "$d/user_key" -C bench-user
	cp "$d/user_key.pub" "$d/authorized_keys"
	# sshd refuses to start without its privilege separation directory.
	[[ -d /run/sshd ]] || mkdir -p /run/sshd 2>/dev/null || true
	port=$SSH_PORT
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		((port++ < SSH_PORT + 20)) || { note "no free port in $SSH_PORT..$port"; return 1; }
	done
	cat >"$d/sshd_config" <<-EOF
		Port $port
		ListenAddress 127.0.0.1
		HostKey $d/host_key
		PidFile $d/sshd.pid
		AuthorizedKeysFile $d/authorized_keys
		PermitRootLogin prohibit-password
		PubkeyAuthentication yes
		PasswordAuthentication no
		KbdInteractiveAuthentication no
		UsePAM no
		StrictModes no
		PrintMotd no
		AllowUsers $user
		AcceptEnv SHLVL
		LogLevel ERROR
	EOF
	"$sshd" -D -f "$d/sshd_config" -E "$d/sshd.log" &
	sshd_pid=$!
	ssh_base=(-F /dev/null -p "$port" -i "$d/user_key" -o IdentitiesOnly=yes -o BatchMode=yes
		-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
		-o ControlPath="$d/mux")
	ssh_dest=$user@127.0.0.1
	# The master: authenticates once, then stays in the background (-f -N).
	# Sessions pass on SHLVL (the master and the client must both SendEnv
	# it): Debian's bash sources ~/.bashrc for a command run by sshd unless
	# SHLVL says it is nested, and a heavy .bashrc (root's here runs pyenv
	# init: 0.5 s) would then be what the baseline measures, not ssh. ssh_rc
	# leaves it out, for one reference figure with the user's rc files.
	export SHLVL
	local i
	for i in $(seq 50); do
		kill -0 "$sshd_pid" 2>/dev/null || { cat "$d/sshd.log" >&2; note "sshd exited at startup (log above)"; sshd_pid=''; return 1; }
		if ssh "${ssh_base[@]}" -o ControlMaster=yes -o ControlPersist=15m -o SendEnv=SHLVL -f -N "$ssh_dest" </dev/null >/dev/null 2>"$d/master.log"; then
			ssh_master=1
			break
		fi
		sleep 0.1
	done
	[[ -n $ssh_master ]] || { cat "$d/master.log" "$d/sshd.log" >&2; note "cannot ssh to 127.0.0.1:$port (logs above)"; return 1; }
	ssh "${ssh_base[@]}" -O check "$ssh_dest" 2>>"$raw" || { note "the ssh master connection is not up"; return 1; }
	ssh_rc=("${ssh_base[@]}" -o ControlMaster=no)
	ssh_base=("${ssh_base[@]}" -o SendEnv=SHLVL -o ControlMaster=no)
	[[ $(sshc 'echo ok') == ok ]] || { note "ssh through the master connection does not work"; return 1; }
	ssh_port=$port ssh_key=$d/user_key
	note "sshd on 127.0.0.1:$port (pid $sshd_pid), multiplexed master up, cipher $(ssh -G "${ssh_base[@]}" "$ssh_dest" 2>/dev/null | awk '$1 == "ciphers" { split($2, c, ","); print c[1] }')"
}
sshc() { ssh "${ssh_base[@]}" "$ssh_dest" "$@"; }
