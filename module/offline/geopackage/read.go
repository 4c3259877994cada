package geopackage

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ncruces/go-sqlite3"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/sqlitefile"
	"github.com/tilecache/caddy-tilecache/module/offline/tileimage"
	"github.com/tilecache/caddy-tilecache/module/offline/tilematrix"
)

// Reader reads one tile table of a GeoPackage for import into a gridset.
type Reader struct {
	path   string
	conn   *sqlite3.Conn
	set    *tilematrix.Set
	table  string
	zooms  map[int]int // the file's zoom_level → gridset level
	format string
}

// Open opens a GeoPackage and checks that table (or, given "", its only
// tile table) is a tile pyramid on gridset g: same SRS, same origin, each
// level a level of g with g's tile size and matrix size. Each error is
// one line naming the file and what differs.
func Open(path string, g *gridset.Gridset, table string) (*Reader, error) {
	set, err := tilematrix.New(g)
	if err != nil {
		return nil, err
	}
	conn, err := sqlitefile.Open(path)
	if err != nil {
		return nil, err
	}
	r := &Reader{path: path, conn: conn, set: set, table: table}
	if err := r.check(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

func (r *Reader) check() error {
	tables, err := sqlitefile.Tables(r.conn)
	if err != nil {
		return sqlitefile.OneLine(err)
	}
	for _, t := range []string{"gpkg_contents", "gpkg_spatial_ref_sys"} {
		if tables[t] == "" {
			return fmt.Errorf("not a GeoPackage: no %s table", t)
		}
	}
	names, err := r.strings("SELECT table_name FROM gpkg_contents WHERE data_type = 'tiles' ORDER BY table_name")
	if err != nil {
		return err
	}
	switch {
	case len(names) == 0:
		return fmt.Errorf("GeoPackage without tiles: gpkg_contents lists no tiles table")
	case r.table == "" && len(names) > 1:
		return fmt.Errorf("GeoPackage with several tile tables (%s): name one", strings.Join(names, ", "))
	case r.table == "":
		r.table = names[0]
	case !slices.Contains(names, r.table):
		return fmt.Errorf("no tiles table %q (gpkg_contents lists %s)", r.table, strings.Join(names, ", "))
	}
	for _, t := range []string{"gpkg_tile_matrix_set", "gpkg_tile_matrix", r.table} {
		if tables[t] == "" {
			return fmt.Errorf("GeoPackage without tiles: no %s table", t)
		}
	}
	cols, err := sqlitefile.Columns(r.conn, r.table)
	if err != nil {
		return sqlitefile.OneLine(err)
	}
	if m := sqlitefile.Missing(cols, "zoom_level", "tile_column", "tile_row", "tile_data"); m != "" {
		return fmt.Errorf("tiles table %s has no %s", r.table, m)
	}
	found, err := r.found()
	if err != nil {
		return err
	}
	if r.zooms, err = r.set.Match(found); err != nil {
		return fmt.Errorf("tiles table %s does not fit: %w", r.table, err)
	}
	st, _, err := r.conn.Prepare("SELECT tile_data FROM " + sqlitefile.Quote(r.table) + " LIMIT 1")
	if err != nil {
		return sqlitefile.OneLine(err)
	}
	defer st.Close()
	if st.Step() {
		r.format = tileimage.Kind(st.ColumnRawBlob(0))
	}
	return sqlitefile.OneLine(st.Err())
}

// found reads the table's tile matrix set as the file describes it.
func (r *Reader) found() (tilematrix.Found, error) {
	var f tilematrix.Found
	st, _, err := r.conn.Prepare(`SELECT s.min_x, s.min_y, s.max_x, s.max_y, s.srs_id, r.organization, r.organization_coordsys_id
		FROM gpkg_tile_matrix_set s LEFT JOIN gpkg_spatial_ref_sys r ON r.srs_id = s.srs_id WHERE s.table_name = ?`)
	if err != nil {
		return f, sqlitefile.OneLine(err)
	}
	defer st.Close()
	st.BindText(1, r.table)
	if !st.Step() {
		if err := st.Err(); err != nil {
			return f, sqlitefile.OneLine(err)
		}
		return f, fmt.Errorf("gpkg_tile_matrix_set has no row for %s", r.table)
	}
	f.BBox = gridset.BBox{MinX: st.ColumnFloat(0), MinY: st.ColumnFloat(1), MaxX: st.ColumnFloat(2), MaxY: st.ColumnFloat(3)}
	org := st.ColumnText(5)
	f.SRS = fmt.Sprintf("%s:%d (srs_id %d)", org, st.ColumnInt(6), st.ColumnInt(4))
	if strings.EqualFold(org, "EPSG") {
		f.EPSG = st.ColumnInt(6)
		f.SRS = fmt.Sprintf("EPSG:%d", f.EPSG)
	}
	lv, _, err := r.conn.Prepare(`SELECT zoom_level, matrix_width, matrix_height, tile_width, tile_height, pixel_x_size, pixel_y_size
		FROM gpkg_tile_matrix WHERE table_name = ? ORDER BY zoom_level`)
	if err != nil {
		return f, sqlitefile.OneLine(err)
	}
	defer lv.Close()
	lv.BindText(1, r.table)
	for lv.Step() {
		f.Levels = append(f.Levels, tilematrix.FoundLevel{
			Zoom: lv.ColumnInt(0), Width: lv.ColumnInt64(1), Height: lv.ColumnInt64(2),
			TileWidth: lv.ColumnInt(3), TileHeight: lv.ColumnInt(4),
			PixelX: lv.ColumnFloat(5), PixelY: lv.ColumnFloat(6),
		})
	}
	return f, sqlitefile.OneLine(lv.Err())
}

func (r *Reader) strings(sql string) ([]string, error) {
	st, _, err := r.conn.Prepare(sql)
	if err != nil {
		return nil, sqlitefile.OneLine(err)
	}
	defer st.Close()
	var out []string
	for st.Step() {
		out = append(out, st.ColumnText(0))
	}
	return out, sqlitefile.OneLine(st.Err())
}

// Table is the tile table read.
func (r *Reader) Table() string { return r.table }

// Format is the first tile's image format (png, jpg or webp; tileimage),
// "" for a table without tiles. GeoPackage allows PNG and JPEG tiles side
// by side, so an importer that needs each tile's type reads it from the
// tile.
func (r *Reader) Format() string { return r.format }

// Each calls fn with every tile, in the table's order, with its level and
// row turned into the gridset's (rows from the bottom). data is valid
// only during the call: tiles are streamed one at a time. A tile outside
// its tile matrix, at a level the tile matrix table does not describe, or
// not an image of the gridset's tile size ends the walk with an error
// naming it; an error of fn is returned as it is.
func (r *Reader) Each(fn func(idx gridset.Index, data []byte) error) error {
	st, _, err := r.conn.Prepare("SELECT zoom_level, tile_column, tile_row, tile_data FROM " + sqlitefile.Quote(r.table))
	if err != nil {
		return fmt.Errorf("%s: %w", r.path, sqlitefile.OneLine(err))
	}
	defer st.Close()
	g := r.set.Gridset
	for st.Step() {
		zoom, col, row := st.ColumnInt(0), st.ColumnInt64(1), st.ColumnInt64(2)
		z, ok := r.zooms[zoom]
		if !ok {
			return fmt.Errorf("%s: tile %d/%d/%d: zoom level %d is not in gpkg_tile_matrix", r.path, zoom, col, row, zoom)
		}
		m := r.set.Level(z)
		if col < 0 || row < 0 || col >= m.Width || row >= m.Height {
			return fmt.Errorf("%s: tile %d/%d/%d is outside its %d×%d tile matrix", r.path, zoom, col, row, m.Width, m.Height)
		}
		data := st.ColumnRawBlob(3)
		if err := tileimage.Check(data, g.TileWidth, g.TileHeight); err != nil {
			return fmt.Errorf("%s: tile %d/%d/%d: %v", r.path, zoom, col, row, err)
		}
		if err := fn(r.set.FromTopRow(z, col, row), data); err != nil {
			return err
		}
	}
	if err := st.Err(); err != nil {
		return fmt.Errorf("%s: %w", r.path, sqlitefile.OneLine(err))
	}
	return nil
}

// Close closes the file.
func (r *Reader) Close() error { return r.conn.Close() }
