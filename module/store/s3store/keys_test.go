package s3store

import "testing"

// Tile objects are named and typed as a hit answers them, so a static
// server or CDN in front of the bucket serves them right; the names the
// plugin had before its newer formats keep their keys.
func TestTileObjectNamesAndTypes(t *testing.T) {
	jpegTile, pngTile, webpTile := []byte{0xff, 0xd8, 0xff}, []byte("\x89PNG\r\n\x1a\n"), []byte("RIFF\x00\x00\x00\x00WEBP")
	for _, tc := range []struct {
		format, ext, segment string
		tile                 []byte
		ctype                string
	}{
		{"image/png", "png", "png", pngTile, "image/png"},
		{"image/png; mode=8bit", "png", "image_png%3B%20mode=8bit", pngTile, "image/png"},
		{"image/jpeg", "jpeg", "jpeg", jpegTile, "image/jpeg"},
		{"image/jpg", "jpeg", "image_jpg", jpegTile, "image/jpeg"},
		{"image/png8", "png8", "image_png8", pngTile, "image/png"},
		{"image/vnd.jpeg-png", "jpeg-png", "image_vnd.jpeg-png", jpegTile, "image/jpeg"},
		{"image/vnd.jpeg-png", "jpeg-png", "image_vnd.jpeg-png", pngTile, "image/png"},
		{"image/vnd.jpeg-png8", "jpeg-png8", "image_vnd.jpeg-png8", pngTile, "image/png"},
		{"image/webp", "webp", "image_webp", webpTile, "image/webp"},
	} {
		if got := extension(tc.format); got != tc.ext {
			t.Errorf("%s: extension %q, want %q", tc.format, got, tc.ext)
		}
		if got := formatSegment(tc.format); got != tc.segment {
			t.Errorf("%s: key segment %q, want %q", tc.format, got, tc.segment)
		}
		if back, err := formatName(formatSegment(tc.format)); err != nil || back != tc.format {
			t.Errorf("%s: segment reads back as %q, %v", tc.format, back, err)
		}
		if got := contentType(tc.format, tc.tile); got != tc.ctype {
			t.Errorf("%s: Content-Type %q, want %q", tc.format, got, tc.ctype)
		}
	}
}
