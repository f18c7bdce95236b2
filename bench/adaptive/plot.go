package main

import (
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strconv"
	"time"
)

// plot draws the learned limit (blue), the requests in flight (orange) and
// the upstream's capacity (grey steps) over time, with a grid every 5s and
// every 10 requests, labelled in a small bitmap font (the standard library
// has no text rendering).
func plot(path string, samples []sample, span time.Duration) error {
	const w, h, left, right, top, bottom = 960, 420, 50, 20, 20, 40
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fill(img, img.Bounds(), color.RGBA{255, 255, 255, 255})
	ymax := 10.0
	for _, s := range samples {
		ymax = max(ymax, s.learned*1.1, float64(s.capacity)*1.5, float64(s.inflight)*1.1)
	}
	ymax = math.Ceil(ymax/10) * 10
	x := func(t time.Duration) int { return left + int(float64(w-left-right)*t.Seconds()/span.Seconds()) }
	y := func(v float64) int { return h - bottom - int(float64(h-top-bottom)*v/ymax) }
	grid := color.RGBA{225, 225, 225, 255}
	ink := color.RGBA{60, 60, 60, 255}
	for s := 0; s <= int(span.Seconds()); s += 5 {
		line(img, x(time.Duration(s)*time.Second), top, x(time.Duration(s)*time.Second), h-bottom, grid)
		text(img, x(time.Duration(s)*time.Second)-4, h-bottom+8, strconv.Itoa(s), ink)
	}
	for v := 0; v <= int(ymax); v += 10 {
		line(img, left, y(float64(v)), w-right, y(float64(v)), grid)
		text(img, left-30, y(float64(v))-5, strconv.Itoa(v), ink)
	}
	line(img, left, h-bottom, w-right, h-bottom, ink)
	line(img, left, top, left, h-bottom, ink)
	text(img, w-right-14, h-bottom+24, "s", ink)
	series := []struct {
		c   color.RGBA
		val func(sample) float64
		th  int
	}{
		{color.RGBA{150, 150, 150, 255}, func(s sample) float64 { return float64(s.capacity) }, 2},
		{color.RGBA{240, 150, 40, 255}, func(s sample) float64 { return float64(s.inflight) }, 1},
		{color.RGBA{30, 90, 200, 255}, func(s sample) float64 { return s.learned }, 2},
	}
	for _, se := range series {
		for i := 1; i < len(samples); i++ {
			a, b := samples[i-1], samples[i]
			for d := 0; d < se.th; d++ {
				line(img, x(a.t), y(se.val(a))+d, x(b.t), y(se.val(b))+d, se.c)
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	for py := r.Min.Y; py < r.Max.Y; py++ {
		for px := r.Min.X; px < r.Max.X; px++ {
			img.SetRGBA(px, py, c)
		}
	}
}

// line draws from (x0, y0) to (x1, y1) (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	err := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * err
		if e2 >= dy {
			err += dy
			x0 += sx
		}
		if e2 <= dx {
			err += dx
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

// glyphs are 3×5 bitmaps, a row per string, of the characters labels use.
var glyphs = map[rune][5]string{
	'0': {"111", "101", "101", "101", "111"},
	'1': {"010", "110", "010", "010", "111"},
	'2': {"111", "001", "111", "100", "111"},
	'3': {"111", "001", "111", "001", "111"},
	'4': {"101", "101", "111", "001", "001"},
	'5': {"111", "100", "111", "001", "111"},
	'6': {"111", "100", "111", "101", "111"},
	'7': {"111", "001", "010", "010", "010"},
	'8': {"111", "101", "111", "101", "111"},
	'9': {"111", "101", "111", "001", "111"},
	's': {"000", "111", "100", "011", "111"},
}

// text draws s at (x, y), each glyph's pixel 2×2.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range s {
		g, ok := glyphs[r]
		if ok {
			for gy, row := range g {
				for gx, b := range row {
					if b == '1' {
						fill(img, image.Rect(x+2*gx, y+2*gy, x+2*gx+2, y+2*gy+2), c)
					}
				}
			}
		}
		x += 8
	}
}
