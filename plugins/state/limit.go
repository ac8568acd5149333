package state

import (
	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/rules"
)

// MinLimit is the least [Limit]: what an agent allowed few plugins still
// loads, such as a state file it wrote with a larger --max-plugins.
const MinLimit = 16 << 20

// Limit returns the largest state file of an agent that handles at
// most maxPlugins sockets: its plugins and [plugins.MaxPending] pending
// deregistrations, each of [rules.MaxRecordBytes], and never less than
// MinLimit. [Save] never writes a larger file, and [Load] reads no
// larger one, so a state that Save wrote always loads with the same limit.
func Limit(maxPlugins int) int64 {
	return max(MinLimit, stateLimit(max(maxPlugins, 0), plugins.MaxPending))
}

// stateLimit bounds the state file of at most n plugins and pending
// pending deregistrations.
func stateLimit(n, pending int) int64 {
	return int64(n+pending)*int64(rules.MaxRecordBytes) + stateOverhead
}

// stateOverhead is the state document without its records: the fields
// and the fleet lease.
const stateOverhead = 256 + fleetRecordBytes
