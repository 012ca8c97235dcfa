#!/bin/sh
# agentd package: before removal. Deletes nothing: pairings, keys, snapshots
# and audit logs live in each user's home (~/.config/agentd,
# ~/.local/state/agentd) and stay there. Stops nothing either. Called by dpkg
# as 'prerm remove|upgrade|...' and by rpm as '%preun N' (N=0 removal,
# N>0 upgrade).
set -e

case "$1" in
remove | 0) ;;
*) exit 0 ;; # upgrade (dpkg 'upgrade', rpm N>0): nothing to say
esac

cat <<'MSG'
Removing agentd. Pairings, keys, snapshots and audit logs in users' homes
(~/.config/agentd, ~/.local/state/agentd) are kept ('agentd unpair' deletes
a user's pairing and key).
Services installed with 'agentd install' still point at /usr/bin/agentd:
remove them first with 'agentd uninstall' (per user) or
'sudo agentd uninstall --system', and stop system instances with
'sudo systemctl disable --now agentd@NAME'.
MSG
exit 0
