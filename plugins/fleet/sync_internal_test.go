package fleet

import (
	"crypto/sha256"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDiffSortedByKey: the changes of a sync are sorted by key, puts and
// deletes together, so each transaction of write takes the next keys in
// order; an unchanged key is no change.
func TestDiffSortedByKey(t *testing.T) {
	digest := func(v string) valueDigest { return sha256.Sum256([]byte(v)) }
	r := &run{published: map[string]valueDigest{
		"k/e": digest("5"), "k/a": digest("1"), "k/c": digest("old"), "k/g": otherLease,
	}}
	want := map[string]string{"k/f": "6", "k/a": "1", "k/c": "3", "k/b": "2", "k/g": "7"}
	got := r.diff(want)
	wantCS := []change{
		{key: "k/b", value: "2", digest: digest("2")},
		{key: "k/c", value: "3", digest: digest("3")},
		{key: "k/e", del: true},
		{key: "k/f", value: "6", digest: digest("6")},
		{key: "k/g", value: "7", digest: digest("7")},
	}
	if diff := cmp.Diff(wantCS, got, cmp.AllowUnexported(change{})); diff != "" {
		t.Errorf("diff (-want +got):\n%s", diff)
	}
}
