// Package handlertest serves a real plugreg.v1.Handler on a unix socket
// for tests: a [Server] records every request it gets, whole, and answers
// as the test configures it. It is for tests only.
package handlertest
