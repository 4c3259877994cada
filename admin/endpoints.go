package admin

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/tilecache/caddy-tilecache/module/httpx"
	"html"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/cluster"
	"github.com/tilecache/caddy-tilecache/seeder"
)

// listing answers the pending and running tasks as GeoWebCache's
// long-array-array, in JSON or XML.
func (h *Handler) listing(w http.ResponseWriter, rt route) error {
	recs, err := h.engine.List(rt.layer)
	if err != nil {
		return h.failed(w, err)
	}
	if rt.format == "xml" {
		var b strings.Builder
		b.WriteString("<long-array-array>")
		for _, r := range recs {
			b.WriteString("<long-array>")
			for _, v := range r {
				b.WriteString("<long>" + strconv.FormatInt(v, 10) + "</long>")
			}
			b.WriteString("</long-array>")
		}
		b.WriteString("</long-array-array>")
		w.Header().Set("Content-Type", "application/xml")
		_, err := io.WriteString(w, b.String())
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(map[string][][5]int64{"long-array-array": recs})
}

// readBody reads at most limit bytes, answering 413 beyond.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		httpx.Text(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes (max_body)", limit))
		return nil, false
	}
	if err != nil {
		httpx.Text(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// seed accepts a seed, reseed or truncate request for a layer. The path's
// extension picks the parser; the Content-Type need not match.
func (h *Handler) seed(w http.ResponseWriter, r *http.Request, rt route) error {
	body, ok := readBody(w, r, h.MaxBody)
	if !ok {
		return nil
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return httpx.Text(w, http.StatusBadRequest, "empty request body: a seedRequest is expected")
	}
	var req seeder.Request
	var err error
	if rt.format == "json" {
		req, err = parseJSONSeed(body)
	} else {
		req, err = parseXMLSeed(body)
	}
	if err == nil {
		err = h.checkParams(req.Params)
	}
	if err != nil {
		return httpx.Text(w, http.StatusBadRequest, err.Error())
	}
	spec, err := h.engine.Resolve(rt.layer, req)
	return h.submit(w, r, spec, err)
}

// submit starts a resolved task and answers 200 with an empty body and the
// task's own resource in Location, or the resolution's error.
func (h *Handler) submit(w http.ResponseWriter, r *http.Request, spec seeder.Spec, err error) error {
	if err != nil {
		return h.specError(w, err)
	}
	t, status, msg, err := h.submitLimited(spec)
	if status != 0 {
		return httpx.Text(w, status, msg)
	}
	if err != nil {
		return h.specError(w, err)
	}
	w.Header().Set("Location", fmt.Sprintf("%s/rest/tasks/%d.json", restBase(r), t.ID))
	w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) specError(w http.ResponseWriter, err error) error {
	var br *seeder.BadRequest
	switch {
	case errors.As(err, &br):
		return httpx.Text(w, http.StatusBadRequest, br.Msg)
	case errors.Is(err, seeder.ErrUnknownLayer):
		return httpx.Text(w, http.StatusNotFound, err.Error())
	}
	return h.failed(w, err)
}

// failed answers an error that is not the client's: 503 while a
// clustered cache's shared storage does not answer (the task registry is
// there; try again later), else 500. Either way one line that says what.
func (h *Handler) failed(w http.ResponseWriter, err error) error {
	if errors.Is(err, cluster.ErrStorage) {
		h.log.Warn("REST request failed: cluster storage", zap.Error(err))
		w.Header().Set("Retry-After", "5")
		return httpx.Text(w, http.StatusServiceUnavailable, oneLine(err.Error()))
	}
	h.log.Error("REST request failed", zap.Error(err))
	return httpx.Text(w, http.StatusInternalServerError, oneLine(err.Error()))
}

// oneLine keeps an error message to its first line.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// kill terminates tasks as the kill_all form field says and answers an
// HTML page listing them, as GeoWebCache's seed form does.
func (h *Handler) kill(w http.ResponseWriter, r *http.Request, rt route) error {
	limit := h.MaxBody
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	parse := r.ParseForm
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		// curl -F kill_all=all: a form too.
		parse = func() error { return r.ParseMultipartForm(limit) }
		defer func() {
			if r.MultipartForm != nil {
				r.MultipartForm.RemoveAll()
			}
		}()
	}
	if err := parse(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return httpx.Text(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes (max_body)", limit))
		}
		return httpx.Text(w, http.StatusBadRequest, "malformed form: "+err.Error())
	}
	if _, ok := r.Form["kill_all"]; !ok {
		return httpx.Text(w, http.StatusBadRequest, "kill_all is required: one of all|running|pending")
	}
	which, err := seeder.ParseWhich(r.Form.Get("kill_all"))
	if err != nil {
		return httpx.Text(w, http.StatusBadRequest, err.Error())
	}
	killed, finished, err := h.engine.Kill(rt.layer, which)
	if err != nil {
		return h.failed(w, err)
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Tile cache tasks</title></head><body>\n")
	scope := "all layers"
	if rt.layer != "" {
		scope = "layer " + html.EscapeString(rt.layer)
	}
	fmt.Fprintf(&b, "<p>Requested to terminate %s tasks of %s: %d terminated.</p>\n", html.EscapeString(r.Form.Get("kill_all")), scope, len(killed))
	writeList(&b, "Terminated tasks", killed)
	writeList(&b, "Tasks that had already finished", finished)
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, err = io.WriteString(w, b.String())
	return err
}

func writeList(b *strings.Builder, title string, tasks []seeder.Summary) {
	fmt.Fprintf(b, "<h2>%s</h2>\n<ul>\n", title)
	for _, t := range tasks {
		fmt.Fprintf(b, "<li>[%d: %s, %s, %s]</li>\n", t.ID, html.EscapeString(t.Layer), t.Type, t.State)
	}
	b.WriteString("</ul>\n")
}

// task answers a task's own resource (named by the seed POST's Location).
func (h *Handler) task(w http.ResponseWriter, rt route) error {
	info, ok, err := h.engine.Info(rt.id)
	if err != nil {
		return h.failed(w, err)
	}
	if !ok {
		return httpx.Text(w, http.StatusNotFound, fmt.Sprintf("no task %d (finished tasks are kept for a while, then forgotten)", rt.id))
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(info)
}

// killTask ends one task: DELETE on its resource, an extension of the
// contract (GeoWebCache can kill only every running or pending task of a
// layer at once). 204 once killed, 404 for a task unknown, 409 for one
// that has already finished.
func (h *Handler) killTask(w http.ResponseWriter, rt route) error {
	sum, err := h.engine.KillTask(rt.id)
	switch {
	case errors.Is(err, seeder.ErrNoTask):
		return httpx.Text(w, http.StatusNotFound, fmt.Sprintf("no task %d (finished tasks are kept for a while, then forgotten)", rt.id))
	case errors.Is(err, seeder.ErrFinished):
		return httpx.Text(w, http.StatusConflict, fmt.Sprintf("task %d has already finished (%s)", rt.id, sum.State))
	case err != nil:
		return h.failed(w, err)
	}
	h.log.Info("task killed through its resource", zap.Int64("id", sum.ID), zap.String("layer", sum.Layer))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// The mass truncate request types, in the order the list shows them.
var massTypes = []string{"truncateLayer", "truncateExtent"}

func (h *Handler) massTruncateList(w http.ResponseWriter, r *http.Request) error {
	var b strings.Builder
	b.WriteString(`<massTruncateRequests href="`)
	xml.EscapeText(&b, []byte(restBase(r)+"/rest/masstruncate"))
	b.WriteString(`">`)
	for _, t := range massTypes {
		b.WriteString("<requestType>" + t + "</requestType>")
	}
	b.WriteString("</massTruncateRequests>")
	w.Header().Set("Content-Type", "application/xml")
	_, err := io.WriteString(w, b.String())
	return err
}

type xmlMass struct {
	XMLName   xml.Name
	LayerName *string `xml:"layerName"`
	GridSetID string  `xml:"gridSetId"`
	Bounds    *struct {
		Coords struct {
			Double []string `xml:"double"`
		} `xml:"coords"`
	} `xml:"bounds"`
}

func (h *Handler) massTruncate(w http.ResponseWriter, r *http.Request) error {
	// No Content-Type is read as XML, as GeoWebCache does.
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "text/xml" && mt != "application/xml") {
			return httpx.Text(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q is not supported: send text/xml", ct))
		}
	}
	body, ok := readBody(w, r, h.MaxBody)
	if !ok {
		return nil
	}
	if err := checkNoDTD(body); err != nil {
		return httpx.Text(w, http.StatusBadRequest, err.Error())
	}
	var m xmlMass
	if err := xml.Unmarshal(body, &m); err != nil {
		return httpx.Text(w, http.StatusBadRequest, "malformed XML: "+err.Error())
	}
	if m.LayerName == nil || strings.TrimSpace(*m.LayerName) == "" {
		if m.XMLName.Local == "truncateLayer" || m.XMLName.Local == "truncateExtent" {
			return httpx.Text(w, http.StatusBadRequest, m.XMLName.Local+" needs a layerName")
		}
	} else if len(*m.LayerName) > maxLayerNameLength {
		return httpx.Text(w, http.StatusBadRequest, fmt.Sprintf("layerName is longer than %d bytes", maxLayerNameLength))
	}
	switch m.XMLName.Local {
	case "truncateLayer":
		layer := strings.TrimSpace(*m.LayerName)
		c, err := h.cache()
		if err != nil {
			return httpx.Text(w, http.StatusServiceUnavailable, err.Error())
		}
		if _, ok := c.Layer(layer); !ok {
			return httpx.Text(w, http.StatusBadRequest, "Could not find layer "+layer)
		}
		if err := c.Store().TruncateLayer(layer); err != nil {
			h.log.Error("truncateLayer failed", zap.Error(err))
			return httpx.Text(w, http.StatusInternalServerError, "truncating layer "+layer+": "+err.Error())
		}
		h.log.Info("layer truncated", zap.String("layer", layer))
		w.WriteHeader(http.StatusOK)
		return nil
	case "truncateExtent":
		layer := strings.TrimSpace(*m.LayerName)
		if strings.TrimSpace(m.GridSetID) == "" {
			return httpx.Text(w, http.StatusBadRequest, "truncateExtent needs a gridSetId")
		}
		var bounds []float64
		if m.Bounds != nil {
			var err error
			if bounds, err = floats(m.Bounds.Coords.Double); err != nil {
				return httpx.Text(w, http.StatusBadRequest, err.Error())
			}
		}
		spec, err := h.engine.ResolveTruncateExtent(layer, strings.TrimSpace(m.GridSetID), bounds)
		return h.submit(w, r, spec, err)
	}
	return httpx.Text(w, http.StatusBadRequest, fmt.Sprintf("unknown mass truncate request %q: one of %s", m.XMLName.Local, strings.Join(massTypes, ", ")))
}
