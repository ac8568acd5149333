package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// completeCommand is the hidden command that the completion scripts call:
// `plugreg __complete WORD... CURRENT` prints the words that may come at
// CURRENT, one a line, after the words of the command line that follow
// "plugreg".
const completeCommand = "__complete"

// completionTimeout bounds the agent's answer to a completion that lists
// plugin types or names: a shell waits for it.
const completionTimeout = time.Second

// Words that complete the commands and their fixed arguments, in the
// order `plugreg help` lists them.
var (
	commandNames = []string{"run", "list", "get", "watch", "wait", "status", "register", "deregister",
		"fleet", "example-plugin", "service", "completion", "version", "help"}
	fleetCommands  = []string{"list", "watch", "wait", "forget"}
	serviceActions = []string{"install", "uninstall", "start", "stop", "status", "print"}
	shells         = []string{"bash", "zsh", "fish"}
)

// flagValueWords are the values of flags that take one of a fixed set,
// by command ("fleet wait" for a fleet command) and flag; "" is any
// command.
var flagValueWords = map[string]map[string][]string{
	"":            {"log-format": {"auto", "text", "json"}, "log-level": {"debug", "info", "warn", "error"}},
	"list":        {"o": {"table", "json"}},
	"get":         {"o": {"table", "json"}},
	"watch":       {"o": {"text", "json"}},
	"status":      {"o": {"text", "json"}},
	"wait":        {"for": waitConditions},
	"fleet list":  {"o": {"table", "json"}},
	"fleet watch": {"o": {"text", "json"}},
	"fleet wait":  {"for": fleetWaitConditions},
}

// pluginArgs are the commands whose --type and --name take a plugin of
// the running agent.
var pluginArgs = []string{"list", "get", "watch", "wait", "deregister"}

// runCompletion is `plugreg completion bash|zsh|fish`.
func runCompletion(args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("completion", "bash|zsh|fish", stderr)
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if flags.NArg() != 1 {
		return usagef("completion: want one shell (bash, zsh or fish), got %d arguments", flags.NArg())
	}
	var script string
	switch flags.Arg(0) {
	case "bash":
		script = bashCompletion
	case "zsh":
		script = zshCompletion
	case "fish":
		script = fishCompletion
	default:
		return usagef("completion: unknown shell %q: want bash, zsh or fish", flags.Arg(0))
	}
	_, err := io.WriteString(stdout, script)
	return err
}

// bashCompletion completes plugreg in bash: `source <(plugreg completion
// bash)`. With no word to offer, bash completes file names.
const bashCompletion = `# bash completion of plugreg: source <(plugreg completion bash)
_plugreg() {
	local IFS=$'\n'
	COMPREPLY=($("${COMP_WORDS[0]}" ` + completeCommand + ` "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _plugreg plugreg
`

// zshCompletion completes plugreg in zsh, sourced or as _plugreg in
// $fpath.
const zshCompletion = `#compdef plugreg
# zsh completion of plugreg: source <(plugreg completion zsh), or save it as _plugreg in $fpath
_plugreg() {
	local -a words_found
	words_found=("${(@f)$(${words[1]} ` + completeCommand + ` "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	words_found=(${words_found:#})
	if (( ${#words_found} )); then
		compadd -Q -a words_found
	else
		_files
	fi
}
if [ "$funcstack[1]" = "_plugreg" ]; then
	_plugreg "$@"
else
	compdef _plugreg plugreg
fi
`

// fishCompletion completes plugreg in fish.
const fishCompletion = `# fish completion of plugreg: plugreg completion fish | source
function __plugreg_complete
	set -l words (commandline -opc)
	$words[1] ` + completeCommand + ` $words[2..-1] (commandline -ct) 2>/dev/null
end
complete -c plugreg -a '(__plugreg_complete)'
`

// runComplete is the hidden `plugreg __complete WORD... CURRENT`: it
// prints the completions of CURRENT that start with it, one a line, and
// nothing when it knows none (the shell then completes file names).
func runComplete(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return nil
	}
	words, cur := args[:len(args)-1], args[len(args)-1]
	var b strings.Builder
	for _, w := range completions(ctx, words, cur) {
		if strings.HasPrefix(w, cur) && !strings.ContainsAny(w, "\n\r") {
			b.WriteString(w + "\n")
		}
	}
	_, err := io.WriteString(stdout, b.String())
	return err
}

