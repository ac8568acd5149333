package plugins

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/plugreg/plugreg/scan"
)

// StateVersion is the version of the state document that Save writes.
// Load reads it and version 1, whose records are plugins of JSON schema 0
// (see JSONSchema) and leave out the keys that are empty, false or null.
const StateVersion = 2

// minStateVersion is the oldest version of the state document that Load
// reads.
const minStateVersion = 1

// ErrCorrupt is matched by the errors of [Load] for a state file that
// exists but cannot be used: not JSON, another version, or records that
// break the Registry's rules. [QuarantineCorrupt] moves such a file aside.
var ErrCorrupt = errors.New("plugins: corrupt state file")

// maxReasonBytes bounds an unknown reason that an error quotes.
const maxReasonBytes = 32

// maxQuarantineSuffix bounds the numbered names QuarantineCorrupt tries.
const maxQuarantineSuffix = 1000

// State is what a state file holds: the registered plugins, the revision,
// the pending deregistrations and the fleet lease of a [Registry] at one
// instant. Get it
// with [Registry.State], write it with [Save], read it with [Load] and
// restore it with [NewRegistryFrom].
//
// The file is one JSON object (see MarshalJSON) and nothing else:
//
//	{
//	  "version": 2,
//	  "revision": 42,
//	  "plugins": [
//	    {
//	      "schema": 1,
//	      "name": "hostpath.csi.k8s.io",
//	      "type": "CSIPlugin",
//	      "endpoint": "/var/lib/kubelet/plugins/csi-hostpath/csi.sock",
//	      "socketPath": "/var/lib/kubelet/plugins_registry/hostpath-reg.sock",
//	      "versions": ["1.0.0"],
//	      "registeredAt": "2026-08-21T10:00:00.5Z",
//	      "annotations": {"node": "worker-1"},
//	      "source": "socket",
//	      "owner": "",
//	      "options": {},
//	      "uid": null,
//	      "socketId": {"dev": 2049, "ino": 1835021, "mtime": 1724234400123456789, "ctime": 1724234400123456789, "birth": 1724234400123456789}
//	    }
//	  ],
//	  "pendingDeregistrations": [
//	    {
//	      "schema": 1,
//	      "name": "old.csi.k8s.io",
//	      ...
//	      "reason": "removed"
//	    }
//	  ],
//	  "fleet": {
//	    "lease": 7587883410544297218,
//	    "cluster": 14841639068965178418,
//	    "prefix": "/plugreg/v1/",
//	    "node": "worker-1"
//	  }
//	}
//
// A plugin is in its one JSON form, [PluginJSON], as `plugreg list -o
// json` prints it. A pending deregistration is a plugin, as it was
// registered, plus the reason its handler's DeRegister was given (one of
// the Reason constants); at most one per incarnation of a plugin (type,
// name and socketId): two sockets that carried one name each have theirs.
//
// The last save of a clean stop adds "clean": true after "revision": the
// agent published nothing after that revision (see Running).
//
// "fleet" is the etcd lease of the fleet publisher ([FleetLease]): the
// lease ID, the etcd cluster ID, the key prefix and the node name.
//
// A plugin without "uid" (uid null) loads as a plugin of unknown uid,
// which only a privileged caller may replace or deregister (see Caller).
//
// Unknown fields are an error. "clean", "pendingDeregistrations" and
// "fleet" are optional and left out when false, empty or absent, and so
// are the keys of a plugin that version 1 left out, so that files of
// version 1 load as they are (a file without "clean" as one of an agent
// that did not stop cleanly). Any other new field needs a new
// StateVersion: an agent that does not know the version finds the file
// corrupt, and rebuilds from the scan.
type State struct {
	Version  int    // StateVersion; Save writes StateVersion whatever this says
	Revision uint64 // of the latest event included
	// Running marks a State saved while its agent ran, so that the agent
	// may have published events after Revision that the file does not
	// hold; [NewRegistryFrom] then skips revisions (see RevisionGap). The
	// file of a State that is not Running says "clean": true, which only
	// the last save of a clean stop writes ([Saver]); a file without it,
	// from a running or crashed agent or from an agent that did not know
	// the field, loads as Running.
	Running bool
	Plugins []Plugin
	// Pending are the handler deregistrations not delivered yet (see
	// Registry.PutPending), nil when there are none.
	Pending []PendingDeregistration
	// Fleet is the fleet publisher's etcd lease (see
	// Registry.SetFleetLease), nil when there is none.
	Fleet *FleetLease
}

