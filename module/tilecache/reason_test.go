package tilecache

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// exceptionUpstream answers every GetMap with whatever it is set to: an
// exception document in one of the shapes WMS servers use, or an image.
type exceptionUpstream struct {
	*httptest.Server
	mu          sync.Mutex
	status      int
	contentType string
	body        []byte
	getMaps     int
}

func newExceptionUpstream(t *testing.T) *exceptionUpstream {
	u := &exceptionUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.getMaps++
		if u.body == nil { // a good answer: a metatile of the size asked
			var wd, ht int
			fmt.Sscan(r.URL.Query().Get("WIDTH"), &wd)
			fmt.Sscan(r.URL.Query().Get("HEIGHT"), &ht)
			var b bytes.Buffer
			png.Encode(&b, image.NewNRGBA(image.Rect(0, 0, wd, ht)))
			w.Header().Set("Content-Type", "image/png")
			w.Write(b.Bytes())
			return
		}
		w.Header().Set("Content-Type", u.contentType)
		w.WriteHeader(u.status)
		w.Write(u.body)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *exceptionUpstream) set(status int, contentType string, body []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.status, u.contentType, u.body = status, contentType, body
}

// An upstream's exception reaches the operator: the 502's body carries its
// code and text after the cache's own message, as one line of bounded
// length; the log line of the failure carries them as well, also as fields
// of their own; nothing is stored, so the next request asks again.
func TestUpstreamReasonInThe502AndTheLog(t *testing.T) {
	up := newExceptionUpstream(t)
	cfg := testConfig()
	cfg.Upstream = up.URL + "/wms"
	cfg.Timeout = caddy.Duration(5e9)
	// A cache per case: the failure log is sampled (3 lines per message
	// per 10 s), and each case's line is to be seen.
	var logs *observer.ObservedLogs
	var h *Handler
	fresh := func(i int) {
		c := compileTest(t, cfg)
		c.name = fmt.Sprintf("%s-%d", t.Name(), i)
		var core zapcore.Core
		core, logs = observer.New(zap.InfoLevel)
		st, err := store.Open(t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.open(zap.New(core), st, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Release() })
		h = handlerOf(t, c, nil)
	}

	huge := []byte(`<ServiceExceptionReport><ServiceException code="Huge">` +
		strings.Repeat("line\r\n\x1b[2J", 200000) + `</ServiceException></ServiceExceptionReport>`)
	for i, tc := range []struct {
		name        string
		status      int
		contentType string
		body        []byte
		want        string // in the 502 after the cache's message, and in the log
	}{
		{"MapServer: WMS 1.1.1 exception, HTTP 200", 200, "application/vnd.ogc.se_xml; charset=UTF-8",
			[]byte("<?xml version='1.0' encoding=\"UTF-8\" standalone=\"no\" ?>\n<!DOCTYPE ServiceExceptionReport SYSTEM \"http://schemas.opengis.net/wms/1.1.1/exception_1_1_1.dtd\">\n<ServiceExceptionReport version=\"1.1.1\">\n<ServiceException code=\"LayerNotDefined\">\nmsWMSLoadGetMapParams(): WMS server error. Invalid layer(s) given in the LAYERS parameter.\n</ServiceException>\n</ServiceExceptionReport>"),
			`GetMap answered HTTP 200 with "application/vnd.ogc.se_xml; charset=UTF-8", not an image, saying: LayerNotDefined: msWMSLoadGetMapParams(): WMS server error. Invalid layer(s) given in the LAYERS parameter.`},
		{"QGIS Server: WMS 1.3.0 exception, HTTP 400", 400, "text/xml; charset=utf-8",
			[]byte("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ServiceExceptionReport version=\"1.3.0\" xmlns=\"http://www.opengis.net/ogc\">\n <ServiceException code=\"LayerNotDefined\">The layer 'nope' does not exist.</ServiceException>\n</ServiceExceptionReport>\n"),
			`GetMap answered HTTP 400, saying: LayerNotDefined: The layer 'nope' does not exist.`},
		{"OWS exception report, HTTP 400", 400, "application/xml",
			[]byte(`<ows:ExceptionReport xmlns:ows="http://www.opengis.net/ows/1.1" version="1.1.0"><ows:Exception exceptionCode="InvalidParameterValue" locator="layers"><ows:ExceptionText>Could not find layer nope</ows:ExceptionText></ows:Exception></ows:ExceptionReport>`),
			`GetMap answered HTTP 400, saying: InvalidParameterValue (layers): Could not find layer nope`},
		{"exception labelled image/png", 200, "image/png",
			[]byte(`<ServiceExceptionReport><ServiceException>msDrawMap(): Image handling error.</ServiceException></ServiceExceptionReport>`),
			`GetMap answered HTTP 200 with "image/png", not an image, saying: msDrawMap(): Image handling error.`},
		{"proxy error page, HTTP 503", 503, "text/html",
			[]byte("<html><head><title>503 Service Unavailable</title></head><body><h1>503 Service Unavailable</h1></body></html>"),
			`GetMap answered HTTP 503, saying: 503 Service Unavailable 503 Service Unavailable`},
		{"binary error body", 500, "application/octet-stream", []byte{0, 1, 2, 0xff, 0xfe},
			`GetMap answered HTTP 500`},
	} {
		up.set(tc.status, tc.contentType, tc.body)
		fresh(i)
		idx := gridset.Index{X: int64(i), Y: 1, Z: 3}
		w := getTile(t, h, "test:a", "image/png", idx)
		body := w.Body.String()
		if w.Code != 502 || !strings.HasPrefix(body, "tile_cache: the upstream WMS failed for this tile: upstream: ") ||
			!strings.HasSuffix(body, tc.want+"\n") || strings.Count(body, "\n") != 1 {
			t.Errorf("%s: %d %q\nwant the 502 to end in %q", tc.name, w.Code, body, tc.want)
		}
		entries := logs.FilterMessage("metatile fetch failed").All()
		if len(entries) != 1 {
			t.Fatalf("%s: %d log entries %v", tc.name, len(entries), logs.All())
		}
		f := entries[0].ContextMap()
		if e, _ := f["error"].(string); !strings.HasSuffix(e, tc.want) || f["upstream_status"] != int64(tc.status) {
			t.Errorf("%s: logged %v", tc.name, f)
		}
		if r, _ := f["upstream_reason"].(string); !strings.Contains(tc.want, "saying: "+r) && r != "" {
			t.Errorf("%s: upstream_reason %q", tc.name, r)
		}
	}

	// A huge exception with control characters: one line, bounded, the
	// control characters escaped.
	up.set(400, "text/xml", huge)
	w := getTile(t, h, "test:a", "image/png", gridset.Index{X: 7, Y: 1, Z: 3})
	body := w.Body.String()
	if w.Code != 502 || len(body) > 600 || strings.Count(body, "\n") != 1 || strings.Contains(body, "\x1b") ||
		!strings.Contains(body, `saying: Huge: line \x1b[2Jline`) || !strings.HasSuffix(body, "…\n") {
		t.Errorf("huge exception: %d, %d bytes %q", w.Code, len(body), body)
	}

	// Nothing was stored: with the upstream fixed, the same tile is a
	// miss that asks it again.
	up.set(0, "", nil)
	up.mu.Lock()
	before := up.getMaps
	up.mu.Unlock()
	w = getTile(t, h, "test:a", "image/png", gridset.Index{X: 1, Y: 1, Z: 3})
	up.mu.Lock()
	after := up.getMaps
	up.mu.Unlock()
	if w.Code != 200 || w.Header().Get("Geowebcache-Cache-Result") != "MISS" || after != before+1 {
		t.Errorf("after the exceptions: %d %s, %d GetMaps", w.Code, w.Header().Get("Geowebcache-Cache-Result"), after-before)
	}
}
