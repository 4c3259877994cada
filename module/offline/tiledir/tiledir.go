// Package tiledir reads a directory tree of tiles, one image file a tile,
// as MapProxy, MapCache, gdal2tiles and many scripts leave them, for
// import into a gridset.
//
// The layouts, by MapProxy's names (mapproxy/cache/path.py) where it has
// one:
//
//	tms     z/x/y.ext                                      rows from the bottom
//	xyz     z/x/y.ext                                      rows from the top (OSM, "slippy map")
//	tc      zz/xxx/xxx/xxx/yyy/yyy/yyy.ext (TileCache)    rows from the bottom
//	mp      zz/xxxx/xxxx/yyyy/yyyy.ext                     rows from the bottom
//	arcgis  Lzz/Rrrrrrrrr/Ccccccccc.ext (hexadecimal)      rows from the top
//
// MapCache's disk cache writes tc ("default" layout) and arcgis below
// <base>/<tileset>/<grid>[/<dimension values>]: point the reader at the
// grid's (or the dimension's) directory. MapProxy and MapCache count rows
// in their grid's own order, which the layout's default above assumes; a
// cache made on a grid with the other origin sets RowsFromTop.
package tiledir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/tileimage"
)

// Layouts lists the layouts Open accepts.
var Layouts = []string{"tms", "xyz", "tc", "mp", "arcgis"}

// Options choose how paths are read.
type Options struct {
	Layout string // one of Layouts
	// RowsFromTop overrides the layout's row order when not nil.
	RowsFromTop *bool
}

// Reader walks one directory tree.
type Reader struct {
	root    string
	g       *gridset.Gridset
	parse   func(parts []string) (z int, x, y int64, ok bool)
	fromTop bool
	skipped int64
}

// Open checks root and the options; the files are read by Each.
func Open(root string, g *gridset.Gridset, o Options) (*Reader, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", root)
	}
	r := &Reader{root: root, g: g}
	switch o.Layout {
	case "tms":
		r.parse = parseZXY
	case "xyz":
		r.parse, r.fromTop = parseZXY, true
	case "tc":
		r.parse = parseTC
	case "mp":
		r.parse = parseMP
	case "arcgis":
		r.parse, r.fromTop = parseArcGIS, true
	default:
		return nil, fmt.Errorf("tiledir: unknown layout %q (want one of %s)", o.Layout, strings.Join(Layouts, ", "))
	}
	if o.RowsFromTop != nil {
		r.fromTop = *o.RowsFromTop
	}
	return r, nil
}

// extensions are the image files a tile directory holds; anything else
// (MapProxy's lock files, gdal2tiles' HTML and tilemapresource.xml) is
// not a tile and is skipped.
var extensions = map[string]bool{"png": true, "jpg": true, "jpeg": true, "webp": true}

// Skipped counts the files the last Each passed over as not tiles: names that do
// not fit the layout, not of an image extension, or not regular files.
func (r *Reader) Skipped() int64 { return r.skipped }

// Each calls fn with every tile of the tree, in lexical path order, its
// row turned into the gridset's (from the bottom). data is valid only
// during the call: one file is in memory at a time, in a buffer reused
// from tile to tile. A tile outside the gridset, or not an image of its
// tile size, ends the walk with an error naming the file; an error of fn
// is returned as it is.
func (r *Reader) Each(fn func(idx gridset.Index, data []byte) error) error {
	var buf []byte
	r.skipped = 0 // Skipped counts the last walk: an importer walks twice
	return filepath.WalkDir(r.root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() { // symbolic links, sockets: not followed
			r.skipped++
			return nil
		}
		rel, err := filepath.Rel(r.root, path)
		if err != nil {
			return err
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		last := parts[len(parts)-1]
		dot := strings.LastIndexByte(last, '.')
		if dot < 0 || !extensions[strings.ToLower(last[dot+1:])] {
			r.skipped++
			return nil
		}
		parts[len(parts)-1] = last[:dot]
		z, x, y, ok := r.parse(parts)
		if !ok {
			r.skipped++
			return nil
		}
		if z < 0 || z >= len(r.g.Levels) {
			return fmt.Errorf("%s: level %d is not a level of gridset %s", path, z, r.g.Name)
		}
		if r.fromTop {
			y = r.g.Levels[z].TilesHigh - 1 - y
		}
		idx := gridset.Index{Z: z, X: x, Y: y}
		if !r.g.GridRange(z).Contains(x, y) {
			return fmt.Errorf("%s: tile %d/%d/%d is outside gridset %s", path, z, x, y, r.g.Name)
		}
		if buf, err = readFile(path, buf); err != nil {
			return err
		}
		if err := tileimage.Check(buf, r.g.TileWidth, r.g.TileHeight); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		return fn(idx, buf)
	})
}

// readFile reads a file into buf, reusing its memory.
func readFile(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return buf, err
	}
	n := int(st.Size())
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(f, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%s: changed while read", path)
		}
		return buf, err
	}
	return buf, nil
}

// num reads a non-negative decimal number of at most width digits (0: any).
func num(s string, width int, base int) (int64, bool) {
	if s == "" || (width > 0 && len(s) != width) {
		return 0, false
	}
	v, err := strconv.ParseInt(s, base, 64)
	return v, err == nil && v >= 0
}

func level(s string) (int, bool) {
	v, ok := num(s, 0, 10)
	return int(v), ok && v <= 255
}

func parseZXY(p []string) (int, int64, int64, bool) {
	if len(p) != 3 {
		return 0, 0, 0, false
	}
	z, ok1 := level(p[0])
	x, ok2 := num(p[1], 0, 10)
	y, ok3 := num(p[2], 0, 10)
	return z, x, y, ok1 && ok2 && ok3
}

// groups joins fixed-width decimal groups: 000/012/345 → 12345.
func groups(p []string, width int) (int64, bool) {
	var v int64
	scale := int64(1)
	for i := 0; i < width; i++ {
		scale *= 10
	}
	for _, s := range p {
		g, ok := num(s, width, 10)
		if !ok {
			return 0, false
		}
		v = v*scale + g
	}
	return v, true
}

func parseTC(p []string) (int, int64, int64, bool) {
	if len(p) != 7 {
		return 0, 0, 0, false
	}
	z, ok1 := level(p[0])
	x, ok2 := groups(p[1:4], 3)
	y, ok3 := groups(p[4:7], 3)
	return z, x, y, ok1 && ok2 && ok3
}

func parseMP(p []string) (int, int64, int64, bool) {
	if len(p) != 5 {
		return 0, 0, 0, false
	}
	z, ok1 := level(p[0])
	x, ok2 := groups(p[1:3], 4)
	y, ok3 := groups(p[3:5], 4)
	return z, x, y, ok1 && ok2 && ok3
}

func parseArcGIS(p []string) (int, int64, int64, bool) {
	if len(p) != 3 || !strings.HasPrefix(p[0], "L") || !strings.HasPrefix(p[1], "R") || !strings.HasPrefix(p[2], "C") {
		return 0, 0, 0, false
	}
	z, ok1 := level(p[0][1:])
	y, ok2 := num(p[1][1:], 8, 16)
	x, ok3 := num(p[2][1:], 8, 16)
	return z, x, y, ok1 && ok2 && ok3
}
