// Package mbtiles writes and reads MBTiles 1.3 files of raster tiles
// (https://github.com/mapbox/mbtiles-spec/blob/master/1.3/spec.md).
//
// MBTiles assumes the web mercator world grid (EPSG:3857, 2^z × 2^z tiles at
// zoom z, rows counted from the bottom as TMS counts them); both Create and
// Open refuse any other gridset. The cache's own rows also count from the
// bottom (gridset.Index), so tile_row is the index's Y, whichever corner the
// gridset's origin is at.
//
// The writer stores each distinct image once: tiles are rows of a `map`
// table that point at rows of an `images` table, and `tiles` is a view
// joining them, the layout MapProxy, mbutil and GeoWebCache use, which
// every MBTiles reader reads through the view. Rendered maps repeat tiles
// (open sea, empty land) by the thousand.
package mbtiles

import (
	"crypto/sha256"
	"fmt"
	"math"
	"strconv"

	"github.com/ncruces/go-sqlite3"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/sqlitefile"
	"github.com/tilecache/caddy-tilecache/module/offline/tilematrix"
)

// Metadata is what the metadata table says of the tile set. Zero fields
// are filled in or left out as their comments say.
type Metadata struct {
	Name        string // required by the spec; "" → the file's base name is the caller's to give, "tiles" here
	Description string
	Attribution string
	Version     string // the tile set's version, not the spec's
	Type        string // "baselayer" (default) or "overlay"
	// Format is png, jpg or webp (FormatOf maps the cache's formats).
	Format string
	// Bounds in WGS84 degrees; nil: the tiles of the highest zoom level
	// written.
	Bounds *gridset.BBox
	// Center is longitude, latitude, zoom; nil: the middle of Bounds at
	// the lowest zoom level written, where the whole area shows.
	Center *[3]float64
}

// FormatOf is the MBTiles format of a tile format of the cache (a MIME
// type, as imaging names them). The mixed formats (image/vnd.jpeg-png and
// image/vnd.jpeg-png8: JPEG where a tile is opaque, PNG where it is not)
// are written as png: a reader that trusts the metadata then keeps the
// alpha channel the PNG tiles need, and every reader we know (GDAL,
// MapLibre, QGIS) decodes each tile by its own signature anyway, so the
// JPEG tiles still show.
func FormatOf(mime string) (string, error) {
	switch mime {
	case "image/png", "image/png8", "image/vnd.jpeg-png", "image/vnd.jpeg-png8":
		return "png", nil
	case "image/jpeg":
		return "jpg", nil
	case "image/webp":
		return "webp", nil
	}
	return "", fmt.Errorf("mbtiles: no MBTiles format for %q", mime)
}

// The schema. map has no rowid (its key is the tile's address, so a
// second index would only repeat it); images' rowid is the tile_id the
// map points at.
const schema = `
CREATE TABLE metadata (name TEXT, value TEXT);
CREATE UNIQUE INDEX metadata_name ON metadata (name);
CREATE TABLE images (tile_id INTEGER PRIMARY KEY, tile_data BLOB NOT NULL);
CREATE TABLE map (zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL, tile_id INTEGER NOT NULL,
  PRIMARY KEY (zoom_level, tile_column, tile_row)) WITHOUT ROWID;
CREATE VIEW tiles AS SELECT map.zoom_level AS zoom_level, map.tile_column AS tile_column, map.tile_row AS tile_row, images.tile_data AS tile_data
  FROM map JOIN images ON images.tile_id = map.tile_id;
`

// hashes is where a repeated image is found, by its hash: in a scratch
// database beside the file (sqlitefile.AttachScratch), not in the file,
// which needs no index of them once written (16 bytes and an index entry
// an image, about 1 % of a 5 KB tile). The hashes are random keys, so
// each insert lands on a random page of their index: the scratch database
// gives them small pages and a cache of their own, which bounds the
// memory they take. (When the file had 64 KB pages and the index was in
// it, a million tiles' export ran at half the rate.)
const (
	hashes       = "CREATE TABLE scratch.hashes (hash BLOB PRIMARY KEY, tile_id INTEGER NOT NULL) WITHOUT ROWID"
	hashPageSize = 4096
	hashCacheKiB = 64 << 10
)

