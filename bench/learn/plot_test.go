package learn

import (
	"bytes"
	"image/color"
	"image/png"
	"testing"
)

func TestPlotDrawsSeries(t *testing.T) {
	b, err := Plot("accuracy", "interactions", []float64{0, 100, 200}, map[string][]float64{"policy": {0.2, 0.5, 0.9}, "json": {0.9, -1, 0.8}},
		[]PlotMark{{At: 100, Label: "v1 promoted", Color: color.RGBA{200, 0, 0, 255}}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// "policy" (the second series by name: orange) is drawn in the plot area.
	found := 0
	for y := 40; y < 510; y++ {
		for x := 60; x < 810; x++ {
			r, g, bb, _ := img.At(x, y).RGBA()
			if r>>8 == 255 && g>>8 == 127 && bb>>8 == 14 {
				found++
			}
		}
	}
	if found < 100 {
		t.Fatalf("series line not drawn (%d pixels)", found)
	}
}
