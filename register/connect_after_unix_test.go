//go:build unix

package register

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestConnectCheckedAfterTheConnect: the checks around a connect by path
// are made after it too, so that a change made while it ran (the socket
// bound again at its path, a directory below the plugin directory swapped
// for a symlink) fails the connect as "path changed" even though the
// checks before it passed. The connect here stands for the race: it makes
// the change, as another process would between the two checks.
func TestConnectCheckedAfterTheConnect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, sub, elsewhere string, other *sink)
		want   error
	}{
		{"socket replaced", replaceSocket, errSwapped},
		{"directory moved, a symlink to it in its place", moveAndLink, errSymlinked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sub, elsewhere := swapDirs(t)
			path := filepath.Join(sub, "a.sock")
			rawListener(t, path, (&sink{}).serve)
			backdate(t, path)
			before, err := socketAt(dir, path)
			if err != nil {
				t.Fatal(err)
			}
			connects := 0
			_, err = connectChecked(dir, path, before.id, func() error {
				connects++
				tc.change(t, sub, elsewhere, &sink{})
				return nil
			})
			if connects != 1 {
				t.Fatalf("connect ran %d times, want 1", connects)
			}
			if !errors.Is(err, errSwapped) || !errors.Is(err, tc.want) || !pathChanged(err) {
				t.Errorf("connectChecked = %v, want a path changed: %v", err, tc.want)
			}
		})
	}
}
