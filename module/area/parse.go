package area

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// ParseGeoJSON reads a GeoJSON Polygon or MultiPolygon geometry object, a
// Feature holding one, or a FeatureCollection whose features are all
// Polygons or MultiPolygons (their union). Positions are [x, y] (lon, lat in
// EPSG:4326); further ordinates are ignored. Any other geometry type is an
// error naming it.
func ParseGeoJSON(data []byte, lim Limits) (Geometry, error) {
	var g Geometry
	if err := addGeoJSON(&g, data, "", lim); err != nil {
		return nil, err
	}
	if err := g.validate(lim); err != nil {
		return nil, err
	}
	return g, nil
}

type geoJSONObject struct {
	Type        string            `json:"type"`
	Coordinates json.RawMessage   `json:"coordinates"`
	Geometry    json.RawMessage   `json:"geometry"`
	Features    []json.RawMessage `json:"features"`
}

// addGeoJSON appends the polygons of one GeoJSON object to g; where says
// which feature it is, for error messages.
func addGeoJSON(g *Geometry, data []byte, where string, lim Limits) error {
	var o geoJSONObject
	if err := json.Unmarshal(data, &o); err != nil {
		return fmt.Errorf("GeoJSON%s: %v", where, err)
	}
	switch o.Type {
	case "Polygon", "MultiPolygon":
		if len(bytes.TrimSpace(o.Coordinates)) == 0 {
			return fmt.Errorf("GeoJSON%s: %s has no coordinates", where, o.Type)
		}
		var polys [][][][]float64
		if o.Type == "Polygon" {
			var p [][][]float64
			if err := json.Unmarshal(o.Coordinates, &p); err != nil {
				return fmt.Errorf("GeoJSON%s: Polygon coordinates must be an array of rings of [x, y] positions", where)
			}
			polys = [][][][]float64{p}
		} else if err := json.Unmarshal(o.Coordinates, &polys); err != nil {
			return fmt.Errorf("GeoJSON%s: MultiPolygon coordinates must be an array of polygons, each an array of rings of [x, y] positions", where)
		}
		// Count before copying so an oversized request is refused cheaply.
		n := g.Vertices()
		for _, p := range polys {
			for _, r := range p {
				n += ringVertices(len(r))
			}
		}
		if n > lim.max() {
			return fmt.Errorf("geometry has %d vertices, more than the limit of %d", n, lim.max())
		}
		for i, p := range polys {
			poly := make(Polygon, len(p))
			for j, r := range p {
				ring := make(Ring, len(r))
				for k, pos := range r {
					if len(pos) < 2 {
						return fmt.Errorf("GeoJSON%s: polygon %d ring %d position %d needs at least 2 numbers", where, i, j, k)
					}
					ring[k] = Point{pos[0], pos[1]}
				}
				poly[j] = ring
			}
			*g = append(*g, poly)
		}
		return nil
	case "Feature":
		if len(o.Geometry) == 0 || string(bytes.TrimSpace(o.Geometry)) == "null" {
			return fmt.Errorf("GeoJSON%s: Feature has no geometry", where)
		}
		return addGeoJSON(g, o.Geometry, where, lim)
	case "FeatureCollection":
		if where != "" {
			return fmt.Errorf("GeoJSON%s: a FeatureCollection cannot be nested", where)
		}
		for i, f := range o.Features {
			var probe struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(f, &probe); err != nil || probe.Type != "Feature" {
				return fmt.Errorf("GeoJSON feature %d: not a Feature object", i)
			}
			if err := addGeoJSON(g, f, fmt.Sprintf(" feature %d", i), lim); err != nil {
				return err
			}
		}
		return nil
	case "":
		return fmt.Errorf("GeoJSON%s: missing \"type\"", where)
	default:
		return fmt.Errorf("GeoJSON%s: geometry type %s is not supported; want Polygon or MultiPolygon", where, o.Type)
	}
}

