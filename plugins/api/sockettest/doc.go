// Package sockettest gives tests of unix-socket code what they share: a
// short directory for sockets, a listener that skips the test where the
// system has no AF_UNIX sockets, a stale socket file, a buffer safe for
// concurrent writers (a server's or a process's log), held HTTP/2
// connections that count what a server keeps ([H2Conns]), a test binary
// started again as a child that loads a server ([StartChild]), and the
// one way a test of an access rule that cannot run here skips: said,
// listed and, where it must run, failed ([SkipAccess]). It is for tests
// only.
package sockettest
