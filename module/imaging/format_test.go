package imaging

import (
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
