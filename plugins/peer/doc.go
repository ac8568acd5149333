// Package peer tells who is at the other end of a local socket.
//
// [FromFD] reads what the kernel recorded about the process at the other
// end of a connected unix socket when that process called connect or
// listen: its effective uid and, where the OS tells, its pid. Linux and
// OpenBSD (SO_PEERCRED), NetBSD (LOCAL_PEEREID), macOS, FreeBSD and
// DragonFly (LOCAL_PEERCRED, as getpeereid(3) does) are supported; on any
// other system [Supported] is false and FromFD fails, so that a check on
// the peer's uid cannot be mistaken for one that was made.
//
// The package reads credentials and decides nothing: who may do what is
// its callers' business. It imports no other package of the module.
//
// # Windows notes
//
// An AF_UNIX socket on Windows has no uid to tell. [Supported] is false
// and FromFD fails; ProcessID (Windows only) returns the pid of the
// process at the other end (the SIO_AF_UNIX_GETPEERPID ioctl), from which
// a caller can open the process's access token.
package peer
