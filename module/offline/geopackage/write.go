// Package geopackage writes and reads the tiles of OGC GeoPackage 1.3
// files (https://www.geopackage.org/spec130/): one tile pyramid table, its
// tile matrix set and a tile matrix per level, in EPSG:4326 or web
// mercator.
//
// GeoPackage counts tile rows from the top of the tile matrix set, which
// is the gridset's extent rounded out to whole tiles (tilematrix); the
// cache counts them from the bottom, so every row is turned over on the
// way in and out. The tile table is a plain table, as the standard
// requires: there is no deduplication as in MBTiles.
package geopackage

import (
	"fmt"
	"math"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/sqlitefile"
	"github.com/tilecache/caddy-tilecache/module/offline/tileimage"
	"github.com/tilecache/caddy-tilecache/module/offline/tilematrix"
)

// Options describe the tile table.
type Options struct {
	Table       string // the tile table's name; "" → "tiles"
	Identifier  string // gpkg_contents.identifier; "" → Table
	Description string
	// Bounds of the data in the gridset's CRS (gpkg_contents, which GDAL
	// takes as the raster's extent); nil: the tiles of the highest level
	// written.
	Bounds *gridset.BBox
}

// Writer writes one GeoPackage. Not safe for concurrent use.
type Writer struct {
	b      *sqlitefile.Builder
	set    *tilematrix.Set
	o      Options
	add    *sqlite3.Stmt
	tiles  int64
	bytes  int64
	webp   bool
	levels map[int]*gridset.Range
	// Rows wait in a window and go in packed so that the table's leaf
	// pages come out full (sqlitefile.Window).
	window  *sqlitefile.Window
	pending []pendingTile
	rowid   int64 // the last id inserted
}

// pendingTile is a row in the window, beside its blob.
type pendingTile struct {
	z         int
	x, y, top int64
}

// Create starts path (as path.partial until Close; sqlitefile) for tiles
// of g, which must be in EPSG:4326 or web mercator and have one extent
// for all levels (tilematrix.New).
func Create(path string, g *gridset.Gridset, o Options) (*Writer, error) {
	set, err := supported(g)
	if err != nil {
		return nil, err
	}
	if o.Table == "" {
		o.Table = "tiles"
	}
	if o.Identifier == "" {
		o.Identifier = o.Table
	}
	b, err := sqlitefile.Create(path, sqlitefile.TilePageSize)
	if err != nil {
		return nil, fmt.Errorf("geopackage: %w", err)
	}
	w := &Writer{b: b, set: set, o: o, levels: map[int]*gridset.Range{}, window: sqlitefile.NewWindow(sqlitefile.TilePageSize)}
	if err := w.init(); err != nil {
		b.Abort()
		return nil, fmt.Errorf("geopackage: %w", err)
	}
	return w, nil
}

// Supports reports why tiles of g cannot be written, or nil: Create's
// checks, for a request to be refused before any work.
func Supports(g *gridset.Gridset) error {
	_, err := supported(g)
	return err
}

func supported(g *gridset.Gridset) (*tilematrix.Set, error) {
	set, err := tilematrix.New(g)
	if err != nil {
		return nil, fmt.Errorf("geopackage: %w", err)
	}
	if set.EPSG != 4326 && set.EPSG != 3857 {
		return nil, fmt.Errorf("geopackage: gridset %s is EPSG:%d; GeoPackage export supports EPSG:4326 and web mercator", g.Name, g.SRS)
	}
	return set, nil
}

