package imaging

import (
	"bytes"
	"image"
	"image/color"
	_ "image/jpeg"
	_ "image/png"
	"strings"
	"testing"
)

func TestFormatOptions(t *testing.T) {
	ok := []struct {
		mime string
		o    Options
	}{
		{"image/jpeg", Options{Quality: 1}},
		{"image/vnd.jpeg-png", Options{Quality: 100}},
		{"image/vnd.jpeg-png8", Options{Quality: 70, Colors: 64, Dither: true}},
		{"image/png8", Options{Colors: 2}},
		{"image/png8", Options{Colors: 256, Dither: true}},
		{"image/webp", Options{Quality: 80}},
		{"image/webp", Options{Colors: 256, Dither: true}},
		{"image/png", Options{}},
	}
	for _, tc := range ok {
		f, err := (Format{MIME: tc.mime}).WithOptions(tc.o)
		if err != nil || f.Options != tc.o {
			t.Errorf("%s %+v: %+v, %v", tc.mime, tc.o, f, err)
		}
	}
	bad := []struct {
		mime string
		o    Options
		want string
	}{
		{"image/png", Options{Quality: 80}, "no quality"},
		{"image/png8", Options{Quality: 80}, "no quality"},
		{"image/jpeg", Options{Quality: 101}, "outside 1..100"},
		{"image/webp", Options{Quality: -1}, "outside 1..100"},
		{"image/png", Options{Colors: 16}, "no palette"},
		{"image/jpeg", Options{Dither: true}, "no palette"},
		{"image/vnd.jpeg-png", Options{Colors: 16}, "no palette"},
		{"image/png8", Options{Colors: 1}, "outside 2..256"},
		{"image/png8", Options{Colors: 257}, "outside 2..256"},
		{"image/webp", Options{Dither: true}, "needs colors"},
		{"image/webp", Options{Quality: 80, Colors: 64}, "not both"},
	}
	for _, tc := range bad {
		_, err := (Format{MIME: tc.mime}).WithOptions(tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %+v: %v, want one line with %q", tc.mime, tc.o, err, tc.want)
		}
	}
}

func TestFormatContentTypeAndUpstream(t *testing.T) {
	jpegTile, pngTile := []byte{0xff, 0xd8, 0xff}, []byte("\x89PNG\r\n\x1a\n")
	for _, tc := range []struct {
		mime, upstream, ofJPEG, ofPNG string
		alpha                         bool
	}{
		{"image/png", "image/png", "image/png", "image/png", true},
		{"image/png8", "image/png", "image/png", "image/png", true},
		{"image/jpeg", "image/jpeg", "image/jpeg", "image/jpeg", false},
		{"image/vnd.jpeg-png", "image/png", "image/jpeg", "image/png", true},
		{"image/vnd.jpeg-png8", "image/png", "image/jpeg", "image/png", true},
		{"image/webp", "image/png", "image/webp", "image/webp", true},
	} {
		f := Format{MIME: tc.mime}
		if got := f.UpstreamMIME(); got != tc.upstream {
			t.Errorf("%s upstream %s, want %s", tc.mime, got, tc.upstream)
		}
		if got := f.ContentType(jpegTile); got != tc.ofJPEG {
			t.Errorf("%s JPEG tile answered as %s, want %s", tc.mime, got, tc.ofJPEG)
		}
		if got := f.ContentType(pngTile); got != tc.ofPNG {
			t.Errorf("%s PNG tile answered as %s, want %s", tc.mime, got, tc.ofPNG)
		}
		if f.Transparency() != tc.alpha {
			t.Errorf("%s transparency %v", tc.mime, f.Transparency())
		}
	}
}

// The mixed formats: JPEG for a fully opaque tile of many colours, PNG
// (lossless or 8-bit) once one pixel is not opaque, and PNG for a tile of
// one colour, opaque or not.
func TestEncodeMixedChoosesPerTile(t *testing.T) {
	picture := image.NewNRGBA(image.Rect(0, 0, 64, 64))
	for y := range 64 {
		for x := range 64 {
			picture.SetNRGBA(x, y, color.NRGBA{R: uint8(4 * x), G: uint8(4 * y), B: uint8(x ^ y), A: 255})
		}
	}
	edge := image.NewNRGBA(picture.Rect)
	copy(edge.Pix, picture.Pix)
	edge.SetNRGBA(63, 63, color.NRGBA{R: 1, G: 2, B: 3, A: 254})
	sea := image.NewNRGBA(picture.Rect)
	for i := range sea.Pix {
		sea.Pix[i] = []byte{30, 90, 200, 255}[i%4]
	}
	for _, mime := range []string{"image/vnd.jpeg-png", "image/vnd.jpeg-png8"} {
		f, _ := ParseFormat(mime)
		for _, tc := range []struct {
			name string
			m    image.Image
			want string
		}{
			{"opaque picture", picture, "image/jpeg"},
			{"one translucent pixel", edge, "image/png"},
			{"opaque sea", sea, "image/png"},
			{"opaque picture as a sub-image", picture.SubImage(image.Rect(8, 8, 40, 40)), "image/jpeg"},
		} {
			var b bytes.Buffer
			if err := (&Encoder{}).Encode(&b, tc.m, f); err != nil {
				t.Fatal(err)
			}
			if got := f.ContentType(b.Bytes()); got != tc.want {
				t.Errorf("%s %s: %s, want %s", mime, tc.name, got, tc.want)
			}
			if _, format, err := image.Decode(bytes.NewReader(b.Bytes())); err != nil || "image/"+format != tc.want {
				t.Errorf("%s %s: decodes as %q: %v", mime, tc.name, format, err)
			}
		}
	}
}
