package main

import (
	"encoding/csv"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/gateway/bench/soak/probe"
)

// writeResults writes dir/soak.csv and dir/soak.png.
func writeResults(dir string, rep *report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "soak.csv"))
	if err != nil {
		return err
	}
	if err := writeCSV(f, rep); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	p, err := os.Create(filepath.Join(dir, "soak.png"))
	if err != nil {
		return err
	}
	if err := png.Encode(p, plot(rep)); err != nil {
		p.Close()
		return err
	}
	return p.Close()
}

// writeCSV writes one line per sample.
func writeCSV(w io.Writer, rep *report) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"elapsed_s", "goroutines", "heap_alloc_bytes", "heap_inuse_bytes", "rss_bytes", "fds",
		"requests", "req_per_s", "status_2xx", "status_429", "status_5xx", "disconnects", "unexpected", "reloads"})
	for _, r := range rep.Rows {
		_ = cw.Write([]string{
			strconv.FormatFloat(r.Elapsed.Seconds(), 'f', 1, 64), strconv.Itoa(r.Goroutines),
			strconv.FormatInt(r.HeapAlloc, 10), strconv.FormatInt(r.HeapInuse, 10),
			strconv.FormatInt(r.RSS, 10), strconv.Itoa(r.FDs), strconv.FormatInt(r.Requests, 10),
			strconv.FormatFloat(r.RPS, 'f', 0, 64), strconv.FormatInt(r.S2xx, 10), strconv.FormatInt(r.S429, 10),
			strconv.FormatInt(r.S5xx, 10), strconv.FormatInt(r.Disconnects, 10), strconv.FormatInt(r.Unexpected, 10),
			strconv.FormatInt(r.Reloads, 10),
		})
	}
	cw.Flush()
	return cw.Error()
}

// markdown writes a table of about rowsWanted evenly spaced samples (the
// first and the last always included) plus the idle readings.
func markdown(w io.Writer, rep *report, rowsWanted int) {
	fmt.Fprintln(w, "| elapsed | goroutines | heap in use | RSS | fds | req/s | requests | 2xx | 429 | 5xx | disconnects | unexpected | reloads |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	idle := func(label string, s probe.Sample) {
		fmt.Fprintf(w, "| %s | %d | %.1f MiB | %.1f MiB | %d | | | | | | | | |\n",
			label, s.Goroutines, mib(s.HeapInuse), mib(s.RSS), s.FDs)
	}
	idle("idle before", rep.Before)
	n := len(rep.Rows)
	step := max(1, n/max(1, rowsWanted))
	for i, r := range rep.Rows {
		if i%step != 0 && i != n-1 {
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %.1f MiB | %.1f MiB | %d | %.0f | %d | %d | %d | %d | %d | %d | %d |\n",
			r.Elapsed.Round(time.Second), r.Goroutines, mib(r.HeapInuse), mib(r.RSS), r.FDs, r.RPS,
			r.Requests, r.S2xx, r.S429, r.S5xx, r.Disconnects, r.Unexpected, r.Reloads)
	}
	idle("idle after", rep.After)
}

// series is one panel of the plot.
type series struct {
	title string
	unit  string
	get   func(row) float64
	color color.RGBA
}

