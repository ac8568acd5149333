package rules

// MaxFleetLeaseText bounds the Prefix and the Node of a plugins.FleetLease, in
// bytes.
const MaxFleetLeaseText = 512