func (w *Writer) init() error {
	if err := w.b.Exec(fmt.Sprintf("PRAGMA application_id=%d; PRAGMA user_version=%d", applicationID, userVersion)); err != nil {
		return err
	}
	if err := w.b.Exec(schema); err != nil {
		return err
	}
	if err := w.b.Exec(fmt.Sprintf(tileTable, sqlitefile.Quote(w.o.Table))); err != nil {
		return err
	}
	c := w.b.Conn()
	st, _, err := c.Prepare("INSERT INTO gpkg_spatial_ref_sys VALUES (?, ?, ?, ?, ?, ?)")
	if err != nil {
		return err
	}
	defer st.Close()
	for _, s := range srsRows {
		st.BindText(1, s.name)
		st.BindInt(2, s.id)
		st.BindText(3, s.org)
		st.BindInt(4, s.orgID)
		st.BindText(5, s.definition)
		st.BindText(6, s.description)
		if err := st.Exec(); err != nil {
			return err
		}
	}
	w.add, _, err = c.Prepare(fmt.Sprintf("INSERT INTO %s (zoom_level, tile_column, tile_row, tile_data) VALUES (?, ?, ?, ?)", sqlitefile.Quote(w.o.Table)))
	return err
}

// Put writes one tile. A tile written twice is an error. After an error
// the file is not to be finished: Abort it.
func (w *Writer) Put(idx gridset.Index, data []byte) error {
	if !w.set.Contains(idx) {
		return fmt.Errorf("geopackage: tile %d/%d/%d is outside gridset %s", idx.Z, idx.X, idx.Y, w.set.Gridset.Name)
	}
	kind := tileimage.Kind(data)
	if kind == "" {
		return fmt.Errorf("geopackage: tile %d/%d/%d is not a PNG, JPEG or WebP image", idx.Z, idx.X, idx.Y)
	}
	w.webp = w.webp || kind == tileimage.WebP
	top := w.set.TopRow(idx)
	// The record: id (the rowid, stored as NULL), zoom_level,
	// tile_column, tile_row, tile_data.
	payload := sqlitefile.RecordSize(sqlitefile.Null, sqlitefile.Int(int64(idx.Z)), sqlitefile.Int(idx.X), sqlitefile.Int(top), sqlitefile.Blob(len(data)))
	w.window.Add(data, payload)
	w.pending = append(w.pending, pendingTile{z: idx.Z, x: idx.X, y: idx.Y, top: top})
	w.tiles++
	w.bytes += int64(len(data))
	r := w.levels[idx.Z]
	if r == nil {
		w.levels[idx.Z] = &gridset.Range{MinX: idx.X, MinY: idx.Y, MaxX: idx.X, MaxY: idx.Y}
	} else {
		r.MinX, r.MinY = min(r.MinX, idx.X), min(r.MinY, idx.Y)
		r.MaxX, r.MaxY = max(r.MaxX, idx.X), max(r.MaxY, idx.Y)
	}
	if w.window.Full() {
		return w.flush()
	}
	return nil
}

// flush inserts the window's rows in packed order.
func (w *Writer) flush() error {
	st := w.add
	for _, i := range w.window.Order(w.rowid + 1) {
		p, data := w.pending[i], w.window.Blob(i)
		if err := w.b.Begin(); err != nil {
			return err
		}
		st.BindInt(1, p.z)
		st.BindInt64(2, p.x)
		st.BindInt64(3, p.top)
		st.BindBlob(4, data)
		if err := st.Exec(); err != nil {
			return fmt.Errorf("geopackage: tile %d/%d/%d: %w", p.z, p.x, p.y, err)
		}
		w.rowid++
		if err := w.b.Added(len(data)); err != nil {
			return err
		}
	}
	w.window.Reset()
	w.pending = w.pending[:0]
	return nil
}

// Tiles and Bytes count what has been written.
func (w *Writer) Tiles() int64 { return w.tiles }
func (w *Writer) Bytes() int64 { return w.bytes }

// Close writes the tables that describe the tiles, checks the file and
// gives it its name. On an error nothing is left under either name.
func (w *Writer) Close() error {
	err := w.flush()
	w.add.Close()
	if err != nil {
		w.b.Abort()
		return err
	}
	if err := w.describe(); err != nil {
		w.b.Abort()
		return fmt.Errorf("geopackage: %w", err)
	}
	if err := w.b.Finish(w.check); err != nil {
		return fmt.Errorf("geopackage: %w", err)
	}
	return nil
}