// stateDoc is the JSON form of a State, which Load decodes; writeState
// encodes the same fields.
type stateDoc struct {
	Version  int    `json:"version"`
	Revision uint64 `json:"revision"`
	// Clean is left out when false, so that a file without it (written
	// while the agent ran, or by an agent that did not know the field)
	// stays readable by any agent, and means "not clean".
	Clean   bool         `json:"clean,omitempty"`
	Plugins []PluginJSON `json:"plugins"`
	// Pending is left out when empty, so that a file without any stays
	// readable by an agent that does not know the field.
	Pending []pendingRecord `json:"pendingDeregistrations,omitempty"`
	// Fleet is left out when there is none, so that a file without it
	// stays readable by an agent that does not know the field.
	Fleet *fleetRecord `json:"fleet,omitempty"`
}

// pendingRecord is the JSON form of a PendingDeregistration: its
// plugin's JSON form, and the reason.
type pendingRecord struct {
	PluginJSON
	Reason string `json:"reason"`
}

// MarshalJSON returns the state document of s, version StateVersion, as
// Save writes it. Times are written in UTC.
func (s State) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeState(&b, s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// UnmarshalJSON reads a state document into s. It rejects unknown fields
// but does not check the version or the records; Load does.
func (s *State) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d stateDoc
	if err := dec.Decode(&d); err != nil {
		return err
	}
	*s = State{Version: d.Version, Revision: d.Revision, Running: !d.Clean, Plugins: make([]Plugin, len(d.Plugins))}
	for i, r := range d.Plugins {
		p, err := r.Plugin()
		if err != nil {
			return fmt.Errorf("plugin %d: %w", i, err)
		}
		s.Plugins[i] = p
	}
	for i, r := range d.Pending {
		p, err := r.Plugin()
		if err != nil {
			return fmt.Errorf("pending deregistration %d: %w", i, err)
		}
		s.Pending = append(s.Pending, PendingDeregistration{Plugin: p, Reason: r.Reason})
	}
	s.Fleet = d.Fleet.lease()
	return nil
}

// check returns an error if s breaks a rule of the Registry (a plugin
// without a socket path, two plugins at one socket path, an invalid plugin
// name, annotations beyond ValidateAnnotations; see ValidateName; two pending
// deregistrations of one incarnation, a reason that is not one of
// the Reason constants, a fleet lease beyond SetFleetLease's rules) or
// cannot survive a round trip through JSON (a
// string that is not UTF-8, a time outside the years 0 to 9999 UTC).
func (s State) check() error {
	seen := make(map[string]bool, len(s.Plugins))
	for i, p := range s.Plugins {
		if err := checkPlugin(p); err != nil {
			return fmt.Errorf("plugin %d: %w", i, err)
		}
		if seen[p.Instance()] {
			if p.FromAPI() {
				return fmt.Errorf("plugin %d: API plugin %s %q of owner %q at %q listed twice", i, p.Type, p.Name, p.Owner, p.Endpoint)
			}
			return fmt.Errorf("plugin %d: socket path %q listed twice", i, p.SocketPath)
		}
		seen[p.Instance()] = true
	}
	pending := make(map[pendingKey]bool, len(s.Pending))
	for i, pd := range s.Pending {
		if err := checkPending(pd); err != nil {
			return fmt.Errorf("pending deregistration %d: %w", i, err)
		}
		k := pd.keyOf()
		if pending[k] {
			return fmt.Errorf("pending deregistration %d: %s %q of socket %q listed twice", i, pd.Plugin.Type, pd.Plugin.Name, pd.Plugin.SocketPath)
		}
		pending[k] = true
	}
	if s.Fleet != nil {
		if err := checkFleetLease(*s.Fleet); err != nil {
			return err
		}
	}
	return nil
}

