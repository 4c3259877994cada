// Package s3store keeps tiles in an S3-compatible bucket (AWS S3, MinIO,
// Ceph RGW, Garage), one object per tile, so that several Caddy nodes share
// one cache and a static server or CDN can serve the bucket directly.
//
// Object layout, under the configured prefix:
//
//	<layer>/generation                                          current generation (decimal text; none: 1)
//	<layer>/epoch                                               changed by every range deletion (text; none: 0)
//	<layer>/params/<gridset>/<format>/<params>                  a tile set's parameter values (params.go)
//	<layer>/<gen>/<gridset>/<format>/<params>/<z>/<x>/<y>.<ext> one tile
//
// <format> is the format's extension for the plain MIME types ("png" for
// image/png, "jpeg" for image/jpeg) and the configured name with its "/"
// as "_" otherwise ("image_png;%20mode=8bit"); <params> is the hash of the
// parameter set (the same as in the Badger store); x and y count from the
// gridset's origin as in the TMS endpoint (y from the bottom for the
// built-in gridsets). A tile object carries its Content-Type and, in user
// metadata, the time it was stored and its entity tag.
//
// Truncating a layer writes generation+1: every reader moves to the new
// prefix at once, and the objects of older generations are deleted in the
// background (a minute later, and every ten minutes whatever truncated
// them, so a truncation interrupted by a restart is reclaimed too).
package s3store

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// formatSegment names a format in object keys. The plain MIME types get
// their file extension, which is what a static server maps back to a type.
func formatSegment(format string) string {
	switch format {
	case "image/png":
		return "png"
	case "image/jpeg":
		return "jpeg"
	}
	return url.PathEscape(strings.Replace(format, "/", "_", 1))
}

// formatName is the inverse of formatSegment.
func formatName(seg string) (string, error) {
	switch seg {
	case "png":
		return "image/png", nil
	case "jpeg":
		return "image/jpeg", nil
	}
	s, err := url.PathUnescape(seg)
	if err != nil {
		return "", err
	}
	return strings.Replace(s, "_", "/", 1), nil
}

// extension of a tile object: what a static server needs for the type.
// extension is a tile object's file extension: the format's, as TMS and
// XYZ URLs have it (png, png8, jpeg, jpeg-png, jpeg-png8, webp), so that a
// static server or CDN in front of the bucket finds the same names. The
// names the plugin accepted before it had more formats keep their
// extension: anything PNG is png, anything JPEG jpeg.
func extension(format string) string {
	if f, err := imaging.ParseFormat(format); err == nil {
		return f.Extension()
	}
	if strings.Contains(strings.ToLower(format), "jpeg") || strings.Contains(strings.ToLower(format), "jpg") {
		return "jpeg"
	}
	return "png"
}

func (s *Store) layerPrefix(layer string) string { return s.prefix + layer + "/" }

func (s *Store) generationKey(layer string) string { return s.layerPrefix(layer) + "generation" }

func (s *Store) epochKey(layer string) string { return s.layerPrefix(layer) + "epoch" }

func (s *Store) dropKey(layer string, gen uint64) string {
	return s.layerPrefix(layer) + "drop/" + strconv.FormatUint(gen, 10)
}

func (s *Store) genPrefix(layer string, gen uint64) string {
	return s.layerPrefix(layer) + strconv.FormatUint(gen, 10) + "/"
}

func (s *Store) gridsetPrefix(layer, gridset string, gen uint64) string {
	return s.genPrefix(layer, gen) + gridset + "/"
}

func (s *Store) setPrefix(set store.Set, gen uint64) string {
	return s.gridsetPrefix(set.Layer, set.Gridset, gen) + formatSegment(set.Format) + "/" + set.Params + "/"
}

func (s *Store) zoomPrefix(set store.Set, gen uint64, z int) string {
	return s.setPrefix(set, gen) + strconv.Itoa(z) + "/"
}

func (s *Store) tileKey(k *store.Key, gen uint64) string {
	return fmt.Sprintf("%s%d/%d.%s", s.zoomPrefix(k.Set, gen, k.Z), k.X, k.Y, extension(k.Format))
}

// parseTail reads "<x>/<y>.<ext>", what follows a zoom prefix.
func parseTail(tail string) (x, y int64, ok bool) {
	xs, rest, found := strings.Cut(tail, "/")
	if !found {
		return 0, 0, false
	}
	ys, _, found := strings.Cut(rest, ".")
	if !found {
		return 0, 0, false
	}
	x, err1 := strconv.ParseInt(xs, 10, 64)
	y, err2 := strconv.ParseInt(ys, 10, 64)
	return x, y, err1 == nil && err2 == nil
}
