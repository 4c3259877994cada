package admin

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tilecache/caddy-tilecache/seeder"
)

// errBody is a body the client must fix (400).
type errBody struct{ msg string }

func (e *errBody) Error() string { return e.msg }

func badBody(format string, a ...any) error { return &errBody{fmt.Sprintf(format, a...)} }

// checkNoDTD rejects XML carrying a document type declaration: entity
// definitions are the door to entity-expansion attacks, and no GeoWebCache
// client sends them. It also rejects what xml.Unmarshal would silently
// ignore: a second root element or text after the first (a body of two
// requests must not do the first one).
func checkNoDTD(body []byte) error {
	d := xml.NewDecoder(bytes.NewReader(body))
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return badBody("malformed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.Directive:
			return badBody("XML with a DOCTYPE or entity declarations is not accepted")
		case xml.StartElement:
			if depth == 0 {
				if roots++; roots > 1 {
					return badBody("malformed XML: more than one root element")
				}
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && len(bytes.TrimSpace(tok)) > 0 {
				return badBody("malformed XML: text outside the root element")
			}
		}
	}
}

// xmlSeedRequest is GeoWebCache's seedRequest element. Numbers are read as
// text so that a bad one gets a message naming the field.
type xmlSeedRequest struct {
	XMLName xml.Name `xml:"seedRequest"`
	Name    string   `xml:"name"`
	Bounds  *struct {
		Coords struct {
			Double []string `xml:"double"`
		} `xml:"coords"`
	} `xml:"bounds"`
	SRS *struct {
		Number string `xml:"number"`
	} `xml:"srs"`
	GridSetID   *string `xml:"gridSetId"`
	ZoomStart   *string `xml:"zoomStart"`
	ZoomStop    *string `xml:"zoomStop"`
	Format      *string `xml:"format"`
	Type        *string `xml:"type"`
	ThreadCount *string `xml:"threadCount"`
	Parameters  *struct {
		Entry []struct {
			String []string `xml:"string"`
		} `xml:"entry"`
	} `xml:"parameters"`
	RetryCount  *string `xml:"tileFailureRetryCount"`
	RetryWait   *string `xml:"tileFailureRetryWaitTime"`
	MaxFailures *string `xml:"totalFailuresBeforeAborting"`
	// Extensions (docs/rest.md): a polygon as WKT or GeoJSON text, its
	// CRS, a buffer in pixels, every stored parameter set.
	Geometry    *string `xml:"geometry"`
	GeometrySRS *string `xml:"geometrySrs"`
	Buffer      *string `xml:"buffer"`
	AllParams   *string `xml:"allParameters"`
}