// checkPending returns an error if pd breaks a rule of the state file.
func checkPending(pd PendingDeregistration) error {
	if err := checkPlugin(pd.Plugin); err != nil {
		return err
	}
	switch {
	case isReason(pd.Reason):
	case len(pd.Reason) > maxReasonBytes:
		return fmt.Errorf("at %q: unknown reason of %d bytes", pd.Plugin.SocketPath, len(pd.Reason))
	default:
		return fmt.Errorf("at %q: unknown reason %q", pd.Plugin.SocketPath, pd.Reason)
	}
	return nil
}

// checkPlugin returns an error if p breaks a rule of the state file: those
// of a registered plugin, which keep a record within MaxRecordBytes.
func checkPlugin(p Plugin) error {
	if p.FromAPI() {
		return checkAPIPlugin(p)
	}
	switch {
	case p.Source != "" && p.Source != SourceSocket:
		return fmt.Errorf("unknown source of %d bytes", len(p.Source))
	case p.Owner != "" || p.Options != nil || p.NoCheck || p.HasUID:
		return fmt.Errorf("at %q: owner, options, no-check or uid of a discovered plugin", p.SocketPath)
	case p.SocketPath == "":
		return errors.New("empty socket path")
	case len(p.SocketPath) > scan.MaxSocketPath:
		return fmt.Errorf("socket path of %d bytes, longer than %d", len(p.SocketPath), scan.MaxSocketPath)
	case !utf8.ValidString(p.SocketPath):
		return fmt.Errorf("socket path %q is not valid UTF-8", p.SocketPath)
	}
	endpoint := p.Endpoint
	if endpoint == "" {
		endpoint = p.SocketPath // what an agent fills in when a plugin reports none
	}
	if err := ValidateInfo(p.Type, p.Name, endpoint, p.Versions); err != nil {
		return fmt.Errorf("at %q: %w", p.SocketPath, err)
	}
	if err := ValidateAnnotations(p.Annotations); err != nil {
		return fmt.Errorf("at %q: %w", p.SocketPath, err)
	}
	if y := p.RegisteredAt.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("at %q: registration time %v out of range", p.SocketPath, p.RegisteredAt)
	}
	return nil
}

// checkAPIPlugin is checkPlugin of a plugin registered through the API:
// no socket path, an endpoint that is an absolute path of at most
// scan.MaxSocketPath bytes, a valid owner and options.
func checkAPIPlugin(p Plugin) error {
	if p.SocketPath != "" {
		return errors.New("API plugin with a socket path")
	}
	if err := ValidateRegistration(p); err != nil {
		return fmt.Errorf("API plugin: %w", err)
	}
	at := fmt.Sprintf("API plugin %s %q at %q", p.Type, p.Name, p.Endpoint)
	if err := ValidateAnnotations(p.Annotations); err != nil {
		return fmt.Errorf("%s: %w", at, err)
	}
	if y := p.RegisteredAt.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%s: registration time %v out of range", at, p.RegisteredAt)
	}
	return nil
}

// Save writes s to the file at path, atomically: it writes a temporary file
// in the same directory, flushes it to disk, renames it over path, and
// flushes the directory (not on Windows, where the rename writes through).
// A crash, or a power cut, leaves either the old file or the new one, and
// at worst a temporary file named path+".tmp-*" that Load never reads and
// a [Saver] removes when it starts. The file's mode is 0600. On failure
// the temporary file is removed, and the file at path is the old one
// unless the failure came after the rename (flushing the directory).
//
// Save refuses a State that Load would reject: one that breaks a rule of
// the Registry, or whose file would be larger than limit, in bytes (0 or
// less: MinStateLimit). Pass the limit Load will be given, the
// [StateLimit] of the agent's --max-plugins; a State of at most that many
// plugins always fits.
func Save(path string, s State, limit int64) error {
	return save(path, s, limit, osSaveFS())
}

