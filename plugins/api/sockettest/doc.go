// Package sockettest gives tests of unix-socket code what they share: a
// short directory for sockets, a listener that skips the test where the
// system has no AF_UNIX sockets, and a buffer safe for concurrent writers
// (a server's or a process's log). It is for tests only.
package sockettest
