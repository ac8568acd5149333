package main

import (
	"math/rand/v2"
	"strings"
	"testing"
	"text/tabwriter"
)

// tabwriterTable is what text/tabwriter writes for rows, configured as
// table claims to lay them out.
func tabwriterTable(t *testing.T, rows [][]string) string {
	t.Helper()
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, tablePadding, ' ', 0)
	for _, r := range rows {
		if _, err := tw.Write([]byte(strings.Join(r, "\t") + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func layOut(t *testing.T, rows [][]string) string {
	t.Helper()
	var tb table
	for _, r := range rows {
		tb.row(r...)
	}
	var b strings.Builder
	if err := tb.flush(&b); err != nil {
		t.Fatal(err)
	}
	if len(tb.rows) != 0 {
		t.Errorf("flush left %d rows in the table", len(tb.rows))
	}
	return b.String()
}

// TestTableMatchesTabwriter: a table is laid out byte for byte as
// text/tabwriter lays out the same rows: columns as wide as their widest
// cell in runes (wide and combining characters, quoted strings), empty
// cells and columns, one row, one column, none.
func TestTableMatchesTabwriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows [][]string
	}{
		{"none", nil},
		{"one row", [][]string{{"TYPE", "NAME", "SOURCE"}}},
		{"one column", [][]string{{"a"}, {"bbb"}, {""}}},
		{"plugins", [][]string{
			{"TYPE", "NAME", "ENDPOINT", "VERSIONS", "REGISTERED", "SOURCE"},
			{"CSIPlugin", "hostpath.csi.k8s.io", "/var/lib/kubelet/plugins/csi-hostpath/csi.sock", "1.0.0", "2026-01-02T03:04:05Z", "/var/lib/kubelet/plugins_registry/hostpath.csi.k8s.io-reg.sock"},
			{"DRAPlugin", "gpu.example.com", "/run/dra.sock", "", "2026-01-02T03:04:05Z", "api (owner x)"},
		}},
		{"wide and combining characters", [][]string{{"日本語", "e\u0301", "x"}, {"ab", "日", "y"}, {"", "", ""}}},
		{"quoted", [][]string{{`"a\tb"`, `"\xff"`, "z"}, {"a", "b", "c"}}},
		{"an empty column", [][]string{{"a", "", "b"}, {"c", "", "d"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := layOut(t, tc.rows), tabwriterTable(t, tc.rows); got != want {
				t.Errorf("table:\n%q\ntabwriter:\n%q", got, want)
			}
		})
	}
	// And tables of random cells, as printable leaves them.
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("ab/.-_ 日é\u0301\"\\")
	for range 500 {
		rows := make([][]string, 1+r.IntN(5))
		cols := 1 + r.IntN(7)
		for i := range rows {
			rows[i] = make([]string, cols)
			for j := range rows[i] {
				cell := make([]rune, r.IntN(12))
				for k := range cell {
					cell[k] = alphabet[r.IntN(len(alphabet))]
				}
				rows[i][j] = printable(string(cell))
			}
		}
		if got, want := layOut(t, rows), tabwriterTable(t, rows); got != want {
			t.Fatalf("rows %q:\ntable:\n%q\ntabwriter:\n%q", rows, got, want)
		}
	}
}