// saveFS is the file system as save uses it: the operating system's
// (osSaveFS), or a test's that fails, or stops as a crash would, at a
// chosen step.
type saveFS struct {
	mkdirAll   func(dir string) error
	createTemp func(dir, pattern string) (tempFile, error) // as os.CreateTemp
	replace    func(oldpath, newpath string) error         // rename, replacing newpath
	syncDir    func(dir string) error
	remove     func(path string) error
}

// tempFile is the temporary file of save: an *os.File, or a test's.
type tempFile interface {
	io.Writer
	Name() string
	Sync() error
	Close() error
}

// osSaveFS returns the saveFS of the operating system.
func osSaveFS() saveFS {
	return saveFS{
		mkdirAll: func(dir string) error { return os.MkdirAll(dir, 0o750) },
		createTemp: func(dir, pattern string) (tempFile, error) {
			f, err := os.CreateTemp(dir, pattern) // mode 0600
			if err != nil {
				return nil, err
			}
			return f, nil
		},
		replace: replaceFile,
		syncDir: syncDir,
		remove:  os.Remove,
	}
}

// save is Save on the file system fsys.
func save(path string, s State, limit int64, fsys saveFS) (err error) {
	if err := s.check(); err != nil {
		return fmt.Errorf("save %s: invalid state: %w", path, err)
	}
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := fsys.mkdirAll(dir); err != nil {
		return fmt.Errorf("save %s: create directory: %w", path, bare(err))
	}
	f, err := fsys.createTemp(dir, base+".tmp-*")
	if err != nil {
		return fmt.Errorf("save %s: create temporary file: %w", path, bare(err))
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			fsys.remove(tmp) // gone already if the rename succeeded
		}
	}()
	limit = orMinStateLimit(limit)
	if err := writeState(&limitWriter{w: f, left: limit, limit: limit}, s); err != nil {
		f.Close()
		return fmt.Errorf("save %s: write temporary file: %w", path, bare(err))
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save %s: sync temporary file: %w", path, bare(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save %s: close temporary file: %w", path, bare(err))
	}
	if err := fsys.replace(tmp, path); err != nil {
		return fmt.Errorf("save %s: rename temporary file: %w", path, bare(err))
	}
	if err := fsys.syncDir(dir); err != nil {
		return fmt.Errorf("save %s: sync directory: %w", path, bare(err))
	}
	return nil
}

