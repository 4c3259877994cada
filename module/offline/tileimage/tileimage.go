// Package tileimage tells what a tile's bytes are: which image format, and
// how many pixels. Files brought in from elsewhere say what their tiles are
// (MBTiles metadata, a file extension) but only the bytes are sure; the
// import checks them against the gridset's tile size.
package tileimage

import (
	"bytes"
	"fmt"
	"image"
	_ "image/jpeg" // registered for image.DecodeConfig
	_ "image/png"

	_ "golang.org/x/image/webp"
)

// The kinds, by the names MBTiles' format metadata uses for them (jpg,
// not jpeg).
const (
	PNG  = "png"
	JPEG = "jpg"
	WebP = "webp"
)

// Kind is PNG, JPEG or WebP by the bytes' signature, or "" for anything
// else.
func Kind(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}):
		return JPEG
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return WebP
	}
	return ""
}

// Size reads the image's width and height from its header, without
// decoding the pixels.
func Size(data []byte) (w, h int, err error) {
	if Kind(data) == "" {
		return 0, 0, fmt.Errorf("not a PNG, JPEG or WebP image (%d bytes)", len(data))
	}
	c, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, 0, err
	}
	return c.Width, c.Height, nil
}

// Check reports, in a few words, why data is not a w×h tile image, or nil.
func Check(data []byte, w, h int) error {
	gw, gh, err := Size(data)
	if err != nil {
		return err
	}
	if gw != w || gh != h {
		return fmt.Errorf("a %d×%d image, the gridset's tiles are %d×%d", gw, gh, w, h)
	}
	return nil
}