// hashSize is how much of the image's SHA-256 is kept. A collision would
// silently show one tile in another's place, so the hash is a
// cryptographic one (SHA-256 runs at over 1 GB/s with the CPU's SHA
// instructions: a few per cent of a tile's export); 128 bits leave the
// chance of any collision among 10¹² tiles below 10⁻¹⁴, and 16 bytes
// instead of 32 keep the index within the file-size budget.
const hashSize = 16

// Writer writes one MBTiles file. Not safe for concurrent use.
type Writer struct {
	b        *sqlitefile.Builder
	g        *gridset.Gridset
	md       Metadata
	addImage *sqlite3.Stmt
	findHash *sqlite3.Stmt
	addHash  *sqlite3.Stmt
	addMap   *sqlite3.Stmt
	stats    Stats
	levels   map[int]*gridset.Range // what was written, per level
	// Images wait in a window and go in packed so that the images
	// table's leaf pages come out full (sqlitefile.Window); their tiles
	// wait with them.
	window       *sqlitefile.Window
	windowHashes map[[hashSize]byte]int
	images       []pendingImage
	tiles        []pendingTile
	ids          []int64 // flush's tile_id of each image of the window
	lastID       int64   // the last tile_id written
}

// Stats counts what a writer wrote.
type Stats struct {
	Tiles      int64 // rows of map
	Images     int64 // distinct images (rows of images)
	Bytes      int64 // bytes of all tiles, before deduplication
	ImageBytes int64 // bytes of the distinct images
}

// Create starts path (as path.partial until Close; sqlitefile) for tiles
// of g, which must be the web mercator world grid.
func Create(path string, g *gridset.Gridset, md Metadata) (*Writer, error) {
	if err := tilematrix.CheckWebMercatorQuad(g, g.TileWidth, g.TileHeight); err != nil {
		return nil, fmt.Errorf("mbtiles: %w", err)
	}
	switch md.Format {
	case "png", "jpg", "webp":
	default:
		return nil, fmt.Errorf("mbtiles: format %q is not png, jpg or webp", md.Format)
	}
	switch md.Type {
	case "":
		md.Type = "baselayer"
	case "baselayer", "overlay":
	default:
		return nil, fmt.Errorf("mbtiles: type %q is not baselayer or overlay", md.Type)
	}
	if md.Name == "" {
		md.Name = "tiles"
	}
	b, err := sqlitefile.Create(path, sqlitefile.TilePageSize)
	if err != nil {
		return nil, fmt.Errorf("mbtiles: %w", err)
	}
	w := &Writer{b: b, g: g, md: md, levels: map[int]*gridset.Range{},
		window: sqlitefile.NewWindow(sqlitefile.TilePageSize), windowHashes: map[[hashSize]byte]int{}}
	if err := w.init(); err != nil {
		b.Abort()
		return nil, fmt.Errorf("mbtiles: %w", err)
	}
	return w, nil
}

func (w *Writer) init() error {
	if err := w.b.Exec(schema); err != nil {
		return err
	}
	if err := w.b.AttachScratch(hashPageSize, hashCacheKiB, hashes); err != nil {
		return err
	}
	c := w.b.Conn()
	var err error
	if w.addImage, _, err = c.Prepare("INSERT INTO images (tile_id, tile_data) VALUES (?, ?)"); err != nil {
		return err
	}
	if w.findHash, _, err = c.Prepare("SELECT tile_id FROM scratch.hashes WHERE hash = ?"); err != nil {
		return err
	}
	if w.addHash, _, err = c.Prepare("INSERT INTO scratch.hashes (hash, tile_id) VALUES (?, ?)"); err != nil {
		return err
	}
	w.addMap, _, err = c.Prepare("INSERT INTO map (zoom_level, tile_column, tile_row, tile_id) VALUES (?, ?, ?, ?)")
	return err
}