// writeState writes the state document of s to w, as
// json.MarshalIndent(s, "", "  ") would without escaping HTML, then a
// newline. It encodes one
// record at a time, so that the document of thousands of plugins is never
// held in memory whole, twice (compact, then indented).
func writeState(w io.Writer, s State) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	fmt.Fprintf(bw, "{\n  \"version\": %d,\n  \"revision\": %d,\n", StateVersion, s.Revision)
	if !s.Running {
		bw.WriteString("  \"clean\": true,\n")
	}
	bw.WriteString("  \"plugins\": ")
	var rec bytes.Buffer
	enc := json.NewEncoder(&rec)
	enc.SetEscapeHTML(false) // "<" stays one byte: see MaxRecordBytes
	enc.SetIndent("    ", "  ")
	list := func(n int, record func(i int) any) error {
		if n == 0 {
			bw.WriteString("[]")
			return nil
		}
		bw.WriteString("[\n")
		for i := range n {
			rec.Reset()
			if err := enc.Encode(record(i)); err != nil {
				return err
			}
			bw.WriteString("    ")
			bw.Write(bytes.TrimSuffix(rec.Bytes(), []byte("\n")))
			if i < n-1 {
				bw.WriteByte(',')
			}
			bw.WriteByte('\n')
		}
		bw.WriteString("  ]")
		return nil
	}
	if err := list(len(s.Plugins), func(i int) any { return ToJSON(s.Plugins[i]) }); err != nil {
		return err
	}
	if len(s.Pending) > 0 {
		bw.WriteString(",\n  \"pendingDeregistrations\": ")
		err := list(len(s.Pending), func(i int) any {
			pd := s.Pending[i]
			return pendingRecord{ToJSON(pd.Plugin), pd.Reason}
		})
		if err != nil {
			return err
		}
	}
	if s.Fleet != nil {
		rec.Reset()
		enc.SetIndent("  ", "  ")
		if err := enc.Encode(fleetRecordOf(s.Fleet)); err != nil {
			return err
		}
		bw.WriteString(",\n  \"fleet\": ")
		bw.Write(bytes.TrimSuffix(rec.Bytes(), []byte("\n")))
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// orMinStateLimit returns limit, or MinStateLimit if limit is 0 or less.
func orMinStateLimit(limit int64) int64 {
	if limit <= 0 {
		return MinStateLimit
	}
	return limit
}

// errTooLarge is the error of a limitWriter past its limit.
type errTooLarge struct{ limit int64 }

func (e errTooLarge) Error() string {
	return fmt.Sprintf("state larger than %d bytes (raise --max-plugins)", e.limit)
}

// limitWriter writes to w until limit bytes are written, then fails.
type limitWriter struct {
	w     io.Writer
	left  int64 // of limit
	limit int64
}

func (lw *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > lw.left {
		return 0, errTooLarge{lw.limit}
	}
	lw.left -= int64(len(p))
	return lw.w.Write(p)
}

// bare strips the path from an *fs.PathError or *os.LinkError, whose
// temporary file name would make every error message different.
func bare(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	if le, ok := errors.AsType[*os.LinkError](err); ok {
		return le.Err
	}
	return err
}

// Load reads the state file at path. A missing file gives an error
// matching fs.ErrNotExist: nothing to restore. A file that is not a valid
// state document of a version Load reads — bad JSON, anything after the
// object, an unknown field, or a record that [Save] would refuse — gives an
// error matching [ErrCorrupt]. The Plugins of the result are never nil;
// its Pending are nil when there are none.
//
// A file larger than limit bytes (0 or less: MinStateLimit) is
// corrupt, and is not read past the limit; see [Save].
func Load(path string, limit int64) (State, error) {
	f, err := os.Open(path)
	if err != nil {
		return State{}, err
	}
	defer f.Close()
	limit = orMinStateLimit(limit)
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return State{}, &fs.PathError{Op: "load", Path: path, Err: err}
	}
	s, err := decodeState(data, limit)
	if err != nil {
		return State{}, &fs.PathError{Op: "load", Path: path, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
	}
	return s, nil
}

// decodeState parses and checks a state document of at most limit bytes.
func decodeState(data []byte, limit int64) (State, error) {
	if int64(len(data)) > limit {
		return State{}, fmt.Errorf("larger than %d bytes (the limit of --max-plugins)", limit)
	}
	// The version first, so that a newer document is reported as such and
	// not as one with unknown fields.
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return State{}, err
	}
	switch {
	case v.Version == nil:
		return State{}, errors.New("no version")
	case *v.Version < minStateVersion || *v.Version > StateVersion:
		return State{}, fmt.Errorf("version %d, want %d to %d", *v.Version, minStateVersion, StateVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var s State
	if err := dec.Decode(&s); err != nil {
		return State{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return State{}, errors.New("data after the state object")
	}
	if err := s.check(); err != nil {
		return State{}, err
	}
	return s, nil
}

// QuarantineCorrupt moves the (corrupt) state file at path aside, to
// path+".corrupt-<unix seconds of now>", and returns the new name. It never
// overwrites a file: if the name is taken it tries the name followed by
// "-1", "-2" and so on.
func QuarantineCorrupt(path string, now time.Time) (string, error) {
	stem := fmt.Sprintf("%s.corrupt-%d", path, now.Unix())
	for i := 0; ; i++ {
		name := stem
		if i > 0 {
			name = fmt.Sprintf("%s-%d", stem, i)
		}
		err := renameNoReplace(path, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) || i == maxQuarantineSuffix {
			return "", err
		}
	}
}
