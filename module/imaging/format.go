// Package imaging turns an upstream WMS answer (one metatile image) into
// encoded tiles: Decode checks and decodes the answer, Slice cuts it into
// tiles without copying pixels, and Encoder writes each tile in the tile
// set's format: lossless PNG (with its own writer, made for rendered maps:
// see png.go), 8-bit PNG (quantize.go), JPEG, the mixed JPEG/PNG formats,
// and WebP (webp.go). Every format is encoded from the same decoded
// lossless image, so any WMS that renders PNG serves all of them.
package imaging

import (
	"fmt"
	"strings"
)

// The formats, by the names GeoWebCache gives them (and WMTS and seeding
// requests use).
const (
	mimePNG      = "image/png"
	mimePNG8     = "image/png8"
	mimeJPEG     = "image/jpeg"
	mimeJPEGPNG  = "image/vnd.jpeg-png"
	mimeJPEGPNG8 = "image/vnd.jpeg-png8"
	mimeWebP     = "image/webp"
)

// Names lists the formats ParseFormat accepts, in their canonical spelling.
var Names = []string{mimePNG, mimePNG8, mimeJPEG, mimeJPEGPNG, mimeJPEGPNG8, mimeWebP}

// Format is a tile format the cache can produce, with its encoding
// options. Formats are comparable values.
type Format struct {
	MIME string // canonical: one of Names
	Options
}

// Options tune a format's encoding. The zero value is each format's
// default.
type Options struct {
	// Quality of JPEG tiles (image/jpeg and the JPEG tiles of the mixed
	// formats) and of lossy WebP, 1..100. 0: the encoder's JPEG quality;
	// WebP without a quality is lossless.
	Quality int `json:"quality,omitempty"`
	// Colors is the palette size of 8-bit tiles (image/png8 and the PNG
	// tiles of image/vnd.jpeg-png8), 2..256, 0 meaning 256. On image/webp
	// it asks for the quantized image encoded losslessly; 0 there means
	// not quantized.
	Colors int `json:"colors,omitempty"`
	// Dither diffuses the quantizing error; off by default, because on
	// rendered maps it turns flat fills into noise that costs bytes.
	Dither bool `json:"dither,omitempty"`
}

// ParseFormat accepts the names in Names (case-insensitive; "image/jpg"
// means jpeg). Parameters are tolerated on image/png only, because WMS
// clients commonly ask for "image/png; mode=8bit" and expect a PNG; other
// formats with parameters are something we would not honour, so they are
// refused. The result has default options.
func ParseFormat(s string) (Format, error) {
	base, params, hasParams := strings.Cut(s, ";")
	name := strings.ToLower(strings.TrimSpace(base))
	if name == "image/jpg" {
		name = mimeJPEG
	}
	for _, n := range Names {
		if name != n {
			continue
		}
		if n != mimePNG && hasParams && strings.TrimSpace(params) != "" {
			return Format{}, fmt.Errorf("imaging: unsupported tile format %q (no parameters allowed on %s)", s, n)
		}
		return Format{MIME: n}, nil
	}
	return Format{}, fmt.Errorf("imaging: unsupported tile format %q (want one of %s)", s, strings.Join(Names, ", "))
}

// WithOptions returns f with options o, or an error naming the option
// that does not apply to f or is out of range.
func (f Format) WithOptions(o Options) (Format, error) {
	if o.Quality != 0 {
		switch f.MIME {
		case mimeJPEG, mimeJPEGPNG, mimeJPEGPNG8, mimeWebP:
		default:
			return f, fmt.Errorf("imaging: %s has no quality (it is lossless or quantized)", f.MIME)
		}
		if o.Quality < 1 || o.Quality > 100 {
			return f, fmt.Errorf("imaging: %s quality %d is outside 1..100", f.MIME, o.Quality)
		}
	}
	if o.Colors != 0 || o.Dither {
		switch f.MIME {
		case mimePNG8, mimeJPEGPNG8, mimeWebP:
		default:
			return f, fmt.Errorf("imaging: %s has no palette (colors and dither apply to image/png8, image/vnd.jpeg-png8 and image/webp)", f.MIME)
		}
	}
	if o.Colors != 0 && (o.Colors < 2 || o.Colors > 256) {
		return f, fmt.Errorf("imaging: %s colors %d is outside 2..256", f.MIME, o.Colors)
	}
	if f.MIME == mimeWebP {
		if o.Dither && o.Colors == 0 {
			return f, fmt.Errorf("imaging: image/webp dither needs colors (it dithers the quantized image)")
		}
		if o.Quality != 0 && o.Colors != 0 {
			return f, fmt.Errorf("imaging: image/webp takes a quality (lossy) or colors (quantized, lossless), not both")
		}
	}
	f.Options = o
	return f, nil
}

// Extension is the file extension, without dot, of the format's TMS and
// XYZ URLs (GeoWebCache's): png, png8, jpeg, jpeg-png, jpeg-png8, webp.
// "" for a zero Format.
func (f Format) Extension() string {
	switch f.MIME {
	case mimePNG:
		return "png"
	case mimePNG8:
		return "png8"
	case mimeJPEG:
		return "jpeg"
	case mimeJPEGPNG:
		return "jpeg-png"
	case mimeJPEGPNG8:
		return "jpeg-png8"
	case mimeWebP:
		return "webp"
	}
	return ""
}

// Transparency reports whether the format can carry an alpha channel, so
// that WMS's TRANSPARENT means something for it.
func (f Format) Transparency() bool { return f.MIME != "" && f.MIME != mimeJPEG }

// UpstreamMIME is the format a metatile is requested in from the upstream:
// JPEG for JPEG tiles (the upstream's own encoder, as before), lossless
// PNG for every other format, which is encoded here from that image.
func (f Format) UpstreamMIME() string {
	if f.MIME == mimeJPEG {
		return mimeJPEG
	}
	return mimePNG
}

// Mixed reports whether the format's tiles are each JPEG or PNG, so that
// a tile's Content-Type is read from the tile (ContentType).
func (f Format) Mixed() bool { return f.MIME == mimeJPEGPNG || f.MIME == mimeJPEGPNG8 }

// ContentType is the HTTP Content-Type of an encoded tile of this format:
// image/png for the PNG formats (a browser knows no image/png8), the
// tile's own type for the mixed formats (as GeoWebCache answers), else the
// format's MIME type.
func (f Format) ContentType(tile []byte) string {
	switch f.MIME {
	case mimePNG8:
		return mimePNG
	case mimeJPEGPNG, mimeJPEGPNG8:
		if len(tile) > 0 && tile[0] == 0xff {
			return mimeJPEG
		}
		return mimePNG
	}
	return f.MIME
}