// ParseWKT reads a WKT POLYGON or MULTIPOLYGON (keywords in any case, any
// whitespace, optional Z/M/ZM tag whose extra ordinates are ignored), with an
// optional EWKT "SRID=n;" prefix; srid is 0 when there is none.
func ParseWKT(s string, lim Limits) (g Geometry, srid int, err error) {
	p := &wktParser{s: s, lim: lim.max()}
	rest := strings.TrimSpace(s)
	if len(rest) >= 5 && strings.EqualFold(rest[:5], "SRID=") {
		semi := strings.IndexByte(rest, ';')
		if semi < 0 {
			return nil, 0, fmt.Errorf("WKT: SRID= prefix must end with ';'")
		}
		srid, err = strconv.Atoi(strings.TrimSpace(rest[5:semi]))
		if err != nil || srid <= 0 {
			return nil, 0, fmt.Errorf("WKT: SRID must be a positive integer, not %q", rest[5:semi])
		}
		p.pos = len(s) - len(rest) + semi + 1
	}
	kw := strings.ToUpper(p.word())
	multi := false
	switch kw {
	case "POLYGON":
	case "MULTIPOLYGON":
		multi = true
	case "":
		return nil, 0, p.errorf("want POLYGON or MULTIPOLYGON")
	default:
		return nil, 0, fmt.Errorf("WKT: geometry type %s is not supported; want POLYGON or MULTIPOLYGON", kw)
	}
	dims := 2
	save := p.pos
	switch tag := strings.ToUpper(p.word()); tag {
	case "Z", "M":
		dims = 3
	case "ZM":
		dims = 4
	case "EMPTY":
		return nil, 0, fmt.Errorf("WKT: empty geometry")
	case "":
	default:
		return nil, 0, p.errorf("unexpected %q", tag)
	}
	if dims > 2 {
		save = p.pos
		if strings.EqualFold(p.word(), "EMPTY") {
			return nil, 0, fmt.Errorf("WKT: empty geometry")
		}
	}
	p.pos = save
	p.dims = dims
	if multi {
		err = p.list(func() error {
			poly, err := p.polygon()
			g = append(g, poly)
			return err
		})
	} else {
		var poly Polygon
		poly, err = p.polygon()
		g = Geometry{poly}
	}
	if err != nil {
		return nil, 0, err
	}
	p.space()
	if p.pos != len(p.s) {
		return nil, 0, p.errorf("unexpected text after the geometry")
	}
	if err := g.validate(lim); err != nil {
		return nil, 0, err
	}
	return g, srid, nil
}

type wktParser struct {
	s     string
	pos   int
	dims  int
	lim   int
	count int // vertices of the rings read so far, to refuse oversized input early
}

func (p *wktParser) errorf(format string, a ...any) error {
	return fmt.Errorf("WKT at offset %d: %s", p.pos, fmt.Sprintf(format, a...))
}

func (p *wktParser) space() {
	for p.pos < len(p.s) && unicode.IsSpace(rune(p.s[p.pos])) {
		p.pos++
	}
}

// word reads a run of letters (a keyword), possibly empty.
func (p *wktParser) word() string {
	p.space()
	start := p.pos
	for p.pos < len(p.s) && (p.s[p.pos]|0x20 >= 'a' && p.s[p.pos]|0x20 <= 'z') {
		p.pos++
	}
	return p.s[start:p.pos]
}

func (p *wktParser) expect(c byte) error {
	p.space()
	if p.pos >= len(p.s) || p.s[p.pos] != c {
		return p.errorf("want %q", c)
	}
	p.pos++
	return nil
}

// list reads "( item, item, ... )".
func (p *wktParser) list(item func() error) error {
	if err := p.expect('('); err != nil {
		return err
	}
	for {
		if err := item(); err != nil {
			return err
		}
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		return p.expect(')')
	}
}

func (p *wktParser) polygon() (Polygon, error) {
	var poly Polygon
	err := p.list(func() error {
		var r Ring
		err := p.list(func() error {
			// With this position the ring has len(r)+1, and this one
			// may be the closing one: refuse as soon as even that is over.
			if p.count+ringVertices(len(r)+1) > p.lim {
				return fmt.Errorf("geometry has more than the limit of %d vertices", p.lim)
			}
			var c [4]float64
			for i := 0; i < p.dims; i++ {
				v, err := p.number()
				if err != nil {
					return err
				}
				c[i] = v
			}
			r = append(r, Point{c[0], c[1]})
			return nil
		})
		p.count += ringVertices(len(r))
		poly = append(poly, r)
		return err
	})
	return poly, err
}

func (p *wktParser) number() (float64, error) {
	p.space()
	start := p.pos
	for p.pos < len(p.s) && strings.IndexByte("+-.0123456789eEaAnNiIfFtTyY", p.s[p.pos]) >= 0 {
		p.pos++
	}
	v, err := strconv.ParseFloat(p.s[start:p.pos], 64)
	if err != nil {
		p.pos = start
		return 0, p.errorf("want a number")
	}
	return v, nil
}