// Put writes one tile. A tile written twice is an error, reported by Put
// or a later call. After an error the file is not to be finished: Abort
// it.
func (w *Writer) Put(idx gridset.Index, data []byte) error {
	if idx.Z < 0 || idx.Z >= len(w.g.Levels) || !w.g.GridRange(idx.Z).Contains(idx.X, idx.Y) {
		return fmt.Errorf("mbtiles: tile %d/%d/%d is outside gridset %s", idx.Z, idx.X, idx.Y, w.g.Name)
	}
	if len(data) == 0 {
		return fmt.Errorf("mbtiles: tile %d/%d/%d is empty", idx.Z, idx.X, idx.Y)
	}
	id, err := w.image(idx, data)
	if err != nil {
		return fmt.Errorf("mbtiles: tile %d/%d/%d: %w", idx.Z, idx.X, idx.Y, err)
	}
	w.tiles = append(w.tiles, pendingTile{idx: idx, id: id})
	w.stats.Tiles++
	w.stats.Bytes += int64(len(data))
	r := w.levels[idx.Z]
	if r == nil {
		w.levels[idx.Z] = &gridset.Range{MinX: idx.X, MinY: idx.Y, MaxX: idx.X, MaxY: idx.Y}
	} else {
		r.MinX, r.MinY = min(r.MinX, idx.X), min(r.MinY, idx.Y)
		r.MaxX, r.MaxY = max(r.MaxX, idx.X), max(r.MaxY, idx.Y)
	}
	if w.window.Full() || len(w.tiles) >= maxPendingTiles {
		return w.flush()
	}
	return nil
}

// maxPendingTiles bounds the map rows held with the window: tiles that
// repeat a written image (open sea by the million) add no image to fill
// the window, and would otherwise wait without end.
const maxPendingTiles = 8192

// pendingTile is a map row waiting for the window's images to be
// written: id is the image's tile_id, or -1-i for image i of the window.
type pendingTile struct {
	idx gridset.Index
	id  int64
}

// image finds data's image among those written and those in the window,
// or adds it to the window, and returns its id (pendingTile's).
func (w *Writer) image(idx gridset.Index, data []byte) (int64, error) {
	sum := sha256.Sum256(data)
	var h [hashSize]byte
	copy(h[:], sum[:])
	if i, ok := w.windowHashes[h]; ok {
		return -1 - int64(i), nil
	}
	f := w.findHash
	f.BindBlob(1, h[:])
	if f.Step() {
		id := f.ColumnInt64(0)
		return id, f.Reset()
	}
	if err := f.Reset(); err != nil {
		return 0, err
	}
	i := w.window.Add(data, sqlitefile.RecordSize(sqlitefile.Null, sqlitefile.Blob(len(data))))
	w.windowHashes[h] = i
	w.images = append(w.images, pendingImage{hash: h, first: idx})
	w.stats.Images++
	w.stats.ImageBytes += int64(len(data))
	return -1 - int64(i), nil
}

// pendingImage is an image in the window, beside its blob: its hash and
// the first tile that showed it (for errors).
type pendingImage struct {
	hash  [hashSize]byte
	first gridset.Index
}

// flush writes the window's images in packed order, with tile_ids given
// in that order, their hashes, and then the map rows in the order they
// came (map's key is the tile's address: in that order its inserts are
// appends).
func (w *Writer) flush() error {
	order := w.window.Order(w.lastID + 1)
	ids := w.ids[:0]
	for range order {
		ids = append(ids, 0)
	}
	for _, i := range order {
		w.lastID++
		ids[i] = w.lastID
		img, data := w.images[i], w.window.Blob(i)
		if err := w.b.Begin(); err != nil {
			return err
		}
		w.addImage.BindInt64(1, w.lastID)
		w.addImage.BindBlob(2, data)
		if err := w.addImage.Exec(); err != nil {
			return fmt.Errorf("mbtiles: tile %d/%d/%d: %w", img.first.Z, img.first.X, img.first.Y, err)
		}
		w.addHash.BindBlob(1, img.hash[:])
		w.addHash.BindInt64(2, w.lastID)
		if err := w.addHash.Exec(); err != nil {
			return fmt.Errorf("mbtiles: tile %d/%d/%d: %w", img.first.Z, img.first.X, img.first.Y, err)
		}
		if err := w.b.Added(len(data)); err != nil {
			return err
		}
	}
	st := w.addMap
	for _, t := range w.tiles {
		id := t.id
		if id < 0 {
			id = ids[-1-id]
		}
		if err := w.b.Begin(); err != nil {
			return err
		}
		st.BindInt(1, t.idx.Z)
		st.BindInt64(2, t.idx.X)
		st.BindInt64(3, t.idx.Y) // TMS row: counted from the bottom, as the index is
		st.BindInt64(4, id)
		if err := st.Exec(); err != nil {
			return fmt.Errorf("mbtiles: tile %d/%d/%d: %w", t.idx.Z, t.idx.X, t.idx.Y, err)
		}
		if err := w.b.Added(0); err != nil {
			return err
		}
	}
	w.window.Reset()
	clear(w.windowHashes)
	w.images, w.tiles, w.ids = w.images[:0], w.tiles[:0], ids
	return nil
}

