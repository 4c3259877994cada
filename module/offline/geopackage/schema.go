package geopackage

// The tables of a GeoPackage 1.3 that holds tiles, as the standard
// (OGC 12-128r17) defines them.
const schema = `
CREATE TABLE gpkg_spatial_ref_sys (
  srs_name TEXT NOT NULL,
  srs_id INTEGER NOT NULL PRIMARY KEY,
  organization TEXT NOT NULL,
  organization_coordsys_id INTEGER NOT NULL,
  definition TEXT NOT NULL,
  description TEXT
);
CREATE TABLE gpkg_contents (
  table_name TEXT NOT NULL PRIMARY KEY,
  data_type TEXT NOT NULL,
  identifier TEXT UNIQUE,
  description TEXT DEFAULT '',
  last_change DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  min_x DOUBLE,
  min_y DOUBLE,
  max_x DOUBLE,
  max_y DOUBLE,
  srs_id INTEGER,
  CONSTRAINT fk_gc_r_srs_id FOREIGN KEY (srs_id) REFERENCES gpkg_spatial_ref_sys(srs_id)
);
CREATE TABLE gpkg_tile_matrix_set (
  table_name TEXT NOT NULL PRIMARY KEY,
  srs_id INTEGER NOT NULL,
  min_x DOUBLE NOT NULL,
  min_y DOUBLE NOT NULL,
  max_x DOUBLE NOT NULL,
  max_y DOUBLE NOT NULL,
  CONSTRAINT fk_gtms_table_name FOREIGN KEY (table_name) REFERENCES gpkg_contents(table_name),
  CONSTRAINT fk_gtms_srs FOREIGN KEY (srs_id) REFERENCES gpkg_spatial_ref_sys (srs_id)
);
CREATE TABLE gpkg_tile_matrix (
  table_name TEXT NOT NULL,
  zoom_level INTEGER NOT NULL,
  matrix_width INTEGER NOT NULL,
  matrix_height INTEGER NOT NULL,
  tile_width INTEGER NOT NULL,
  tile_height INTEGER NOT NULL,
  pixel_x_size DOUBLE NOT NULL,
  pixel_y_size DOUBLE NOT NULL,
  CONSTRAINT pk_ttm PRIMARY KEY (table_name, zoom_level),
  CONSTRAINT fk_tmm_table_name FOREIGN KEY (table_name) REFERENCES gpkg_contents(table_name)
);
CREATE TABLE gpkg_extensions (
  table_name TEXT,
  column_name TEXT,
  extension_name TEXT NOT NULL,
  definition TEXT NOT NULL,
  scope TEXT NOT NULL,
  CONSTRAINT ge_tce UNIQUE (table_name, column_name, extension_name)
);
`

// tileTable is a tile pyramid user data table; %s is its quoted name.
const tileTable = `CREATE TABLE %s (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  zoom_level INTEGER NOT NULL,
  tile_column INTEGER NOT NULL,
  tile_row INTEGER NOT NULL,
  tile_data BLOB NOT NULL,
  UNIQUE (zoom_level, tile_column, tile_row)
)`

// srs is a row of gpkg_spatial_ref_sys.
type srs struct {
	name, org   string
	id, orgID   int
	definition  string
	description string
}

// The rows every GeoPackage has (the standard requires the first three),
// and web mercator for the cache's other built-in gridset. The
// definitions are the CRSs' OGC WKT as EPSG publishes them.
var srsRows = []srs{
	{"Undefined cartesian SRS", "NONE", -1, -1, "undefined", "undefined cartesian coordinate reference system"},
	{"Undefined geographic SRS", "NONE", 0, 0, "undefined", "undefined geographic coordinate reference system"},
	{"WGS 84 geodetic", "EPSG", 4326, 4326, wkt4326, "longitude/latitude coordinates in decimal degrees on the WGS 84 spheroid"},
	{"WGS 84 / Pseudo-Mercator", "EPSG", 3857, 3857, wkt3857, "spherical Mercator, as web maps use it"},
}

const wgs84 = `GEOGCS["WGS 84",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563,AUTHORITY["EPSG","7030"]],AUTHORITY["EPSG","6326"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG","8901"]],UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]]`

const wkt4326 = wgs84 + `,AXIS["Latitude",NORTH],AXIS["Longitude",EAST],AUTHORITY["EPSG","4326"]]`

const wkt3857 = `PROJCS["WGS 84 / Pseudo-Mercator",` + wgs84 + `,AUTHORITY["EPSG","4326"]],` +
	`PROJECTION["Mercator_1SP"],PARAMETER["central_meridian",0],PARAMETER["scale_factor",1],PARAMETER["false_easting",0],PARAMETER["false_northing",0],` +
	`UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],` +
	`EXTENSION["PROJ4","+proj=merc +a=6378137 +b=6378137 +lat_ts=0 +lon_0=0 +x_0=0 +y_0=0 +k=1 +units=m +nadgrids=@null +wktext +no_defs"],AUTHORITY["EPSG","3857"]]`

// The extensions the writer may register.
const (
	extWebP = "gpkg_webp"
	defWebP = "http://www.geopackage.org/spec130/#extension_tiles_webp"
	// Levels whose resolutions are not halvings of each other.
	extZoomOther = "gpkg_zoom_other"
	defZoomOther = "http://www.geopackage.org/spec130/#extension_zoom_other_intervals"
)

// applicationID is "GPKG" as a big-endian integer, userVersion 1.3.0.
const (
	applicationID = 0x47504B47
	userVersion   = 10300
)
