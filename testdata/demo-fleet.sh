#!/usr/bin/env bash
# make demo-fleet: a real etcd (embedded, testdata program of plugins/fleet)
# and two agents publishing as node-a and node-b, with plugins on both;
# plugreg fleet list shows them, then node-b's agent is killed with -9 and
# its plugins leave the fleet view once its lease expires (--publish-ttl
# 3s). Usage: demo-fleet.sh BINARY ETCD_BINARY
set -euo pipefail
bin=$(cd "$(dirname "${1:?usage: demo-fleet.sh BINARY ETCD}")" && pwd)/$(basename "$1")
etcd=$(cd "$(dirname "${2:?usage: demo-fleet.sh BINARY ETCD}")" && pwd)/$(basename "$2")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/plugreg-fleet.XXXXXX")
port=$(( 20000 + RANDOM % 20000 ))
ep=127.0.0.1:$port
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
prefix() { while IFS= read -r line; do printf '  [%s] %s\n' "$1" "$line"; done; }
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# until_ok SECONDS CMD...: retry CMD for up to SECONDS.
until_ok() {
	local n=$(( $1 * 10 )); shift
	for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "demo: timed out waiting for: $*" >&2
	return 1
}
count() { "$bin" fleet list --etcd "$ep" -o json | grep -c '"node"' || true; }
has() { [ "$(count)" = "$1" ]; }

step "start etcd (embedded) on $ep"
"$etcd" -dir "$tmp/etcd" -port "$port" > >(prefix etcd) 2>&1 &
pids+=($!)
until_ok 30 "$bin" fleet list --etcd "$ep"

for n in a b; do
	step "start agent node-$n: plugreg run --publish etcd://$ep --node node-$n --publish-ttl 3s"
	mkdir -p "$tmp/$n"
	"$bin" run --dir "$tmp/$n/plugins" --api "$tmp/$n/api.sock" --state "$tmp/$n/state.json" --interval 100ms \
		--publish "etcd://$ep" --node "node-$n" --publish-ttl 3s --log-format text > >(prefix "agent $n") 2>&1 &
	pids+=($!)
	eval "agent_$n=$!"
	until_ok 10 test -S "$tmp/$n/api.sock"
done

step "two CSI plugins on node-a, one on node-b (csi.example.com on both)"
for spec in a:csi.example.com a:other.example.com b:csi.example.com; do
	n=${spec%%:*}; name=${spec#*:}
	"$bin" example-plugin --dir "$tmp/$n/plugins" --name "$name" --log-format text > >(prefix "$name@$n") 2>&1 &
	pids+=($!)
done
until_ok 10 has 3

step "plugreg fleet list --etcd $ep"
"$bin" fleet list --etcd "$ep"
step "plugreg fleet list --etcd $ep --name csi.example.com -o json"
"$bin" fleet list --etcd "$ep" --name csi.example.com -o json

step "kill -9 the agent of node-b: no revoke, its lease runs out"
kill -9 "$agent_b"
start=$(date +%s.%N)
until_ok 10 has 2
printf '  node-b left the fleet view %.1f s after the kill (TTL 3 s)\n' "$(echo "$(date +%s.%N) - $start" | bc)"
"$bin" fleet list --etcd "$ep"
