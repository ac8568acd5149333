package state

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

	"github.com/plugreg/plugreg/plugins"
	"github.com/plugreg/plugreg/plugins/codec"
	"github.com/plugreg/plugreg/plugins/rules"
	"github.com/plugreg/plugreg/statecache"
)

// Version is the version of the state document that Save writes.
// Load reads it and version 1, whose records are plugins of JSON schema 0
// (see codec.JSONSchema) and leave out the keys that are empty, false or null.
const Version = 2

// minVersion is the oldest version of the state document that Load
// reads.
const minVersion = 1

// ErrCorrupt is matched by the errors of [Load] for a state file that
// exists but cannot be used: not JSON, another version, or records that
// break the Registry's rules. [QuarantineCorrupt] moves such a file aside.
var ErrCorrupt = errors.New("state: corrupt state file")

// maxQuarantineSuffix bounds the numbered names QuarantineCorrupt tries.
const maxQuarantineSuffix = 1000

// stateDoc is the JSON form of a State, which Load decodes; writeState
// encodes the same fields.
type stateDoc struct {
	Version  int    `json:"version"`
	Revision uint64 `json:"revision"`
	// Clean is left out when false, so that a file without it (written
	// while the agent ran, or by an agent that did not know the field)
	// stays readable by any agent, and means "not clean".
	Clean   bool               `json:"clean,omitempty"`
	Plugins []codec.PluginJSON `json:"plugins"`
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
	codec.PluginJSON
	Reason statecache.Reason `json:"reason"` // its text (Reason.MarshalText)
}

