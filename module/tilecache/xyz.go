package tilecache

import (
	"net/http"

	"github.com/tilecache/caddy-tilecache/module/gridset"
)

// XYZ (slippy map) tiles: <xyz>/<layer>/<gridset>/<z>/<x>/<y>.<ext>, y
// counted from the top (y = TilesHigh-1-GeoWebCache's y). The gridset is
// named as configured ("EPSG:900913"), or by an SRS that is one of the
// layer's gridsets' ("EPSG:3857").

func (s *services) serveXYZ(w http.ResponseWriter, r *http.Request, segs []string) error {
	if !methodAllowed(w, r) {
		return nil
	}
	tr, e := s.routeXYZ(r, segs)
	if e != nil {
		writeText(w, e)
		return nil
	}
	return s.cache.serveTile(w, r, &tr)
}

func (s *services) routeXYZ(r *http.Request, segs []string) (tr tileRequest, e *svcError) {
	if len(segs) != 5 {
		return tr, errorf(http.StatusNotFound, "", "", "no such XYZ resource: a tile is <layer>/<gridset>/<z>/<x>/<y>.<ext>")
	}
	l := s.cache.layers[segs[0]]
	if l == nil {
		return tr, errorf(http.StatusNotFound, "", "", "unknown layer %q", segs[0])
	}
	g := l.gridByNameOrSRS(segs[1])
	if g == nil {
		return tr, errorf(http.StatusNotFound, "", "", "layer %s has no gridset %q", l.Name, segs[1])
	}
	ys, ext, ok := splitExt(segs[4])
	if !ok {
		return tr, errorf(http.StatusNotFound, "", "", "no such XYZ resource: a tile is <z>/<x>/<y>.<ext>")
	}
	f := l.formatByExt(ext)
	if f == nil {
		return tr, errorf(http.StatusNotFound, "", "", "layer %s is not cached as .%s", l.Name, ext)
	}
	z, okZ := parseIndex(segs[2])
	x, okX := parseIndex(segs[3])
	y, okY := parseIndex(ys)
	if !okZ || !okX || !okY {
		return tr, errorf(http.StatusBadRequest, "", "", "tile coordinates must be whole numbers: %s/%s/%s", segs[2], segs[3], ys)
	}
	if z >= int64(len(g.Levels)) {
		return tr, errorf(http.StatusNotFound, "", "", "gridset %s has no level %d", g.Name, z)
	}
	lv := g.Levels[z]
	idx := gridset.Index{X: x, Y: -1, Z: int(z)}
	if y < lv.TilesHigh {
		idx.Y = flipY(lv, y)
	}
	if e := notCached(l, g, idx, y); e != nil {
		return tr, e
	}
	v, e := s.tileParams(r, l)
	if e != nil {
		return tr, e
	}
	return tileRequest{layer: l, grid: g, format: f, index: idx, params: v}, nil
}
