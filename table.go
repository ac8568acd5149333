package main

import (
	"io"
	"strings"
	"unicode/utf8"
)

// tablePadding is the number of spaces between two columns of a table.
const tablePadding = 2

// table lays out rows of cells in columns, as text/tabwriter does with a
// padding of tablePadding spaces and no flags when every row has as many
// cells: each cell but the last of its row is padded with spaces to the
// width (in runes) of the widest cell of its column, plus tablePadding.
// The cells hold no tab, newline or other control character (printable).
type table struct {
	rows [][]string
}

// row adds a row of cells.
func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

// flush writes the rows to w, if any, and empties t.
func (t *table) flush(w io.Writer) error {
	if len(t.rows) == 0 {
		return nil
	}
	var widths []int
	for _, r := range t.rows {
		for i, c := range r[:len(r)-1] {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r[:len(r)-1] {
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]+tablePadding-utf8.RuneCountInString(c)))
		}
		b.WriteString(r[len(r)-1])
		b.WriteByte('\n')
	}
	t.rows = t.rows[:0]
	_, err := io.WriteString(w, b.String())
	return err
}
