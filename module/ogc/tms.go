package ogc

import "encoding/xml"

// The TMS 1.0.0 resources (OSGeo Tile Map Service Specification): the
// root lists the service versions, a TileMapService lists tile maps, a
// TileMap describes one and links its levels.

// TMSRoot is the root resource (<tms>/): the service versions.
type TMSRoot struct {
	XMLName  xml.Name          `xml:"Services"`
	Services []TMSServiceEntry `xml:"TileMapService"`
}

// TMSServiceEntry links one version of the service.
type TMSServiceEntry struct {
	Title   string `xml:"title,attr"`
	Version string `xml:"version,attr"`
	Href    string `xml:"href,attr"`
}

// TileMapService is <tms>/1.0.0/: every tile map.
type TileMapService struct {
	XMLName  xml.Name       `xml:"TileMapService"`
	Version  string         `xml:"version,attr"`
	Services string         `xml:"services,attr"`
	Title    string         `xml:"Title"`
	Abstract string         `xml:"Abstract"`
	TileMaps []TileMapEntry `xml:"TileMaps>TileMap"`
}

// TileMapEntry links one tile map.
type TileMapEntry struct {
	Title   string `xml:"title,attr"`
	SRS     string `xml:"srs,attr"`
	Profile string `xml:"profile,attr"`
	Href    string `xml:"href,attr"`
}

// TileMap is one layer in one gridset and one format.
type TileMap struct {
	XMLName        xml.Name       `xml:"TileMap"`
	Version        string         `xml:"version,attr"`
	TileMapService string         `xml:"tilemapservice,attr"`
	Title          string         `xml:"Title"`
	Abstract       string         `xml:"Abstract"`
	SRS            string         `xml:"SRS"`
	BoundingBox    TMSBoundingBox `xml:"BoundingBox"`
	Origin         TMSOrigin      `xml:"Origin"`
	TileFormat     TMSTileFormat  `xml:"TileFormat"`
	TileSets       TMSTileSets    `xml:"TileSets"`
}

// TMSBoundingBox is in the tile map's SRS units, x/y order.
type TMSBoundingBox struct {
	MinX Num `xml:"minx,attr"`
	MinY Num `xml:"miny,attr"`
	MaxX Num `xml:"maxx,attr"`
	MaxY Num `xml:"maxy,attr"`
}

// TMSOrigin is the corner tile 0,0 starts at (bottom left).
type TMSOrigin struct {
	X Num `xml:"x,attr"`
	Y Num `xml:"y,attr"`
}

// TMSTileFormat is the tiles' size and image format.
type TMSTileFormat struct {
	Width     int    `xml:"width,attr"`
	Height    int    `xml:"height,attr"`
	MIMEType  string `xml:"mime-type,attr"`
	Extension string `xml:"extension,attr"`
}

// TMSTileSets lists the levels.
type TMSTileSets struct {
	Profile  string       `xml:"profile,attr"`
	TileSets []TMSTileSet `xml:"TileSet"`
}

// TMSTileSet is one level: its tiles are at Href/<x>/<y>.<extension>.
type TMSTileSet struct {
	Href          string `xml:"href,attr"`
	UnitsPerPixel Num    `xml:"units-per-pixel,attr"`
	Order         int    `xml:"order,attr"`
}
