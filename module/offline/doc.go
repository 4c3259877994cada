// Package offline is the home of the packages that move tiles between the
// cache and files people carry away: MBTiles (mbtiles), GeoPackage tiles
// (geopackage), TMS/XYZ directory trees (tiledir), and what they share
// (sqlitefile: a SQLite file built under a temporary name; tilematrix: a
// gridset seen as the tile matrices of those formats; tileimage: what a
// tile's bytes are). docs/offline.md describes the formats written and
// the checks made on import.
package offline
