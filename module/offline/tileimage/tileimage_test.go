package tileimage

import (
	"bytes"
	"image"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
)

func TestKindAndSize(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 256, 128))
	var p, j bytes.Buffer
	png.Encode(&p, img)
	jpeg.Encode(&j, img, nil)
	// The smallest lossless WebP: a 1×1 VP8L image.
	webp := []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
	for _, c := range []struct {
		data []byte
		kind string
		w, h int
	}{
		{p.Bytes(), PNG, 256, 128},
		{j.Bytes(), JPEG, 256, 128},
		{webp, WebP, 1, 1},
	} {
		if k := Kind(c.data); k != c.kind {
			t.Errorf("kind %q, want %q", k, c.kind)
		}
		w, h, err := Size(c.data)
		if err != nil || w != c.w || h != c.h {
			t.Errorf("%s: %d×%d %v", c.kind, w, h, err)
		}
	}
	if err := Check(p.Bytes(), 256, 256); err == nil || !strings.Contains(err.Error(), "a 256×128 image") {
		t.Errorf("check: %v", err)
	}
	for _, bad := range [][]byte{nil, []byte("GIF89a"), []byte("\x89PNG\r\n\x1a\n"), []byte("<html>")} {
		if _, _, err := Size(bad); err == nil {
			t.Errorf("%q has a size", bad)
		}
	}
}
