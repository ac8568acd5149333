// Package private checks that no user but the agent's own and the
// administrators can replace a file the agent reads, runs, listens on or
// connects to ([Check]), and on Windows makes the agent's directories so
// ([Mkdir]). The agent checks its state file, API socket, handlers and etcd
// password file with it before it uses them.
//
// It reads file ownership and permissions and changes nothing but the
// directories Mkdir makes.
package private
