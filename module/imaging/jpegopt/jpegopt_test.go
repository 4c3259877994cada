package jpegopt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// samples are JPEGs as Go's image/jpeg writes them: the MapServer tiles of
// the imaging package's testdata and synthetic images with the awkward
// cases (sizes that are not whole MCUs, one pixel, one colour, noise that
// uses every AC symbol, grayscale), at several qualities.
func samples(t testing.TB) map[string][]byte {
	t.Helper()
	samplesOnce.Do(func() { samplesMap, samplesErr = makeSamples() })
	if samplesErr != nil {
		t.Fatal(samplesErr)
	}
	return samplesMap
}

var (
	samplesOnce sync.Once
	samplesMap  map[string][]byte
	samplesErr  error
)

func makeSamples() (map[string][]byte, error) {
	var imgs = map[string]image.Image{}
	paths, err := filepath.Glob("../testdata/mapserver/*.png")
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no MapServer tiles in ../testdata/mapserver: %v", err)
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		m, err := png.Decode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p, err)
		}
		imgs[filepath.Base(p)] = m
		// One 256-pixel tile of the metatile too, as the cache encodes.
		if b := m.Bounds(); b.Dx() > 256 && b.Dy() > 256 {
			imgs[filepath.Base(p)+"/tile"] = m.(interface {
				SubImage(image.Rectangle) image.Image
			}).SubImage(image.Rect(b.Min.X+256, b.Min.Y+256, b.Min.X+512, b.Min.Y+512))
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(w, h int) image.Image {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := range m.Pix {
			m.Pix[i] = byte(rng.IntN(256))
		}
		return m
	}
	imgs["noise-256"] = noise(256, 256)
	imgs["noise-17x9"] = noise(17, 9)
	imgs["noise-1x1"] = noise(1, 1)
	imgs["noise-300x131"] = noise(300, 131)
	flat := image.NewRGBA(image.Rect(0, 0, 256, 256))
	draw.Draw(flat, flat.Rect, image.NewUniform(color.RGBA{170, 211, 223, 255}), image.Point{}, draw.Src)
	imgs["flat"] = flat
	grad := image.NewRGBA(image.Rect(0, 0, 256, 256))
	for y := range 256 {
		for x := range 256 {
			grad.SetRGBA(x, y, color.RGBA{byte(x), byte(y), byte(x ^ y), 255})
		}
	}
	imgs["gradient"] = grad
	gray := image.NewGray(image.Rect(0, 0, 123, 77))
	for i := range gray.Pix {
		gray.Pix[i] = byte(i * 7 % 251)
	}
	imgs["gray-123x77"] = gray

	out := map[string][]byte{}
	for name, m := range imgs {
		for _, q := range []int{1, 50, 85, 100} {
			var b bytes.Buffer
			if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: q}); err != nil {
				return nil, err
			}
			out[fmt.Sprintf("%s/q%d", name, q)] = b.Bytes()
		}
	}
	return out, nil
}

func decode(t *testing.T, name string, b []byte) image.Image {
	t.Helper()
	m, err := jpeg.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: decode: %v", name, err)
	}
	return m
}

func samePixels(a, b image.Image) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if a.At(x, y) != b.At(x, y) {
				return false
			}
		}
	}
	return true
}

// TestOptimizeKeepsPixels: every sample decodes to the same pixels before
// and after, is never larger, and a second pass finds nothing more to save.
func TestOptimizeKeepsPixels(t *testing.T) {
	var before, after int
	for name, src := range samples(t) {
		keep := bytes.Clone(src)
		opt, err := Optimize(src)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(src, keep) {
			t.Fatalf("%s: Optimize modified its input", name)
		}
		if !samePixels(decode(t, name, src), decode(t, name, opt)) {
			t.Errorf("%s: pixels differ after optimizing", name)
		}
		if len(opt) > len(src) {
			t.Errorf("%s: optimized %d bytes, more than the input's %d", name, len(opt), len(src))
		}
		again, err := Optimize(opt)
		if err != nil {
			t.Errorf("%s: optimizing again: %v", name, err)
		} else if len(again) != len(opt) {
			t.Errorf("%s: a second pass changed the size %d → %d", name, len(opt), len(again))
		}
		before += len(src)
		after += len(opt)
	}
	t.Logf("all samples: %d → %d bytes (%.3f×)", before, after, float64(after)/float64(before))
}

