#!/usr/bin/env bash
# make demo: the agent and two example CSI plugins in a temporary directory.
# The agent runs the exec handler testdata/handler.sh for CSIPlugin: it
# refuses one plugin by name and annotates the other, which is registered;
# a third, serving a socket outside the plugin directory (its endpoint,
# which must exist and be the caller's), is registered with plugreg register;
# then the discovered one stops and is deregistered. Usage: demo.sh BINARY
set -euo pipefail
bin=$(cd "$(dirname "${1:?usage: demo.sh BINARY}")" && pwd)/$(basename "$1")
handler=$(cd "$(dirname "$0")" && pwd)/handler.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plugreg-demo.XXXXXX")
dir=$tmp/plugins
api=$tmp/api.sock
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# prefix NAME: tag each line as it arrives, so the streams interleave in order.
prefix() { while IFS= read -r line; do printf '  [%s] %s\n' "$1" "$line"; done; }
# settle: give the log lines of what just happened time to arrive.
settle() { sleep 0.5; }
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# until CMD...: retry CMD for up to 10 s.
until_ok() {
	for _ in $(seq 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "demo: timed out waiting for: $*" >&2
	return 1
}
listed() { "$bin" list --api "$api" -o json | grep -q "\"name\": \"$1\""; }
not_listed() { ! listed "$1"; }

step "start the agent: plugreg run --dir $dir --interval 100ms --handler CSIPlugin=exec:$handler"
"$bin" run --dir "$dir" --api "$api" --state "$tmp/state.json" --interval 100ms --handler "CSIPlugin=exec:$handler" --log-format text > >(prefix agent) 2>&1 &
agent=$!
pids+=($agent)
until_ok test -S "$api"
settle

step "start two CSI plugins: handler.sh annotates csi.example.com and refuses refused.example.com by name"
"$bin" example-plugin --dir "$dir" --name csi.example.com --type CSIPlugin --versions 1.0.0 --log-format text > >(prefix csi) 2>&1 &
csi=$!
pids+=($csi)
"$bin" example-plugin --dir "$dir" --name refused.example.com --type CSIPlugin --versions 1.0.0 --log-format text > >(prefix refused) 2>&1 &
refused=$!
pids+=($refused)
until_ok listed csi.example.com
settle

step "plugreg list -o json: the annotations from handler.sh"
"$bin" list --api "$api" -o json
"$bin" list --api "$api" -o json | grep -q '"handler": "handler.sh"' || { echo "demo: no annotations from handler.sh" >&2; exit 1; }
if listed refused.example.com; then echo "demo: refused.example.com was registered" >&2; exit 1; fi

step "plugreg register: a plugin with no registration socket, as an orchestrator registers it; list shows its SOURCE api"
"$bin" example-plugin --socket "$tmp/raw.sock" --name raw.example.com --log-format text > >(prefix raw) 2>&1 &
raw=$!
pids+=($raw)
until_ok test -S "$tmp/raw.sock"
"$bin" register --api "$api" --type CSIPlugin --name raw.example.com --endpoint "$tmp/raw.sock" --version 1.0.0 --owner alloc-1 --option mode=raw --no-check
"$bin" list --api "$api"

step "stop the CSI plugin: it removes its socket, the agent deregisters it"
kill -TERM "$csi"
wait "$csi" || true
until_ok not_listed csi.example.com
settle
step "plugreg list"
"$bin" list --api "$api"

step "stop everything (SIGTERM)"
kill -TERM "$refused" "$raw" "$agent"
wait "$refused" || true
wait "$raw" || true
status=0
wait "$agent" || status=$?
pids=()
settle
if [ "$status" -ne 0 ]; then echo "demo: the agent exited with status $status" >&2; exit 1; fi
if [ -e "$api" ]; then echo "demo: the agent left its API socket behind" >&2; exit 1; fi
step "done: the agent exited with status 0 and removed its API socket"