// Abort gives up the file: nothing is left under either name.
func (w *Writer) Abort() error {
	w.add.Close()
	return w.b.Abort()
}

func (w *Writer) check(c *sqlite3.Conn) error {
	st, _, err := c.Prepare("SELECT count(*) FROM " + sqlitefile.Quote(w.o.Table))
	if err != nil {
		return err
	}
	defer st.Close()
	st.Step()
	if n := st.ColumnInt64(0); n != w.tiles {
		return fmt.Errorf("%s holds %d tiles, %d were written", w.o.Table, n, w.tiles)
	}
	return st.Err()
}

// describe writes gpkg_contents, the tile matrix set, a tile matrix for
// every level from the lowest to the highest written, and the extensions
// the tiles need.
func (w *Writer) describe() error {
	if err := w.b.Begin(); err != nil {
		return err
	}
	g := w.set.Gridset
	minZ, maxZ := -1, -1
	for z := range w.levels {
		if minZ < 0 || z < minZ {
			minZ = z
		}
		maxZ = max(maxZ, z)
	}
	bounds := w.o.Bounds
	if bounds == nil && maxZ >= 0 {
		r := w.levels[maxZ]
		b := g.TileBBox(gridset.Index{Z: maxZ, X: r.MinX, Y: r.MinY}).Union(g.TileBBox(gridset.Index{Z: maxZ, X: r.MaxX, Y: r.MaxY}))
		bounds = &b
	}
	if bounds == nil {
		bounds = &w.set.BBox
	}
	c := w.b.Conn()
	exec := func(sql string, args ...any) error {
		st, _, err := c.Prepare(sql)
		if err != nil {
			return err
		}
		defer st.Close()
		for i, a := range args {
			switch v := a.(type) {
			case string:
				st.BindText(i+1, v)
			case int:
				st.BindInt(i+1, v)
			case int64:
				st.BindInt64(i+1, v)
			case float64:
				st.BindFloat(i+1, v)
			default:
				return fmt.Errorf("bind %T", a)
			}
		}
		return st.Exec()
	}
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	if err := exec(`INSERT INTO gpkg_contents (table_name, data_type, identifier, description, last_change, min_x, min_y, max_x, max_y, srs_id)
		VALUES (?, 'tiles', ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.o.Table, w.o.Identifier, w.o.Description, now, bounds.MinX, bounds.MinY, bounds.MaxX, bounds.MaxY, w.set.EPSG); err != nil {
		return err
	}
	mb := w.set.BBox
	if err := exec("INSERT INTO gpkg_tile_matrix_set VALUES (?, ?, ?, ?, ?, ?)",
		w.o.Table, w.set.EPSG, mb.MinX, mb.MinY, mb.MaxX, mb.MaxY); err != nil {
		return err
	}
	halving := true
	for z := minZ; z >= 0 && z <= maxZ; z++ {
		m := w.set.Level(z)
		if err := exec("INSERT INTO gpkg_tile_matrix VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			w.o.Table, z, m.Width, m.Height, m.TileWidth, m.TileHeight, m.PixelX, m.PixelY); err != nil {
			return err
		}
		if z > minZ {
			ratio := g.Levels[z-1].Resolution / m.PixelX
			halving = halving && math.Abs(ratio-2) < 1e-9
		}
	}
	ext := "INSERT INTO gpkg_extensions VALUES (?, 'tile_data', ?, ?, 'read-write')"
	if w.webp {
		if err := exec(ext, w.o.Table, extWebP, defWebP); err != nil {
			return err
		}
	}
	if !halving {
		if err := exec(ext, w.o.Table, extZoomOther, defZoomOther); err != nil {
			return err
		}
	}
	return nil
}
