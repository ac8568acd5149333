#!/bin/sh
# An example exec handler for plugreg run --handler TYPE=exec:PATH, in POSIX sh.
#
# plugreg runs it as `handler.sh validate|register|deregister` with the plugin
# as one JSON object on stdin ({"name":…,"type":…,"endpoint":…,"socketPath":…,
# "versions":[…]}, plus for deregister "reason" and the "annotations" the
# plugin was registered with, if any) and PLUGREG_ACTION set too.
#   validate:   refuses the plugin named refused.example.com: it prints the
#               reason on stderr and exits 1; the plugin is told
#               "RegisterPlugin error -- plugin validation failed with err: REASON".
#   register:   prints the annotations {"node":"HOST","handler":"handler.sh"}
#               on stdout, which `plugreg list -o json` shows.
#   deregister: nothing to undo; exits 0.
set -eu
input=$(cat)
name=$(printf '%s\n' "$input" | sed -n 's/.*"name":"\([^"]*\)".*/\1/p')
case "$1" in
validate)
	if [ "$name" = refused.example.com ]; then
		echo "plugin $name is not allowed on this node" >&2
		exit 1
	fi
	;;
register)
	printf '{"node":"%s","handler":"handler.sh"}\n' "$(uname -n)"
	;;
deregister) ;;
*)
	echo "unknown action $1" >&2
	exit 2
	;;
esac