func parseXMLSeed(body []byte) (seeder.Request, error) {
	var req seeder.Request
	if err := checkNoDTD(body); err != nil {
		return req, err
	}
	var x xmlSeedRequest
	if err := xml.Unmarshal(body, &x); err != nil {
		if strings.Contains(err.Error(), "expected element type") {
			return req, badBody("the root element must be seedRequest")
		}
		return req, badBody("malformed XML: %v", err)
	}
	var err error
	text := func(field string, p *string, dst **int) {
		if p == nil || err != nil {
			return
		}
		var v int
		if v, err = strconv.Atoi(strings.TrimSpace(*p)); err != nil {
			err = badBody("%s must be an integer, not %q", field, strings.TrimSpace(*p))
			return
		}
		*dst = &v
	}
	text("zoomStart", x.ZoomStart, &req.ZoomStart)
	text("zoomStop", x.ZoomStop, &req.ZoomStop)
	text("threadCount", x.ThreadCount, &req.ThreadCount)
	text("tileFailureRetryCount", x.RetryCount, &req.RetryCount)
	if x.SRS != nil {
		text("srs number", &x.SRS.Number, &req.SRS)
	}
	var wait, maxFail *int
	text("tileFailureRetryWaitTime", x.RetryWait, &wait)
	text("totalFailuresBeforeAborting", x.MaxFailures, &maxFail)
	if err != nil {
		return req, err
	}
	req.RetryWaitMS, req.MaxFailures = widen(wait), widen(maxFail)
	if x.GridSetID != nil {
		req.GridsetID = strings.TrimSpace(*x.GridSetID)
	}
	if x.Format != nil {
		req.Format = strings.TrimSpace(*x.Format)
	}
	if x.Type != nil {
		req.Type = strings.TrimSpace(*x.Type)
		if req.Type == "" {
			return req, badBody("type must be one of seed, reseed, truncate")
		}
	}
	if x.Bounds != nil {
		if req.Bounds, err = floats(x.Bounds.Coords.Double); err != nil {
			return req, err
		}
	}
	if x.Geometry != nil {
		req.Geometry = []byte(strings.TrimSpace(*x.Geometry))
		if len(req.Geometry) == 0 {
			return req, badBody("geometry is empty: a WKT or GeoJSON polygon is expected")
		}
	}
	if x.GeometrySRS != nil {
		req.GeometrySRS = strings.TrimSpace(*x.GeometrySRS)
	}
	if x.Buffer != nil {
		v, err := strconv.ParseFloat(strings.TrimSpace(*x.Buffer), 64)
		if err != nil {
			return req, badBody("buffer must be a number of pixels, not %q", truncated(strings.TrimSpace(*x.Buffer)))
		}
		req.Buffer = &v
	}
	if x.AllParams != nil {
		if req.AllParams, err = strconv.ParseBool(strings.TrimSpace(*x.AllParams)); err != nil {
			return req, badBody("allParameters must be true or false")
		}
	}
	if x.Parameters != nil {
		req.Params = map[string]string{}
		for _, e := range x.Parameters.Entry {
			if len(e.String) != 2 {
				return req, badBody("each parameters entry needs two string elements: name, value")
			}
			req.Params[e.String[0]] = e.String[1]
		}
	}
	return req, nil
}

func widen(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

func floats(ss []string) ([]float64, error) {
	out := make([]float64, len(ss))
	for i, s := range ss {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, badBody("bounds: %q is not a number", strings.TrimSpace(s))
		}
		out[i] = v
	}
	return out, nil
}

// parseJSONSeed reads GeoWebCache's JSON form: the XML tree written as
// objects, numbers possibly as strings, a single entry possibly not in an
// array; a plain parameter map is accepted too.
func parseJSONSeed(body []byte) (seeder.Request, error) {
	var req seeder.Request
	var root map[string]json.RawMessage
	if err := json.Unmarshal(body, &root); err != nil {
		return req, badBody("malformed JSON: %v", err)
	}
	raw, ok := root["seedRequest"]
	if !ok || len(root) != 1 {
		return req, badBody("the JSON must be one object with a single member seedRequest")
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil || f == nil {
		return req, badBody("seedRequest must be an object")
	}
	var err error
	intField := func(name string, dst **int) {
		if v, ok := f[name]; ok && err == nil {
			var n int
			if n, err = jsonInt(name, v); err == nil {
				*dst = &n
			}
		}
	}
	intField("zoomStart", &req.ZoomStart)
	intField("zoomStop", &req.ZoomStop)
	intField("threadCount", &req.ThreadCount)
	intField("tileFailureRetryCount", &req.RetryCount)
	var wait, maxFail *int
	intField("tileFailureRetryWaitTime", &wait)
	intField("totalFailuresBeforeAborting", &maxFail)
	if err != nil {
		return req, err
	}
	req.RetryWaitMS, req.MaxFailures = widen(wait), widen(maxFail)
	for name, dst := range map[string]*string{"gridSetId": &req.GridsetID, "format": &req.Format, "type": &req.Type} {
		if v, ok := f[name]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return req, badBody("%s must be a string", name)
			}
		}
	}
	if _, ok := f["type"]; ok && req.Type == "" {
		return req, badBody("type must be one of seed, reseed, truncate")
	}
	if v, ok := f["srs"]; ok {
		var srs map[string]json.RawMessage
		if err := json.Unmarshal(v, &srs); err != nil || srs["number"] == nil {
			return req, badBody("srs must be an object with a number")
		}
		n, err := jsonInt("srs number", srs["number"])
		if err != nil {
			return req, err
		}
		req.SRS = &n
	}
	if v, ok := f["bounds"]; ok {
		var b struct {
			Coords struct {
				Double []json.RawMessage `json:"double"`
			} `json:"coords"`
		}
		if err := json.Unmarshal(v, &b); err != nil {
			return req, badBody("bounds must be {\"coords\":{\"double\":[minx,miny,maxx,maxy]}}")
		}
		for _, d := range b.Coords.Double {
			x, err := jsonFloat(d)
			if err != nil {
				return req, err
			}
			req.Bounds = append(req.Bounds, x)
		}
		if req.Bounds == nil {
			req.Bounds = []float64{}
		}
	}
	if v, ok := f["parameters"]; ok {
		if req.Params, err = jsonParams(v); err != nil {
			return req, err
		}
	}
	return req, jsonExtensions(f, &req)
}

