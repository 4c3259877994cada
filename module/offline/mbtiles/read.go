package mbtiles

import (
	"fmt"

	"github.com/ncruces/go-sqlite3"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/sqlitefile"
	"github.com/tilecache/caddy-tilecache/module/offline/tileimage"
	"github.com/tilecache/caddy-tilecache/module/offline/tilematrix"
)

// Reader reads the tiles of an MBTiles file for import into gridset g.
type Reader struct {
	path     string
	conn     *sqlite3.Conn
	g        *gridset.Gridset
	metadata map[string]string
	format   string
}

// Open opens and checks an MBTiles file: an SQLite file (sqlitefile.Open's
// checks), with a tiles table or view of the four spec columns, whose
// first tile is an image of g's tile size, g being the web mercator world
// grid. metadata is read if there is one (the spec wants it; files made by
// other tools sometimes lack it, and nothing here needs it). Each error is
// one line naming the file.
func Open(path string, g *gridset.Gridset) (*Reader, error) {
	conn, err := sqlitefile.Open(path)
	if err != nil {
		return nil, err
	}
	r := &Reader{path: path, conn: conn, g: g, metadata: map[string]string{}}
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
	if tables["tiles"] == "" {
		return fmt.Errorf("not an MBTiles file: no tiles table")
	}
	cols, err := sqlitefile.Columns(r.conn, "tiles")
	if err != nil {
		return sqlitefile.OneLine(err)
	}
	if m := sqlitefile.Missing(cols, "zoom_level", "tile_column", "tile_row", "tile_data"); m != "" {
		return fmt.Errorf("not an MBTiles file: tiles has no %s", m)
	}
	if tables["metadata"] != "" {
		if err := r.readMetadata(); err != nil {
			return sqlitefile.OneLine(err)
		}
	}
	// The tile size is in the tiles only: take the first one's.
	st, _, err := r.conn.Prepare("SELECT tile_data FROM tiles LIMIT 1")
	if err != nil {
		return sqlitefile.OneLine(err)
	}
	defer st.Close()
	w, h := r.g.TileWidth, r.g.TileHeight
	if st.Step() {
		data := st.ColumnRawBlob(0)
		r.format = tileimage.Kind(data)
		if w, h, err = tileimage.Size(data); err != nil {
			return fmt.Errorf("first tile: %v", err)
		}
	} else if err := st.Err(); err != nil {
		return sqlitefile.OneLine(err)
	}
	return tilematrix.CheckWebMercatorQuad(r.g, w, h)
}

func (r *Reader) readMetadata() error {
	st, _, err := r.conn.Prepare("SELECT name, value FROM metadata")
	if err != nil {
		return err
	}
	defer st.Close()
	for st.Step() {
		r.metadata[st.ColumnText(0)] = st.ColumnText(1)
	}
	return st.Err()
}

// Metadata is the metadata table, name → value (empty without one).
func (r *Reader) Metadata() map[string]string { return r.metadata }

// Format is the first tile's image format, png, jpg or webp, "" in a file
// without tiles. The metadata's "format" says what the file claims; a
// mixed tile set has both PNG and JPEG tiles, so an importer that needs
// each tile's type reads it from the tile (tileimage.Kind).
func (r *Reader) Format() string { return r.format }

// Each calls fn with every tile, in the file's order, its row turned into
// the gridset's (counted from the bottom, as MBTiles counts too). data is
// valid only during the call: the tiles are streamed, one at a time in
// memory. A tile outside the gridset, or that is not an image of the
// gridset's tile size, ends the walk with an error naming it; so does an
// error of fn, which is returned as it is.
func (r *Reader) Each(fn func(idx gridset.Index, data []byte) error) error {
	st, _, err := r.conn.Prepare("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles")
	if err != nil {
		return fmt.Errorf("%s: %w", r.path, sqlitefile.OneLine(err))
	}
	defer st.Close()
	for st.Step() {
		idx := gridset.Index{Z: st.ColumnInt(0), X: st.ColumnInt64(1), Y: st.ColumnInt64(2)}
		if idx.Z < 0 || idx.Z >= len(r.g.Levels) || !r.g.GridRange(idx.Z).Contains(idx.X, idx.Y) {
			return fmt.Errorf("%s: tile %d/%d/%d (TMS row) is outside gridset %s", r.path, idx.Z, idx.X, idx.Y, r.g.Name)
		}
		data := st.ColumnRawBlob(3)
		if err := tileimage.Check(data, r.g.TileWidth, r.g.TileHeight); err != nil {
			return fmt.Errorf("%s: tile %d/%d/%d: %v", r.path, idx.Z, idx.X, idx.Y, err)
		}
		if err := fn(idx, data); err != nil {
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