// completions returns what may come after words, the command line after
// "plugreg": a command, a subcommand, a flag, a flag's value or a plugin.
func completions(ctx context.Context, words []string, cur string) []string {
	if len(words) == 0 {
		return commandNames
	}
	cmd, rest := words[0], words[1:]
	help := []string{cmd} // the command whose -h lists the flags
	switch cmd {
	case "fleet":
		if len(rest) == 0 {
			return fleetCommands
		}
		cmd, help, rest = "fleet "+rest[0], []string{"fleet", rest[0]}, rest[1:]
	case "service":
		if len(rest) == 0 {
			return serviceActions
		}
		if rest[0] != "install" && rest[0] != "print" {
			return nil
		}
		help, rest = []string{"run"}, rest[1:] // the flags of run
	case "completion":
		if len(rest) == 0 {
			return shells
		}
		return nil
	case "help", "version":
		return nil
	}
	flags := flagsOf(ctx, help)
	if n := len(rest); n > 0 {
		if name, value := flagName(rest[n-1]); flags[name] && !value {
			return flagValues(ctx, cmd, name, rest)
		}
	}
	if strings.HasPrefix(cur, "-") {
		var list []string
		for name := range flags {
			list = append(list, "--"+name)
		}
		slices.Sort(list)
		return list
	}
	if cmd == "get" { // get TYPE NAME
		switch pos := positionals(rest, flags); len(pos) {
		case 0:
			return agentPlugins(ctx, rest, true, "")
		case 1:
			return agentPlugins(ctx, rest, false, pos[0])
		}
	}
	return nil
}

// flagLineOfHelp matches a flag in what flag.PrintDefaults prints: its
// name, and the name of its value if it takes one.
var flagLineOfHelp = regexp.MustCompile(`(?m)^  -(\S+)( \S+)?\s`)

// flagsOf returns the flags of the command path (such as ["fleet",
// "list"]), from what its -h prints: whether each takes a value.
func flagsOf(ctx context.Context, path []string) map[string]bool {
	var help bytes.Buffer
	run(ctx, append(slices.Clone(path), "-h"), io.Discard, &help)
	flags := map[string]bool{}
	for _, m := range flagLineOfHelp.FindAllStringSubmatch(help.String(), -1) {
		flags[m[1]] = m[2] != ""
	}
	return flags
}

// flagName returns the name of the flag that word is ("" if it is none),
// and whether word holds its value too (--name=value).
func flagName(word string) (name string, value bool) {
	if len(word) < 2 || word[0] != '-' {
		return "", false
	}
	name = strings.TrimPrefix(word[1:], "-")
	name, _, value = strings.Cut(name, "=")
	return name, value
}

// positionals returns the words of rest that are neither flags nor their
// values.
func positionals(rest []string, flags map[string]bool) []string {
	var pos []string
	for i := 0; i < len(rest); i++ {
		if name, value := flagName(rest[i]); name != "" {
			if flags[name] && !value {
				i++ // its value
			}
			continue
		}
		pos = append(pos, rest[i])
	}
	return pos
}

// flagValue returns the value that rest gives the flag name, or "".
func flagValue(rest []string, name string) string {
	v := ""
	for i, w := range rest {
		switch n, hasValue := flagName(w); {
		case n != name:
		case hasValue:
			_, v, _ = strings.Cut(w, "=")
		case i+1 < len(rest):
			v = rest[i+1]
		}
	}
	return v
}

// flagValues returns the values of the flag name of cmd: a fixed set, or
// the types or names of the running agent's plugins.
func flagValues(ctx context.Context, cmd, name string, rest []string) []string {
	if vs, ok := flagValueWords[cmd][name]; ok {
		return vs
	}
	if vs, ok := flagValueWords[""][name]; ok {
		return vs
	}
	if !slices.Contains(pluginArgs, cmd) {
		return nil
	}
	switch name {
	case "type":
		return agentPlugins(ctx, rest, true, "")
	case "name":
		return agentPlugins(ctx, rest, false, flagValue(rest, "type"))
	}
	return nil
}

// agentPlugins returns, from the agent on the --api of rest (or the
// default one), the types of its plugins, or the names of its plugins of
// type typ ("": of every type); nothing when no agent answers within
// completionTimeout.
func agentPlugins(ctx context.Context, rest []string, types bool, typ string) []string {
	path := flagValue(rest, "api")
	if path == "" {
		path = defaultAPI()
	}
	client, closeConn, err := dialAPI(path)
	if err != nil {
		return nil
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	resp, err := client.List(ctx, &plugregv1.ListRequest{Type: typ})
	if err != nil {
		return nil
	}
	var list []string
	for _, p := range resp.GetPlugins() {
		w := p.GetName()
		if types {
			w = p.GetType()
		}
		list = append(list, w)
	}
	slices.Sort(list)
	return slices.Compact(list)
}
