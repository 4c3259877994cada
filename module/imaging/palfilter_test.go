package imaging

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"testing"
)

// TestPalettedFilters: quantized tiles written with the lightness-ordered
// palette and filtered rows where the tile's smooth changes or a band
// trial say it pays decode to the same pixels, are never larger in total
// on any bench set than written unfiltered or with the trial on every
// tile, and are at least 10 % smaller on shaded relief (measured: 14 %;
// every other set within 0.1 %).
func TestPalettedFilters(t *testing.T) {
	set0, err := pngSettingsOf(PNGDefault)
	if err != nil {
		t.Fatal(err)
	}
	encodeAll := func(tiles []*image.Paletted) (int, [][]byte) {
		total, out := 0, make([][]byte, len(tiles))
		for i, p := range tiles {
			var b bytes.Buffer
			if err := encodePNG(&b, p, set0); err != nil {
				t.Fatal(err)
			}
			total += b.Len()
			out[i] = b.Bytes()
		}
		return total, out
	}
	for _, set := range benchSets() {
		tiles := make([]*image.Paletted, len(set.tiles))
		for i, tile := range set.tiles {
			tiles[i] = quantize(tile, 256, false)
		}
		with, encoded := encodeAll(tiles)
		old := paletteFilterMin
		paletteFilterMin = 257
		without, _ := encodeAll(tiles)
		paletteFilterMin = old
		// The trial on every tile, as before smoothShare decided most
		// tiles without it: deciding so must cost no bytes.
		flat, tone := flatShare, toneShare
		flatShare, toneShare = -1, 2
		trialled, _ := encodeAll(tiles)
		flatShare, toneShare = flat, tone
		t.Logf("%s: %d bytes, %d unfiltered (%.3f×), %d with the trial on every tile", set.name, with, without, float64(with)/float64(without), trialled)
		if with > without {
			t.Errorf("%s: %d bytes with the filter trial, %d without", set.name, with, without)
		}
		if with > trialled {
			t.Errorf("%s: %d bytes, %d with the trial on every tile", set.name, with, trialled)
		}
		if set.name == "synthetic-hillshade" && float64(with) > 0.9*float64(without) {
			t.Errorf("%s: %d bytes, want at most 0.9× the unfiltered %d", set.name, with, without)
		}
		for i, b := range encoded {
			m, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s tile %d: %v", set.name, i, err)
			}
			if psnr := PSNR(m, tiles[i]); !math.IsInf(psnr, 1) {
				t.Fatalf("%s tile %d: decodes to other pixels (PSNR %.2f dB)", set.name, i, psnr)
			}
		}
	}
}
