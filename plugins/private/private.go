package private

// Check returns an error if a user other than the agent's own and
// the administrators could replace the file at path, or what the agent
// reads from it: path is one of the agent's inputs, its state file, its
// API socket, a handler's program or socket, or its etcd password file.
// The agent calls it for each before it reads, runs, listens on or
// connects to one, so that no local user can plant a state file, take the
// API socket's path between two runs of the agent, or swap a handler or a
// password for one of their own. The error names the file or directory at
// fault, its owner and its permissions, and what to change.
//
// On unix, the administrator is root. The directory of path (while it is
// missing, the closest ancestor that exists, in which the agent will
// create it) must be owned by root or the agent's user, and not writable
// by another user: not by its group unless that is root's group (gid 0),
// and not by every user, even with the sticky bit (as /tmp has), which
// keeps users from replacing one another's files but not from creating
// the path, or the missing directories on it, first. Its ancestors, after symbolic links are resolved, must
// be owned by root or the agent's user and not writable by every user
// without the sticky bit; their group may write to them, as macOS's
// /var/run (root:daemon, 0775) lets its group. A file at path must be
// owned by root or the agent's user, and unless it is a socket (which its
// writers may connect to, not replace: the API socket with --api-group),
// not writable by every user, nor by its group unless that is root's; a
// symbolic link at path is followed, and the file it names checked the
// same way.
//
// # Windows notes
//
// The administrators are SYSTEM and the Administrators group, and
// TrustedInstaller, which owns the system's programs. The directory
// of path (while it is missing, the closest ancestor that exists) must be
// owned by SYSTEM, Administrators or the agent's user, and its DACL must let
// no one else create, delete or rename files in it, or change its DACL or
// owner. A file at path must be owned by SYSTEM, Administrators or the
// agent's user. Ancestors are not checked: creating files in a directory
// does not let a user rename or replace the directories already in it, and
// C:\ and C:\ProgramData let every user create files.
func Check(path string) error { return checkPrivate(path) }
