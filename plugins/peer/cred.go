package peer

// Cred is what the kernel says about the process at the other end of a
// unix socket: its effective uid as of its connect or listen call and,
// where the OS tells, its pid (0: unknown).
type Cred struct {
	UID uint32
	PID int32
}
