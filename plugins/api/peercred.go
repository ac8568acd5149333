package api

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
)

// PeerCredentials returns the transport credentials of the agent's API
// server: grpc.NewServer(grpc.Creds(api.PeerCredentials())). They neither
// encrypt nor authenticate anything (the socket is local, and its
// permissions say who may connect) but read, as each connection is
// accepted, who is at its other end: the uid and pid (package
// plugins/peer; on Windows, the process's user and groups), so that
// Register and Deregister can tell a caller that may write from one that
// may only read (see [APIServer.EnableRegistration]). A connection whose
// peer cannot be told is served all the same, read-only.
//
// A client uses insecure credentials, as [Dial] does.
func PeerCredentials() credentials.TransportCredentials { return peerCreds{} }

// peerCreds are the transport credentials PeerCredentials returns.
type peerCreds struct{}

// ServerHandshake reads who is at the other end of conn.
// A connection of LimitConns tells it already.
func (peerCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var who caller
	if lc, ok := conn.(*limitedConn); ok {
		who = lc.who
	} else {
		who = identifyConn(conn)
	}
	return conn, peerAuth{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, c: who}, nil
}

// ClientHandshake does nothing: a client's peer is the agent.
func (peerCreds) ClientHandshake(_ context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return conn, peerAuth{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
}

func (peerCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: authType}
}

func (c peerCreds) Clone() credentials.TransportCredentials { return c }

func (peerCreds) OverrideServerName(string) error { return nil }

// authType names the credentials in gRPC's AuthInfo.
const authType = "peercred"

// peerAuth is the AuthInfo of a connection that PeerCredentials accepted.
type peerAuth struct {
	credentials.CommonAuthInfo
	c caller
}

func (peerAuth) AuthType() string { return authType }

// caller is what the agent knows of the process at the other end of an
// API connection.
type caller struct {
	uid    uint32 // its effective uid, if hasUID
	hasUID bool
	// trusted: it may register whatever writers EnableRegistration got:
	// root or the agent's own uid; on Windows, SYSTEM, a member of
	// Administrators or the agent's own user.
	trusted bool
	who     string // how messages name it: "uid 1000 (pid 42)"; on Windows, "pid 42 (user S-1-5-…)"
	err     error  // why nothing else is known
}

// identifyConn returns who is at the other end of conn.
func identifyConn(conn net.Conn) caller {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return caller{err: fmt.Errorf("peer credentials: %T has no file descriptor", conn)}
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return caller{err: fmt.Errorf("peer credentials: %w", err)}
	}
	var c caller
	if err := raw.Control(func(fd uintptr) { c = identify(fd) }); err != nil {
		return caller{err: fmt.Errorf("peer credentials: %w", err)}
	}
	return c
}

// callerOf returns who calls an RPC of ctx. It reports false if the server
// does not use PeerCredentials.
func callerOf(ctx context.Context) (caller, bool) {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return caller{}, false
	}
	a, ok := p.AuthInfo.(peerAuth)
	return a.c, ok
}