// TestOptimizeSavesOnMapTiles: 256-pixel MapServer tiles at the cache's
// default quality shrink by at least 2.5 % (3–22 % measured).
func TestOptimizeSavesOnMapTiles(t *testing.T) {
	for name, src := range samples(t) {
		if !strings.Contains(name, ".png/tile/") || !strings.HasSuffix(name, "/q85") {
			continue
		}
		opt, err := Optimize(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ratio := float64(len(opt)) / float64(len(src))
		t.Logf("%s: %d → %d bytes (%.3f×)", name, len(src), len(opt), ratio)
		if ratio > 0.975 {
			t.Errorf("%s: %d → %d bytes (%.3f×), want at most 0.975×", name, len(src), len(opt), ratio)
		}
	}
}

// TestOptimizeMatchesLibjpeg compares with libjpeg-turbo's own optimizer,
// jpegtran -optimize: the same Huffman tables and the same scan bytes where
// the image is whole MCUs (every tile; jpegtran re-codes the padding
// blocks of a partial MCU, which Optimize keeps as they are), and
// libjpeg-turbo's decoder (what browsers, GDAL and QGIS use) gives the same
// pixels for our file as for the original.
func TestOptimizeMatchesLibjpeg(t *testing.T) {
	jpegtran, err1 := exec.LookPath("jpegtran")
	djpeg, err2 := exec.LookPath("djpeg")
	if err1 != nil || err2 != nil {
		t.Fatal("jpegtran and djpeg (Debian package libjpeg-turbo-progs) are needed; ./test.sh installs them")
	}
	dir := t.TempDir()
	run := func(name string, args ...string) []byte {
		t.Helper()
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("%s %v: %v: %s", name, args, err, ee.Stderr)
			}
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return out
	}
	n, compared := 0, 0
	for name, src := range samples(t) {
		opt, err := Optimize(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		in := filepath.Join(dir, fmt.Sprintf("in%d.jpg", n))
		ours := filepath.Join(dir, fmt.Sprintf("ours%d.jpg", n))
		n++
		if err := os.WriteFile(in, src, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ours, opt, 0o644); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(run(djpeg, "-ppm", in), run(djpeg, "-ppm", ours)) {
			t.Errorf("%s: libjpeg-turbo decodes the optimized file to other pixels", name)
		}
		if c, err := jpeg.DecodeConfig(bytes.NewReader(src)); err != nil || c.Width%16 != 0 || c.Height%16 != 0 {
			continue
		}
		compared++
		theirs := run(jpegtran, "-optimize", "-copy", "none", in)
		ot, oScan := tablesAndScan(t, name+" (ours)", opt)
		tt, tScan := tablesAndScan(t, name+" (jpegtran)", theirs)
		if ot != tt {
			t.Errorf("%s: Huffman tables differ from jpegtran -optimize's", name)
		}
		if !bytes.Equal(oScan, tScan) {
			t.Errorf("%s: scan data differs from jpegtran -optimize's (%d and %d bytes)", name, len(oScan), len(tScan))
		}
	}
	if compared < 20 {
		t.Errorf("only %d samples compared with jpegtran", compared)
	}
}

// tablesAndScan returns a file's Huffman tables in a canonical text form
// and its entropy-coded scan bytes.
func tablesAndScan(t *testing.T, name string, b []byte) (string, []byte) {
	t.Helper()
	var tables [slots]huffTable
	pos := 2
	for pos+4 <= len(b) {
		m := b[pos+1]
		n := int(binary.BigEndian.Uint16(b[pos+2:]))
		seg := b[pos+4 : pos+2+n]
		if m == markerDHT {
			if err := parseDHT(seg, &tables); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if m == markerSOS {
			var s string
			for i, tb := range tables {
				if tb.defined {
					s += fmt.Sprintf("%d:%v:%x ", i, tb.counts, tb.values)
				}
			}
			return s, b[pos+2+n : len(b)-2]
		}
		pos += 2 + n
	}
	t.Fatalf("%s: no scan", name)
	return "", nil
}

// TestOptimizeRejectsWhatItCannotRewrite: layouts other than one
// sequential Huffman scan are ErrUnsupported; broken files are errors;
// nothing panics on any prefix of a valid file.
func TestOptimizeRejectsWhatItCannotRewrite(t *testing.T) {
	var b bytes.Buffer
	m := image.NewRGBA(image.Rect(0, 0, 40, 24))
	for i := range m.Pix {
		m.Pix[i] = byte(i * 31)
	}
	if err := jpeg.Encode(&b, m, nil); err != nil {
		t.Fatal(err)
	}
	src := b.Bytes()
	sof := bytes.Index(src, []byte{0xff, markerSOF0})
	if sof < 0 {
		t.Fatal("no SOF0 in Go's JPEG")
	}
	progressive := bytes.Clone(src)
	progressive[sof+1] = 0xc2
	if _, err := Optimize(progressive); !errors.Is(err, ErrUnsupported) {
		t.Errorf("progressive frame: got %v, want ErrUnsupported", err)
	}
	restart := append(append(bytes.Clone(src[:2]), 0xff, markerDRI, 0, 4, 0, 8), src[2:]...)
	if _, err := Optimize(restart); !errors.Is(err, ErrUnsupported) {
		t.Errorf("restart interval: got %v, want ErrUnsupported", err)
	}
	trailing := append(bytes.Clone(src), 1, 2, 3)
	if _, err := Optimize(trailing); !errors.Is(err, ErrUnsupported) {
		t.Errorf("bytes after EOI: got %v, want ErrUnsupported", err)
	}
	if _, err := Optimize([]byte("\x89PNG\r\n\x1a\n")); err == nil {
		t.Error("a PNG signature was accepted")
	}
	for n := range len(src) - 1 {
		if out, err := Optimize(src[:n]); err == nil {
			t.Errorf("the first %d of %d bytes were accepted (%d bytes out)", n, len(src), len(out))
		}
	}
	// A corrupt scan: flipped bits in the entropy data are an error or a
	// file that still decodes, never a panic.
	scan := bytes.Index(src, []byte{0xff, markerSOS})
	for i := scan + 14; i < len(src)-2; i++ {
		bad := bytes.Clone(src)
		bad[i] ^= 0x5a
		_, _ = Optimize(bad)
	}
}

// TestOptimalTableLimitsLengths: counts shaped like the Fibonacci numbers
// give an unlimited Huffman code over 16 bits; the table must keep every
// code within 16 bits, leave the all-ones code unused (Kraft sum below
// one), and still give the most frequent symbols the shortest codes.
func TestOptimalTableLimitsLengths(t *testing.T) {
	var counts [257]int
	a, b := 1, 1
	for s := range 30 {
		counts[s] = a
		a, b = b, a+b
	}
	tb := optimalTable(&counts)
	if len(tb.values) != 30 {
		t.Fatalf("%d symbols in the table, want 30", len(tb.values))
	}
	kraft := 0.0
	for l, n := range tb.counts {
		kraft += float64(n) / float64(uint(1)<<(l+1))
	}
	if kraft >= 1 {
		t.Errorf("Kraft sum %v, want below 1 (the all-ones code must stay free)", kraft)
	}
	length := map[byte]int{}
	k := 0
	for l, n := range tb.counts {
		for range n {
			length[tb.values[k]] = l + 1
			k++
		}
	}
	for s, l := range length {
		if l > 16 {
			t.Errorf("symbol %d has a %d-bit code", s, l)
		}
		if l < length[29] {
			t.Errorf("symbol %d has a shorter code (%d bits) than the most frequent, 29 (%d)", s, l, length[29])
		}
	}
	if err := tb.prepare(); err != nil {
		t.Error(err)
	}
	// One symbol only: a one-bit code.
	var one [257]int
	one[7] = 1000
	tb = optimalTable(&one)
	if tb.counts[0] != 1 || len(tb.values) != 1 || tb.values[0] != 7 {
		t.Errorf("one symbol: counts %v values %v, want one 1-bit code for 7", tb.counts, tb.values)
	}
}

func FuzzOptimize(f *testing.F) {
	for _, src := range samples(f) {
		if len(src) < 4000 {
			f.Add(src)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		opt, err := Optimize(src)
		if err != nil {
			return
		}
		a, errA := jpeg.Decode(bytes.NewReader(src))
		b, errB := jpeg.Decode(bytes.NewReader(opt))
		if errA == nil && errB != nil {
			t.Fatalf("input decodes, output does not: %v", errB)
		}
		if errA == nil && !samePixels(a, b) {
			t.Fatal("pixels differ")
		}
	})
}

// BenchmarkOptimize times the pass on 256-pixel map tiles beside
// image/jpeg's encoding of the same tile, whose cost it adds to.
func BenchmarkOptimize(b *testing.B) {
	s := samples(b)
	for _, name := range []string{"mosaic-z4-m45-0.png/tile", "polygons-z4-m45-0.png/tile"} {
		src := s[name+"/q85"]
		m, err := jpeg.Decode(bytes.NewReader(src))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/jpeg.Encode", func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 85}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/Optimize", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := Optimize(src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