// jsonExtensions reads the fields GeoWebCache does not have: geometry (a
// GeoJSON object, or WKT or GeoJSON as a string), geometrySrs, buffer,
// allParameters, and an export's exportFormat and cachedOnly.
func jsonExtensions(f map[string]json.RawMessage, req *seeder.Request) error {
	if v, ok := f["geometry"]; ok {
		var text string
		switch t := bytes.TrimSpace(v); {
		case len(t) > 0 && t[0] == '{':
			req.Geometry = t
		case json.Unmarshal(t, &text) == nil && strings.TrimSpace(text) != "":
			req.Geometry = []byte(strings.TrimSpace(text))
		default:
			return badBody("geometry must be a GeoJSON object, or WKT or GeoJSON in a string")
		}
	}
	if v, ok := f["geometrySrs"]; ok {
		if err := json.Unmarshal(v, &req.GeometrySRS); err != nil {
			return badBody("geometrySrs must be a string such as \"EPSG:3857\"")
		}
	}
	if v, ok := f["buffer"]; ok {
		b, err := jsonFloat(v)
		if err != nil {
			return badBody("buffer must be a number of pixels, not %s", truncated(string(v)))
		}
		req.Buffer = &b
	}
	if v, ok := f["allParameters"]; ok {
		var b bool
		var s string
		switch {
		case json.Unmarshal(v, &b) == nil:
		case json.Unmarshal(v, &s) == nil && (s == "true" || s == "false"):
			b = s == "true"
		default:
			return badBody("allParameters must be true or false")
		}
		req.AllParams = b
	}
	if v, ok := f["exportFormat"]; ok {
		if err := json.Unmarshal(v, &req.ExportFormat); err != nil {
			return badBody("exportFormat must be a string: mbtiles or gpkg")
		}
	}
	if v, ok := f["cachedOnly"]; ok {
		if err := json.Unmarshal(v, &req.CachedOnly); err != nil {
			return badBody("cachedOnly must be true or false")
		}
	}
	return nil
}

func jsonInt(name string, v json.RawMessage) (int, error) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err == nil {
		if i, err := strconv.Atoi(string(n)); err == nil {
			return i, nil
		}
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		if i, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
			return i, nil
		}
	}
	return 0, badBody("%s must be an integer, not %s", name, truncated(string(v)))
}

func jsonFloat(v json.RawMessage) (float64, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err == nil {
		return f, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f, nil
		}
	}
	return 0, badBody("bounds: %s is not a number", truncated(string(v)))
}

// jsonParams accepts {"entry":[{"string":["K","V"]},...]}, {"entry":{"string":["K","V"]}}
// and the plain {"K":"V"}.
func jsonParams(v json.RawMessage) (map[string]string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(v, &obj); err != nil {
		return nil, badBody("parameters must be an object")
	}
	out := map[string]string{}
	entry, ok := obj["entry"]
	if !ok {
		for k, raw := range obj {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, badBody("parameter %s must have a string value", k)
			}
			out[k] = s
		}
		return out, nil
	}
	type pair struct {
		String []string `json:"string"`
	}
	var entries []pair
	if err := json.Unmarshal(entry, &entries); err != nil {
		var one pair
		if err := json.Unmarshal(entry, &one); err != nil {
			return nil, badBody("parameters.entry must be {\"string\":[name,value]} or a list of them")
		}
		entries = []pair{one}
	}
	for _, e := range entries {
		if len(e.String) != 2 {
			return nil, badBody("each parameters entry needs two strings: name, value")
		}
		out[e.String[0]] = e.String[1]
	}
	return out, nil
}

func truncated(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}
