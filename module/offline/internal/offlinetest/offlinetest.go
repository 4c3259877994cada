// Package offlinetest is what the offline packages' tests share: tile
// images, and running GDAL (which ./test.sh installs: gdal-bin and
// python3-gdal) on the files they write.
package offlinetest

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// Tile is an opaque PNG of w×h pixels that shows which tile it is: its
// background colour is made from z, x and y, and a dark square sits in its
// top-left quarter, so a tile placed in the wrong row, column or upside
// down reads back as different pixels.
func Tile(w, h int, idx gridset.Index) []byte {
	return Solid(w, h, color.NRGBA{uint8(40 + 50*idx.Z), uint8(idx.X * 37), uint8(idx.Y * 59), 255}, true)
}

// Solid is an opaque w×h PNG of one colour (with the marker square if
// marked): the kind of tile that repeats (open sea).
func Solid(w, h int, c color.NRGBA, marked bool) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := c
			if marked && x < w/4 && y < h/4 {
				p = color.NRGBA{10, 10, 10, 255}
			}
			img.SetNRGBA(x, y, p)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// RGBA decodes an image into 8-bit RGBA bytes, row by row, as GDAL's
// ReadRaster of bands 1-4 gives them (pixel interleaved).
func RGBA(t testing.TB, data []byte) []byte {
	t.Helper()
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	out := make([]byte, 0, 4*b.Dx()*b.Dy())
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			out = append(out, c.R, c.G, c.B, c.A)
		}
	}
	return out
}

// Python is Debian's python3, which has GDAL's bindings (python3-gdal);
// a python3 earlier on PATH (pyenv) may not.
const Python = "/usr/bin/python3"

// Need fails the test unless the GDAL programs are installed.
func Need(t testing.TB, programs ...string) {
	t.Helper()
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s not found: ./test.sh installs it (gdal-bin, python3-gdal)", p)
		}
	}
	if err := exec.Command(Python, "-c", "import osgeo.gdal").Run(); err != nil {
		t.Fatalf("%s cannot import osgeo.gdal: ./test.sh installs python3-gdal", Python)
	}
}

// Run runs a program and returns its standard output, failing the test
// with its standard error if it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// readTile is a Python script that prints, for the raster file argv[1]
// opened by GDAL at its full resolution, the RGBA pixels of the area whose
// top-left corner is (argv[2], argv[3]) in the raster's CRS and whose size
// is argv[4]×argv[5] pixels, as hex; with argv[6] given, it opens the
// overview of that index instead.
const readTile = `
import sys
from osgeo import gdal
gdal.UseExceptions()
ds = gdal.Open(sys.argv[1])
gt = ds.GetGeoTransform()
x0, y0, w, h = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
bands = [ds.GetRasterBand(i + 1) for i in range(4)]
res = gt[1]
if len(sys.argv) > 6:
    bands = [b.GetOverview(int(sys.argv[6])) for b in bands]
    res = gt[1] * ds.RasterXSize / bands[0].XSize
xoff = (x0 - gt[0]) / res
yoff = (gt[3] - y0) / res
if abs(xoff - round(xoff)) > 0.01 or abs(yoff - round(yoff)) > 0.01:
    sys.exit("tile corner falls between pixels: %r %r" % (xoff, yoff))
xoff, yoff = int(round(xoff)), int(round(yoff))
out = bytearray(w * h * 4)
for i, b in enumerate(bands):
    data = b.ReadRaster(xoff, yoff, w, h)
    out[i::4] = data
sys.stdout.write(out.hex())
`

// GDALPixels reads through GDAL the RGBA pixels of a w×h area of path
// whose top-left corner is (x, y) in the raster's CRS; overview < 0 reads
// the full resolution.
func GDALPixels(t testing.TB, path string, x, y float64, w, h, overview int) []byte {
	t.Helper()
	args := []string{"-c", readTile, path, ftoa(x), ftoa(y), itoa(w), itoa(h)}
	if overview >= 0 {
		args = append(args, itoa(overview))
	}
	out := Run(t, Python, args...)
	b := make([]byte, len(out)/2)
	for i := range b {
		b[i] = unhex(out[2*i])<<4 | unhex(out[2*i+1])
	}
	return b
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	panic("not hex")
}

// TempFile is a path in a test's own directory.
func TempFile(t testing.TB, name string) string {
	return t.TempDir() + string(os.PathSeparator) + name
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func itoa(i int) string { return strconv.Itoa(i) }

// ReadsBack checks that each (a reader's Each) hands over n tiles, every
// one equal to want of its place.
func ReadsBack(t testing.TB, each func(func(gridset.Index, []byte) error) error, n int, want func(gridset.Index) []byte) {
	t.Helper()
	got := 0
	if err := each(func(idx gridset.Index, data []byte) error {
		if !bytes.Equal(data, want(idx)) {
			return fmt.Errorf("tile %v differs", idx)
		}
		got++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("read %d tiles of %d", got, n)
	}
}
