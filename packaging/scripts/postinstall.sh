#!/bin/sh
# agentd package: after install. Starts and enables nothing: agentd runs as
# the user whose machine it is, and that user pairs it and installs the
# service. Called by dpkg as 'postinst configure [OLD-VERSION]' and by rpm as
# '%post N' (N=1 first install, N>1 upgrade).
set -e

case "$1" in
configure | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9) ;;
*) exit 0 ;; # abort-upgrade, abort-remove, ...: nothing to do
esac

# Let a running systemd see new or changed unit files. This loads no unit and
# starts nothing.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi

upgrade=
if [ "$1" = configure ] && [ -n "${2:-}" ]; then upgrade=1; fi
if [ "$1" != configure ] && [ "$1" -gt 1 ]; then upgrade=1; fi

if [ -n "$upgrade" ]; then
	cat <<'MSG'
agentd upgraded. A running agentd keeps the old version until it restarts:
  agentd restart                           (as each user running the per-user service)
  sudo agentd restart --system             (a service from 'agentd install --system')
  sudo systemctl restart 'agentd@*'        (instances of the packaged agentd@.service)
MSG
	exit 0
fi

cat <<'MSG'

agentd is installed (/usr/bin/agentd, /usr/bin/agentctl). Nothing was started.
Next, as the user whose machine this is (not root):

  agentd pair --hub URL --code XXXX-XXXX
  agentd install

'agentd pair' registers this machine with your hub (ask its admin for a
pairing code); 'agentd install' runs agentd as your per-user service.
For an account nobody logs into: sudo systemctl enable --now agentd@NAME
Help: agentd --help, /usr/share/doc/agentd/

MSG
exit 0
