package httpx

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func TestTextIsOneLine(t *testing.T) {
	w := httptest.NewRecorder()
	if err := Text(w, http.StatusBadRequest, "bad\r\ninput\nhere"); err != nil {
		t.Fatal(err)
	}
	if w.Code != 400 || w.Body.String() != "bad  input here\n" ||
		w.Header().Get("Content-Type") != "text/plain; charset=utf-8" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("%d %q %v", w.Code, w.Body.String(), w.Header())
	}
}

func TestMountURLIsWhatHandlePathStripped(t *testing.T) {
	r := httptest.NewRequest("GET", "http://maps.example.org/geowebcache/rest/masstruncate", nil)
	orig := *r
	u := *r.URL
	orig.URL = &u
	r.URL.Path = "/rest/masstruncate" // handle_path /geowebcache/*
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.OriginalRequestCtxKey, orig))
	if got := MountURL(r); got != "http://maps.example.org/geowebcache" {
		t.Errorf("MountURL %q", got)
	}
	if got := OriginalPath(r); got != "/geowebcache/rest/masstruncate" {
		t.Errorf("OriginalPath %q", got)
	}
	bare := httptest.NewRequest("GET", "http://h:8080/rest/seed.json", nil)
	if got := MountURL(bare); got != "http://h:8080" {
		t.Errorf("no strip: %q", got)
	}
}
