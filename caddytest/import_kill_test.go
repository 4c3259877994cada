package caddytest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/geopackage"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// An import killed (SIGKILL) part-way through its second pass: the store
// opens again with every tile it holds counted exactly, and importing the
// same file again completes the import, each tile counted once.
func TestImportSurvivesAKill(t *testing.T) {
	ownStore(t)
	g, _ := gridset.Builtin("EPSG:4326")
	// Levels 0..6 of EPSG:4326: 10,922 tiles of 5 KB, each a distinct PNG
	// (a real header, so the import's checks pass, then noise).
	var hdr bytes.Buffer
	png.Encode(&hdr, image.NewGray(image.Rect(0, 0, 256, 256)))
	rng := rand.New(rand.NewPCG(3, 4))
	gpkg := filepath.Join(t.TempDir(), "world.gpkg")
	w, err := geopackage.Create(gpkg, g, geopackage.Options{Table: "world"})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for z := 0; z <= 6; z++ {
		r := g.GridRange(z)
		for x := r.MinX; x <= r.MaxX; x++ {
			for y := r.MinY; y <= r.MaxY; y++ {
				tile := make([]byte, 5000)
				copy(tile, hdr.Bytes()[:33])
				for i := 33; i+8 <= len(tile); i += 8 {
					binary.LittleEndian.PutUint64(tile[i:], rng.Uint64())
				}
				if err := w.Put(gridset.Index{Z: z, X: x, Y: y}, tile); err != nil {
					t.Fatal(err)
				}
				total++
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(gpkg)
	if err != nil {
		t.Fatal(err)
	}

	f := newFakeWMS(t)
	dir := storageDir(t)
	cfg := procConfigWith(f.URL, "WARN", 1, "storage "+dir+"\n\t\tusage")
	post := func(ctx context.Context) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", fmt.Sprintf("http://localhost:%d/geowebcache/rest/import/test:a", procPort), bytes.NewReader(file))
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(adminUser+":"+adminPass)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}

	// Kill the Caddy once the store holds part of the file. An import that
	// ends before the kill lands is tried again on a fresh store (at most 5
	// times): a fast machine may store 10,922 tiles between two looks.
	var stored int64
	for attempt := 1; ; attempt++ {
		os.RemoveAll(dir)
		p := startProc(t, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := post(ctx); done <- err }()
		var ended bool
		deadline := time.Now().Add(5 * time.Minute)
		for stored = 0; stored == 0; {
			select {
			case <-done:
				ended = true
			default:
			}
			if ended || time.Now().After(deadline) {
				break
			}
			stored = procUsage(t).Tiles
		}
		if stored > 0 && stored < total {
			p.stop(t, syscall.SIGKILL)
		} else {
			p.stop(t, syscall.SIGTERM)
		}
		cancel()
		if stored > 0 && stored < total {
			break
		}
		if attempt == 5 {
			t.Fatalf("in 5 tries the import was never seen part-way (last: %d of %d tiles stored)", stored, total)
		}
	}

	// The store as the kill left it: its usage records equal its tiles.
	st, err := store.Open(dir, store.Options{Usage: true, MinFreeSpace: -1})
	if err != nil {
		t.Fatalf("the store after the kill: %v", err)
	}
	set := store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png", Params: ""}
	levels, recounting, err := st.Usage()
	if err != nil || recounting {
		t.Fatalf("usage after the kill: %v (recounting %v)", err, recounting)
	}
	var counted, held int64
	for _, l := range levels {
		set = l.Set
		counted += l.Tiles
	}
	for z := 0; z <= 6; z++ {
		eachStoredTile(t, st, set, g, z, func(_, _ int64, _ store.Tile) { held++ })
	}
	st.Release()
	if counted != held || held == 0 || held == total {
		t.Fatalf("after a kill mid-import: usage says %d tiles, the store holds %d (of %d)", counted, held, total)
	}
	t.Logf("killed with %d of %d tiles stored (usage seen at %d)", held, total, stored)

	// Imported again: complete, each tile once.
	startProc(t, cfg)
	if status, err := post(context.Background()); err != nil || status != 200 {
		t.Fatalf("the import again after the kill: %d %v", status, err)
	}
	if u := procUsage(t); u.Tiles != total {
		t.Fatalf("after importing again: usage %d tiles, want %d", u.Tiles, total)
	}
}
