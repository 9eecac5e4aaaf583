package learn

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"sort"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// PlotMark is a vertical line on a plot (a version change, a drift).
type PlotMark struct {
	At    float64
	Label string
	Color color.RGBA
}

// Plot draws one line per series (y in [0,1] against x) with vertical
// marks and a legend, and returns a PNG.
func Plot(title, xLabel string, xs []float64, series map[string][]float64, marks []PlotMark) ([]byte, error) {
	const W, H, left, right, top, bottom = 1000, 560, 60, 190, 40, 50
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{255, 255, 255, 255}}, image.Point{}, draw.Src)
	text := func(x, y int, s string, c color.Color) {
		d := &font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
		d.DrawString(s)
	}
	grey := color.RGBA{200, 200, 200, 255}
	black := color.RGBA{0, 0, 0, 255}
	pw, ph := W-left-right, H-top-bottom
	xmin, xmax := 0.0, 1.0
	if len(xs) > 0 {
		xmin, xmax = xs[0], xs[len(xs)-1]
		if xmax == xmin {
			xmax = xmin + 1
		}
	}
	px := func(x float64) int { return left + int(float64(pw)*(x-xmin)/(xmax-xmin)) }
	py := func(y float64) int { return top + ph - int(float64(ph)*y) }
	line := func(x0, y0, x1, y1 int, c color.Color) {
		dx, dy := x1-x0, y1-y0
		n := max(abs(dx), abs(dy), 1)
		for i := 0; i <= n; i++ {
			img.Set(x0+dx*i/n, y0+dy*i/n, c)
			img.Set(x0+dx*i/n, y0+dy*i/n+1, c)
		}
	}
	for i := 0; i <= 10; i++ {
		y := py(float64(i) / 10)
		line(left, y, left+pw, y, grey)
		text(left-34, y+4, fmt.Sprintf("%.1f", float64(i)/10), black)
	}
	line(left, top, left, top+ph, black)
	line(left, top+ph, left+pw, top+ph, black)
	for i := 0; i <= 5; i++ {
		x := xmin + (xmax-xmin)*float64(i)/5
		text(px(x)-12, top+ph+16, fmt.Sprintf("%.0f", x), black)
	}
	text(left+pw/2-len(xLabel)*3, H-12, xLabel, black)
	text(left, 24, title, black)
	for i, m := range marks {
		x := px(m.At)
		for y := top; y < top+ph; y += 6 {
			line(x, y, x, y+3, m.Color)
		}
		text(x+3, top+12+13*(i%4), m.Label, m.Color)
	}
	palette := []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}}
	names := make([]string, 0, len(series))
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	for si, n := range names {
		c := palette[si%len(palette)]
		ys := series[n]
		for i := 1; i < len(ys) && i < len(xs); i++ {
			if ys[i-1] < 0 || ys[i] < 0 { // negative = no data in that window
				continue
			}
			line(px(xs[i-1]), py(ys[i-1]), px(xs[i]), py(ys[i]), c)
		}
		ly := top + 20 + 18*si
		line(W-right+10, ly, W-right+30, ly, c)
		text(W-right+36, ly+4, n, black)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