// Stats is what has been written so far.
func (w *Writer) Stats() Stats { return w.stats }

// Close writes the metadata, checks the file and gives it its name. On an
// error nothing is left under either name.
func (w *Writer) Close() error {
	err := w.flush()
	for _, st := range []*sqlite3.Stmt{w.addImage, w.findHash, w.addHash, w.addMap} {
		st.Close()
	}
	if err != nil {
		w.b.Abort()
		return err
	}
	if err := w.writeMetadata(); err != nil {
		w.b.Abort()
		return fmt.Errorf("mbtiles: %w", err)
	}
	if err := w.b.Finish(w.check); err != nil {
		return fmt.Errorf("mbtiles: %w", err)
	}
	return nil
}

// Abort gives up the file: nothing is left under either name.
func (w *Writer) Abort() error {
	for _, st := range []*sqlite3.Stmt{w.addImage, w.findHash, w.addHash, w.addMap} {
		st.Close()
	}
	return w.b.Abort()
}

// check makes sure the file holds what was put, before it gets its name.
func (w *Writer) check(c *sqlite3.Conn) error {
	for _, q := range []struct {
		sql  string
		want int64
	}{
		{"SELECT count(*) FROM map", w.stats.Tiles},
		{"SELECT count(*) FROM images", w.stats.Images},
	} {
		st, _, err := c.Prepare(q.sql)
		if err != nil {
			return err
		}
		st.Step()
		n := st.ColumnInt64(0)
		err = st.Close()
		if err != nil {
			return err
		}
		if n != q.want {
			return fmt.Errorf("%s gave %d, %d were written", q.sql, n, q.want)
		}
	}
	return nil
}

func (w *Writer) writeMetadata() error {
	if err := w.b.Begin(); err != nil {
		return err
	}
	minZ, maxZ := -1, -1
	for z := range w.levels {
		if minZ < 0 || z < minZ {
			minZ = z
		}
		maxZ = max(maxZ, z)
	}
	md := w.md
	rows := [][2]string{{"name", md.Name}, {"format", md.Format}, {"type", md.Type}}
	for _, kv := range [][2]string{{"description", md.Description}, {"attribution", md.Attribution}, {"version", md.Version}} {
		if kv[1] != "" {
			rows = append(rows, kv)
		}
	}
	if minZ >= 0 {
		bounds := md.Bounds
		if bounds == nil {
			r := w.levels[maxZ]
			lo := w.g.TileBBox(gridset.Index{Z: maxZ, X: r.MinX, Y: r.MinY})
			hi := w.g.TileBBox(gridset.Index{Z: maxZ, X: r.MaxX, Y: r.MaxY})
			b, _ := w.g.ToLonLat(lo.Union(hi))
			bounds = &b
		}
		center := md.Center
		if center == nil {
			center = &[3]float64{(bounds.MinX + bounds.MaxX) / 2, (bounds.MinY + bounds.MaxY) / 2, float64(minZ)}
		}
		rows = append(rows,
			[2]string{"minzoom", strconv.Itoa(minZ)},
			[2]string{"maxzoom", strconv.Itoa(maxZ)},
			[2]string{"bounds", fmt.Sprintf("%s,%s,%s,%s", num(bounds.MinX), num(bounds.MinY), num(bounds.MaxX), num(bounds.MaxY))},
			[2]string{"center", fmt.Sprintf("%s,%s,%d", num(center[0]), num(center[1]), int(math.Round(center[2])))},
		)
	}
	st, _, err := w.b.Conn().Prepare("INSERT INTO metadata (name, value) VALUES (?, ?)")
	if err != nil {
		return err
	}
	defer st.Close()
	for _, kv := range rows {
		st.BindText(1, kv[0])
		st.BindText(2, kv[1])
		if err := st.Exec(); err != nil {
			return fmt.Errorf("metadata %s: %w", kv[0], err)
		}
	}
	return nil
}

// num prints a coordinate in degrees to 10⁻⁷ (1 cm), so that the web
// mercator world, which is ±179.99999997 after the round trip through its
// rounded extent, reads ±180.
func num(f float64) string { return strconv.FormatFloat(math.Round(f*1e7)/1e7, 'f', -1, 64) }
