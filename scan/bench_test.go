package scan

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// socketTree makes n socket files, 100 per subdirectory, bound and closed so
// that no descriptors stay open.
func socketTree(b *testing.B, n int) string {
	return socketTreeIn(b, n, 100)
}

// socketTreeIn makes n socket files, perDir per subdirectory.
func socketTreeIn(b *testing.B, n, perDir int) string {
	root := tempDir(b)
	for i := range n {
		p := filepath.Join(root, fmt.Sprintf("d%03d", i/perDir), fmt.Sprintf("s%03d.sock", i%perDir))
		if i%perDir == 0 {
			socketFile(b, p) // makes the directory
			continue
		}
		if err := makeSocketFile(p); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// BenchmarkScan measures full scans.
func BenchmarkScan(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) {
			needUnixSockets(b)
			s, err := New([]string{socketTree(b, n)}, nil)
			if err != nil {
				b.Fatal(err)
			}
			s.FullScanEvery = 1
			for b.Loop() {
				snap, err := s.Scan()
				if err != nil || len(snap.Entries) != n {
					b.Fatalf("Scan() = %d entries, %v; want %d", len(snap.Entries), err, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		})
	}
}

// BenchmarkScanIdle measures incremental scans of a tree of 100 directories
// that does not change: one stat per directory and no directory read, and
// the previous Snapshot returned as it is, with no copy of its entries.
func BenchmarkScanIdle(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) {
			needUnixSockets(b)
			root := socketTreeIn(b, n, n/100)
			// Directories changed in the last few seconds are racy, and read
			// again every scan.
			age(b, root)
			s, err := New([]string{root}, nil)
			if err != nil {
				b.Fatal(err)
			}
			s.FullScanEvery = 0
			first, err := s.Scan()
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				snap, err := s.Scan()
				if err != nil || len(snap.Entries) != n || &snap.Entries[0] != &first.Entries[0] {
					b.Fatalf("Scan() = %d entries, %v; want the %d of the first scan", len(snap.Entries), err, n)
				}
			}
		})
	}
}

// BenchmarkBareReadDirStat is the floor for BenchmarkScan: ReadDir and one
// fstatat per socket, nothing else.
func BenchmarkBareReadDirStat(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("sockets=%d", n), func(b *testing.B) {
			if _, err := bareScan(""); errors.Is(err, errors.ErrUnsupported) {
				b.Skip("no bare loop on this OS")
			}
			needUnixSockets(b)
			root := socketTree(b, n)
			for b.Loop() {
				got, err := bareScan(root)
				if err != nil || got != n {
					b.Fatalf("bareScan() = %d, %v; want %d", got, err, n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		})
	}
}

func BenchmarkDiff(b *testing.B) {
	const n = 10000
	var old, new Snapshot
	for i := range n {
		e := Entry{Path: fmt.Sprintf("/run/plugins/d%03d/s%03d.sock", i/100, i%100), ID: ID{Ino: uint64(i)}}
		switch i % 100 {
		case 0: // removed
			old.Entries = append(old.Entries, e)
		case 1: // added
			new.Entries = append(new.Entries, e)
		case 2: // replaced
			old.Entries = append(old.Entries, e)
			e.ID.Mtime++
			new.Entries = append(new.Entries, e)
		default:
			old.Entries = append(old.Entries, e)
			new.Entries = append(new.Entries, e)
		}
	}
	for b.Loop() {
		if c := Diff(old, new); len(c.Replaced) != n/100 {
			b.Fatalf("Diff() replaced %d, want %d", len(c.Replaced), n/100)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
}

// BenchmarkDiffUnchanged measures the Diff of an idle tick: Scan returns
// the previous Snapshot itself when nothing changed, and Diff of a Snapshot
// with itself returns at once.
func BenchmarkDiffUnchanged(b *testing.B) {
	const n = 10000
	var s Snapshot
	for i := range n {
		s.Entries = append(s.Entries, Entry{Path: fmt.Sprintf("/run/plugins/d%03d/s%03d.sock", i/100, i%100), ID: ID{Ino: uint64(i)}})
	}
	for b.Loop() {
		if c := Diff(s, s); !c.Empty() {
			b.Fatalf("Diff(s, s) = %v, want no changes", c)
		}
	}
}