// Marshal returns the state document of s, version Version, as Save
// writes it, without checking s. Times are written in UTC.
func Marshal(s plugins.State) ([]byte, error) {
	var b bytes.Buffer
	if err := writeState(&b, s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Unmarshal reads a state document. It rejects unknown fields but does
// not check the version or the records; Load does.
func Unmarshal(data []byte) (plugins.State, error) {
	var s plugins.State
	err := unmarshalFrom(json.NewDecoder(bytes.NewReader(data)), &s)
	return s, err
}

// unmarshalFrom reads the next state document of dec into s.
func unmarshalFrom(dec *json.Decoder, s *plugins.State) error {
	dec.DisallowUnknownFields()
	var d stateDoc
	if err := dec.Decode(&d); err != nil {
		return err
	}
	*s = plugins.State{Version: d.Version, Revision: d.Revision, Running: !d.Clean, Plugins: make([]plugins.Plugin, len(d.Plugins))}
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
		s.Pending = append(s.Pending, plugins.PendingDeregistration{Plugin: p, Reason: r.Reason})
	}
	s.Fleet = d.Fleet.lease()
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
// less: MinLimit). Pass the limit Load will be given, the
// [Limit] of the agent's --max-plugins; a State of at most that many
// plugins always fits.
func Save(path string, s plugins.State, limit int64) error {
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
func save(path string, s plugins.State, limit int64, fsys saveFS) (err error) {
	if err := s.Check(); err != nil {
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
	limit = orMinLimit(limit)
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

// writeState writes the state document of s to w: one JSON object whose
// keys are one to a line, and whose records (each plugin, each pending
// deregistration, the fleet lease) are compact JSON, one to a line, as
// json.Marshal gives them without escaping HTML; then a newline. It
// encodes one record at a time, so that the document of thousands of
// plugins is never held in memory whole. A record to a line keeps the
// file readable and greppable, and costs half the CPU of indented records,
// which the Saver writes several times over during a burst of
// registrations.
func writeState(w io.Writer, s plugins.State) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	fmt.Fprintf(bw, "{\n  \"version\": %d,\n  \"revision\": %d,\n", Version, s.Revision)
	if !s.Running {
		bw.WriteString("  \"clean\": true,\n")
	}
	bw.WriteString("  \"plugins\": ")
	var rec bytes.Buffer
	enc := json.NewEncoder(&rec)
	enc.SetEscapeHTML(false) // "<" stays one byte: see MaxRecordBytes
	encode := func(v any) ([]byte, error) {
		rec.Reset()
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(rec.Bytes(), []byte("\n")), nil
	}
	list := func(n int, record func(i int) any) error {
		if n == 0 {
			bw.WriteString("[]")
			return nil
		}
		bw.WriteString("[\n")
		for i := range n {
			b, err := encode(record(i))
			if err != nil {
				return err
			}
			bw.WriteString("    ")
			bw.Write(b)
			if i < n-1 {
				bw.WriteByte(',')
			}
			bw.WriteByte('\n')
		}
		bw.WriteString("  ]")
		return nil
	}
	if err := list(len(s.Plugins), func(i int) any { return codec.ToJSON(s.Plugins[i]) }); err != nil {
		return err
	}
	if len(s.Pending) > 0 {
		bw.WriteString(",\n  \"pendingDeregistrations\": ")
		err := list(len(s.Pending), func(i int) any {
			pd := s.Pending[i]
			return pendingRecord{codec.ToJSON(pd.Plugin), pd.Reason}
		})
		if err != nil {
			return err
		}
	}
	if s.Fleet != nil {
		b, err := encode(fleetRecordOf(s.Fleet))
		if err != nil {
			return err
		}
		bw.WriteString(",\n  \"fleet\": ")
		bw.Write(b)
	}
	bw.WriteString("\n}\n")
	return bw.Flush()
}

// orMinLimit returns limit, or MinLimit if limit is 0 or less.
func orMinLimit(limit int64) int64 {
	if limit <= 0 {
		return MinLimit
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
// A file larger than limit bytes (0 or less: MinLimit) is
// corrupt, and is not read past the limit; see [Save].
func Load(path string, limit int64) (plugins.State, error) {
	f, err := os.Open(path)
	if err != nil {
		return plugins.State{}, err
	}
	defer f.Close()
	limit = orMinLimit(limit)
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return plugins.State{}, &fs.PathError{Op: "load", Path: path, Err: err}
	}
	s, err := decodeState(data, limit)
	if err != nil {
		return plugins.State{}, &fs.PathError{Op: "load", Path: path, Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
	}
	return s, nil
}

// decodeState parses and checks a state document of at most limit bytes.
func decodeState(data []byte, limit int64) (plugins.State, error) {
	if int64(len(data)) > limit {
		return plugins.State{}, fmt.Errorf("larger than %d bytes (the limit of --max-plugins)", limit)
	}
	// The version first, so that a newer document is reported as such and
	// not as one with unknown fields.
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return plugins.State{}, err
	}
	switch {
	case v.Version == nil:
		return plugins.State{}, errors.New("no version")
	case *v.Version < minVersion || *v.Version > Version:
		return plugins.State{}, fmt.Errorf("version %d, want %d to %d", *v.Version, minVersion, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var s plugins.State
	if err := unmarshalFrom(dec, &s); err != nil {
		return plugins.State{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return plugins.State{}, errors.New("data after the state object")
	}
	if err := s.Check(); err != nil {
		return plugins.State{}, err
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

// fleetRecordBytes bounds the "fleet" member of the state file: each of
// the two strings at most six bytes a byte (a control character is
// \u00XX), the numbers and the field names.
const fleetRecordBytes = 2*6*rules.MaxFleetLeaseText + 128

// fleetRecord is the JSON form of a FleetLease.
type fleetRecord struct {
	Lease   int64  `json:"lease"`
	Cluster uint64 `json:"cluster"`
	Prefix  string `json:"prefix"`
	Node    string `json:"node"`
}

// fleetRecordOf returns the JSON form of l, nil for nil.
func fleetRecordOf(l *plugins.FleetLease) *fleetRecord {
	if l == nil {
		return nil
	}
	return &fleetRecord{Lease: l.ID, Cluster: l.Cluster, Prefix: l.Prefix, Node: l.Node}
}

// lease returns the FleetLease of r, nil for nil.
func (r *fleetRecord) lease() *plugins.FleetLease {
	if r == nil {
		return nil
	}
	return &plugins.FleetLease{ID: r.Lease, Cluster: r.Cluster, Prefix: r.Prefix, Node: r.Node}
}
