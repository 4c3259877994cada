package tilecache

import (
	"strconv"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// Tile indexes as the protocols give them: GeoWebCache's y counts from the
// bottom; WMTS rows and XYZ y from the top.

// parseIndex reads a tile column, row or level: decimal digits only.
func parseIndex(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// flipY turns a row counted from the top into GeoWebCache's y counted from
// the bottom, and back: the same operation. WMTS and XYZ count rows from
// the top, whatever corner the gridset is aligned to; GeoWebCache's index
// always counts from the bottom.
func flipY(l gridset.Level, row int64) int64 { return l.TilesHigh - 1 - row }

// Where a tile falls outside what a layer caches.
type outOfRange int

const (
	inRange outOfRange = iota
	zoomOut            // level outside the gridset or the layer's cached levels
	colOut             // column outside the gridset or the layer's coverage
	rowOut             // row likewise
)

// checkTile says whether a tile (y from the bottom) is one the layer
// caches, and if not which coordinate is out. Every protocol asks it.
func checkTile(g *Grid, idx gridset.Index) outOfRange {
	if idx.Z < g.MinZoom || idx.Z > g.MaxZoom || idx.Z >= len(g.Levels) {
		return zoomOut
	}
	c := g.Coverage[idx.Z]
	if idx.X < c.MinX || idx.X > c.MaxX {
		return colOut
	}
	if idx.Y < c.MinY || idx.Y > c.MaxY {
		return rowOut
	}
	return inRange
}