// plot draws one line chart per resource, stacked, with the y range and
// the time axis labelled in a built-in pixel font.
func plot(rep *report) *image.RGBA {
	panels := []series{
		{"GOROUTINES", "", func(r row) float64 { return float64(r.Goroutines) }, color.RGBA{0x1f, 0x77, 0xb4, 0xff}},
		{"HEAP IN USE", " MIB", func(r row) float64 { return mib(r.HeapInuse) }, color.RGBA{0xd6, 0x27, 0x28, 0xff}},
		{"RSS", " MIB", func(r row) float64 { return mib(r.RSS) }, color.RGBA{0x2c, 0xa0, 0x2c, 0xff}},
		{"OPEN FDS", "", func(r row) float64 { return float64(r.FDs) }, color.RGBA{0x94, 0x67, 0xbd, 0xff}},
		{"REQ PER S", "", func(r row) float64 { return r.RPS }, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}},
	}
	const (
		w, ph, left, right, top, bottom = 720, 130, 70, 20, 22, 22
	)
	img := image.NewRGBA(image.Rect(0, 0, w, ph*len(panels)))
	fill(img, img.Bounds(), color.RGBA{0xff, 0xff, 0xff, 0xff})
	grey := color.RGBA{0xbb, 0xbb, 0xbb, 0xff}
	black := color.RGBA{0x22, 0x22, 0x22, 0xff}
	rows := rep.Rows
	var tmax float64
	if len(rows) > 0 {
		tmax = rows[len(rows)-1].Elapsed.Seconds()
	}
	if tmax <= 0 {
		tmax = 1
	}
	for i, p := range panels {
		y0 := i * ph
		x1, x2 := left, w-right
		y1, y2 := y0+top, y0+ph-bottom
		lo, hi := 0.0, 1.0
		for _, r := range rows {
			hi = max(hi, p.get(r))
		}
		hi *= 1.1
		// Frame and grid.
		for _, f := range []float64{0, 0.5, 1} {
			y := y2 - int(f*float64(y2-y1))
			hline(img, x1, x2, y, grey)
			text(img, 4, y-3, trimFloat(lo+f*(hi-lo)), black)
		}
		vline(img, x1, y1, y2, black)
		hline(img, x1, x2, y2, black)
		for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
			x := x1 + int(f*float64(x2-x1))
			vline(img, x, y2, y2+3, black)
			lbl := strconv.Itoa(int(f*tmax)) + " S"
			text(img, x-len(lbl)*2, y2+6, lbl, black)
		}
		title := p.title
		if len(rows) > 0 {
			title += fmt.Sprintf("  FIRST %s%s  LAST %s%s  MAX %s%s", trimFloat(p.get(rows[0])), p.unit,
				trimFloat(p.get(rows[len(rows)-1])), p.unit, trimFloat(maxOf(rows, p.get)), p.unit)
		}
		text(img, x1, y0+6, title, black)
		// The line, thickened by one pixel.
		px := func(r row) (int, int) {
			x := x1 + int(r.Elapsed.Seconds()/tmax*float64(x2-x1))
			y := y2 - int((p.get(r)-lo)/(hi-lo)*float64(y2-y1))
			return x, y
		}
		for j := 1; j < len(rows); j++ {
			ax, ay := px(rows[j-1])
			bx, by := px(rows[j])
			line(img, ax, ay, bx, by, p.color)
			line(img, ax, ay+1, bx, by+1, p.color)
		}
	}
	return img
}

func trimFloat(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0")
	}
	return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func hline(img *image.RGBA, x1, x2, y int, c color.RGBA) {
	for x := x1; x <= x2; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y1, y2 int, c color.RGBA) {
	for y := y1; y <= y2; y++ {
		img.SetRGBA(x, y, c)
	}
}

// line draws a segment with Bresenham's algorithm.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// text draws s in a 3×5 pixel font scaled ×1 (4 px per character);
// characters without a glyph are left blank.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range s {
		if g, ok := glyphs[r]; ok {
			for row := 0; row < 5; row++ {
				for col := 0; col < 3; col++ {
					if g[row]&(4>>col) != 0 {
						img.SetRGBA(x+col, y+row, c)
					}
				}
			}
		}
		x += 4
	}
}

// glyphs is a 3×5 font: each row is 3 bits, most significant on the left.
var glyphs = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7},
	'4': {5, 5, 7, 1, 1}, '5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 1, 1},
	'8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7}, '.': {0, 0, 0, 0, 2}, '-': {0, 0, 7, 0, 0},
	'A': {2, 5, 7, 5, 5}, 'B': {6, 5, 6, 5, 6}, 'C': {7, 4, 4, 4, 7}, 'D': {6, 5, 5, 5, 6},
	'E': {7, 4, 6, 4, 7}, 'F': {7, 4, 6, 4, 4}, 'G': {7, 4, 5, 5, 7}, 'H': {5, 5, 7, 5, 5},
	'I': {7, 2, 2, 2, 7}, 'J': {1, 1, 1, 5, 7}, 'K': {5, 5, 6, 5, 5}, 'L': {4, 4, 4, 4, 7},
	'M': {5, 7, 7, 5, 5}, 'N': {6, 5, 5, 5, 5}, 'O': {7, 5, 5, 5, 7}, 'P': {7, 5, 7, 4, 4},
	'Q': {7, 5, 5, 7, 1}, 'R': {7, 5, 6, 5, 5}, 'S': {7, 4, 7, 1, 7}, 'T': {7, 2, 2, 2, 2},
	'U': {5, 5, 5, 5, 7}, 'V': {5, 5, 5, 5, 2}, 'W': {5, 5, 7, 7, 5}, 'X': {5, 5, 2, 5, 5},
	'Y': {5, 5, 2, 2, 2}, 'Z': {7, 1, 2, 4, 7},
}
