package handler

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/plugreg/plugreg/scan"
)

// Kinds of handler that a --handler value names.
const (
	KindExec = "exec" // TYPE=exec:PATH, a program run for each call: Exec
	KindGRPC = "grpc" // TYPE=grpc:SOCKET, a plugreg.v1.Handler service: GRPC
)

// handlerSyntax ends the error for a malformed --handler value.
const handlerSyntax = "want TYPE=exec:PATH or TYPE=grpc:SOCKET, e.g. CSIPlugin=exec:/usr/local/bin/csi-handler"

// HandlerSpec is a parsed --handler value: the handler of the plugins of
// one type. Parsing starts and connects nothing: the caller makes an
// [Exec] or a [GRPC] of it when the agent starts.
type HandlerSpec struct {
	Type string // the plugin type
	Kind string // KindExec or KindGRPC
	Path string // absolute: the program (exec) or the handler's unix socket (grpc)
}

// String returns s as a --handler value.
func (s HandlerSpec) String() string { return s.Type + "=" + s.Kind + ":" + s.Path }

// ParseHandler parses one --handler value, "TYPE=exec:PATH" or
// "TYPE=grpc:SOCKET". TYPE follows the rules of ParseAccept. PATH must
// name an executable file; a relative one is made absolute against the
// working directory. SOCKET must be an absolute path that fits in a unix
// socket address, but need not exist: the handler may start after the
// agent. Errors read well after `invalid value "..." for flag -handler: `.
func ParseHandler(s string) (HandlerSpec, error) {
	typ, spec, ok := strings.Cut(s, "=")
	if !ok {
		return HandlerSpec{}, errors.New(handlerSyntax)
	}
	if typ == "" {
		return HandlerSpec{}, fmt.Errorf("empty plugin type, %s", handlerSyntax)
	}
	if err := checkType(typ); err != nil {
		return HandlerSpec{}, err
	}
	kind, path, ok := strings.Cut(spec, ":")
	var err error
	switch {
	case ok && kind == KindExec:
		path, err = checkProgram(typ, path)
	case ok && kind == KindGRPC:
		err = checkHandlerSocket(typ, path)
	default:
		err = fmt.Errorf("unknown handler %q for type %s, %s", spec, typ, handlerSyntax)
	}
	if err != nil {
		return HandlerSpec{}, err
	}
	return HandlerSpec{Type: typ, Kind: kind, Path: path}, nil
}

// checkProgram returns the absolute path of the exec handler path of typ,
// or why it cannot be run.
func checkProgram(typ, path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("no program for type %s, %s", typ, handlerSyntax)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("program %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("program %s: %w", path, pathErrCause(err))
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("program %s is not a regular file", path)
	}
	if _, err := exec.LookPath(abs); err != nil {
		return "", fmt.Errorf("program %s is not executable", path)
	}
	return abs, nil
}

// checkHandlerSocket returns an error unless path can be the socket of the
// gRPC handler of typ.
func checkHandlerSocket(typ, path string) error {
	switch {
	case path == "":
		return fmt.Errorf("no socket for type %s, %s", typ, handlerSyntax)
	case !filepath.IsAbs(path):
		return fmt.Errorf("socket %s is not an absolute path", path)
	case len(path) > scan.MaxSocketPath:
		return fmt.Errorf("socket %s: %w", path, &scan.PathTooLongError{Path: path, Len: len(path), Limit: scan.MaxSocketPath})
	}
	return nil
}

// pathErrCause returns the cause of an *fs.PathError, without the path
// that the message around it names already, or err itself.
func pathErrCause(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err
	}
	return err
}
