// Package imaging turns an upstream WMS answer (one metatile image) into
// encoded tiles: Decode checks and decodes the answer, Slice cuts it into
// tiles without copying pixels, and Encoder writes each tile as PNG (with
// its own writer, made for rendered maps: see png.go) or JPEG.
package imaging

import (
	"fmt"
	"strings"
)

const (
	mimePNG  = "image/png"
	mimeJPEG = "image/jpeg"
)

// Format is a tile MIME type the cache can produce.
type Format struct {
	MIME string // canonical: image/png or image/jpeg
}

// ParseFormat accepts "image/png" and "image/jpeg" (case-insensitive;
// "image/jpg" means jpeg). Parameters are tolerated on PNG only, because WMS
// clients commonly ask for "image/png; mode=8bit" and expect a PNG; a JPEG
// with parameters is something we would not honour, so it is refused.
func ParseFormat(s string) (Format, error) {
	base, params, hasParams := strings.Cut(s, ";")
	switch strings.ToLower(strings.TrimSpace(base)) {
	case mimePNG:
		return Format{MIME: mimePNG}, nil
	case mimeJPEG, "image/jpg":
		if hasParams && strings.TrimSpace(params) != "" {
			return Format{}, fmt.Errorf("imaging: unsupported tile format %q (no parameters allowed on image/jpeg)", s)
		}
		return Format{MIME: mimeJPEG}, nil
	}
	return Format{}, fmt.Errorf("imaging: unsupported tile format %q (want image/png or image/jpeg)", s)
}

// Extension is the file extension without dot, "" for a zero Format.
func (f Format) Extension() string {
	switch f.MIME {
	case mimePNG:
		return "png"
	case mimeJPEG:
		return "jpeg"
	}
	return ""
}

// Transparency reports whether the format can carry an alpha channel, so
// that WMS's TRANSPARENT means something for it.
func (f Format) Transparency() bool { return f.MIME == mimePNG }
