package tilecache

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/tilecache/caddy-tilecache/module/demo"
)

// serveDemo hands the request to the demo page.
func (s *services) serveDemo(w http.ResponseWriter, r *http.Request, _ []string) error {
	s.demoPage.ServeHTTP(w, r)
	return nil
}

// buildDemoInfo describes the layers to the demo page. Service URLs are
// relative to the page's directory (<demo>/), so they hold however the
// site mounts this handler. The WMS URL is the upstream's path: the one
// the site passes through to the upstream, which tile_cache answers tiles on.
func (s *services) demoInfo() demo.Info {
	dir := s.demo + "/"
	rel := func(target string) string {
		if target == "" || s.demo == "" {
			return ""
		}
		return relativePath(dir, target)
	}
	wms := "/"
	if u, err := url.Parse(s.cache.cfg.Upstream); err == nil && u.Path != "" {
		wms = u.Path
	}
	info := demo.Info{WMSURL: rel(wms), WMTSURL: rel(s.wmts), TMSURL: rel(s.tms), XYZURL: rel(s.xyz)}
	for _, l := range s.cache.order {
		dl := demo.Layer{Name: l.Name, Transparent: l.transparent}
		for _, f := range l.Formats {
			dl.Formats = append(dl.Formats, f.Name)
		}
		if len(l.styles.configured) > 0 {
			dl.Styles = append([]string(nil), l.styles.configured...)
		}
		for _, g := range l.Grids {
			dg := demo.Gridset{
				Name:       g.Name,
				SRS:        fmt.Sprintf("EPSG:%d", g.SRS),
				Extent:     [4]float64{g.Gridset.Extent.MinX, g.Gridset.Extent.MinY, g.Gridset.Extent.MaxX, g.Gridset.Extent.MaxY},
				Coverage:   [4]float64{g.Area.MinX, g.Area.MinY, g.Area.MaxX, g.Area.MaxY},
				TileWidth:  g.TileWidth,
				TileHeight: g.TileHeight,
				TopLeft:    g.TopLeft,
				MinZoom:    g.MinZoom,
				MaxZoom:    g.MaxZoom,
			}
			for _, lv := range g.Levels {
				dg.Resolutions = append(dg.Resolutions, lv.Resolution)
			}
			dl.Gridsets = append(dl.Gridsets, dg)
		}
		info.Layers = append(info.Layers, dl)
	}
	return info
}
