package caddytest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"

	"github.com/tilecache/caddy-tilecache/module/store/s3store/s3test"
)

// The whole suite runs on each tile store; TILECACHE_TEST_STORE picks one:
//
//	badger (or unset)  tiles in each test's Badger directory, the default
//	s3                 tiles in a real MinIO bucket, under a prefix per
//	                   storage directory; tasks in the directory
//	s3-local           the same behind a local tier (a Badger of hot tiles)
//
// test.sh runs the package once per store. Tests about one store in
// particular (its keys, its faults, a full disk) configure it themselves
// and run the same in every pass.
var storeMode = os.Getenv("TILECACHE_TEST_STORE")

// suiteS3 is the MinIO of an S3 pass, and suiteBucket its bucket.
var suiteS3 *s3test.Server

const suiteBucket = "suite"

// startStore starts what the pass's store needs before any test runs.
// check, after the tests, fails an S3 pass that left its bucket (nearly)
// empty: a config the switch missed would otherwise pass unnoticed.
func startStore() (check func() error, stop func(), err error) {
	switch storeMode {
	case "", "badger":
		return func() error { return nil }, func() {}, nil
	case "s3", "s3-local":
	default:
		return nil, nil, fmt.Errorf("TILECACHE_TEST_STORE=%q: want badger, s3 or s3-local", storeMode)
	}
	s, stop, err := s3test.StartShared()
	if err != nil {
		return nil, nil, err
	}
	suiteS3 = s
	s.Bucket(suiteBucket)
	// Credentials reach the config as placeholders, as in production; a
	// restarted Caddy process inherits them.
	os.Setenv("TC_SUITE_S3_KEY", s3test.AccessKey)
	os.Setenv("TC_SUITE_S3_SECRET", s3test.SecretKey)
	check = func() error {
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
			return nil // a few tests store little
		}
		if n := len(s.Keys(suiteBucket, "")); n < 1000 {
			return fmt.Errorf("the %s pass left %d objects in its bucket: its caches did not use S3", storeMode, n)
		}
		return nil
	}
	return check, stop, nil
}

// storeLines is what follows `storage` in a test's Caddyfile for a cache
// whose directory is dir: the directory alone, or with the pass's s3 block.
// The prefix is the directory's name, so a test that reopens a directory
// (a reload, a restart) finds its tiles again and no two tests share any.
// A test that sets up its store itself (ownStore) keeps what it wrote.
func storeLines(dir string) string {
	if !onSuiteS3() {
		return dir
	}
	local := ""
	if storeMode == "s3-local" {
		local = "\n\t\t\tlocal {\n\t\t\t\tttl 1h\n\t\t\t}"
	}
	return dir + `
		s3 {
			bucket ` + suiteBucket + `
			prefix ` + filepath.Base(dir) + `
			endpoint ` + suiteS3.Addr + `
			region us-east-1
			path_style
			insecure
			access_key {env.TC_SUITE_S3_KEY}
			secret_key {env.TC_SUITE_S3_SECRET}` + local + `
		}`
}

// storeJSON is storeLines for a JSON config: the handler's "storage" and,
// in an S3 pass, its "s3".
func storeJSON(dir string) string {
	out := `"storage": ` + strconv.Quote(dir)
	if !onSuiteS3() {
		return out
	}
	local := ""
	if storeMode == "s3-local" {
		local = `, "local": {"ttl": "1h"}`
	}
	return out + fmt.Sprintf(`, "s3": {"bucket": %q, "prefix": %q, "endpoint": %q, "region": "us-east-1",
		"path_style": true, "insecure": true, "access_key": "{env.TC_SUITE_S3_KEY}",
		"secret_key": "{env.TC_SUITE_S3_SECRET}"%s}`, suiteBucket, filepath.Base(dir), suiteS3.Addr, local)
}

// own is set while a test that sets up its store itself runs.
var own bool

// ownStore leaves the test's store as the test configures it, in every
// pass: the test is about one store in particular (a failure injected into
// Badger; the S3 store's keys and outages).
func ownStore(t *testing.T) {
	own = true
	t.Cleanup(func() { own = false })
}

// clientsOnce runs a test of what an outside client (QGIS, GDAL, OWSLib,
// Chromium with Leaflet or OpenLayers) makes of the HTTP interface in the
// badger pass only. The store lies below the answers those clients read,
// and the protocol tests check those answers byte for byte in every pass;
// the clients took about 7 minutes of each S3 pass (18 beside CPU hogs),
// and the whole suite must stay within CI's 30 minutes.
func clientsOnce(t *testing.T) {
	t.Helper()
	if storeMode == "s3" || storeMode == "s3-local" {
		t.Skip("an outside client's view of the HTTP interface, the same on every store: it runs in the badger pass")
	}
}

// onSuiteS3 tells whether the running test's caches keep their tiles in
// the pass's bucket.
func onSuiteS3() bool { return suiteS3 != nil && !own }

// eachTile calls fn with every tile stored for the cache whose directory
// is dir, wherever the pass keeps them: read from the Badger (the running
// Caddy's, when it has the directory open), or from the bucket's objects
// of each layer's current generation.
func eachTile(t *testing.T, dir string, fn func(data []byte) error) error {
	t.Helper()
	if !onSuiteS3() {
		return openBadger(t, dir).EachTile(fn)
	}
	for _, k := range currentTileKeys(t, dir, "") {
		obj, err := suiteS3.Client.GetObject(context.Background(), suiteBucket, k, minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		data, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			return err
		}
		if err := fn(data); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// openBadger opens the Badger in dir until the test ends: the running
// Caddy's own when it has the directory open (one per directory).
func openBadger(t *testing.T, dir string) *store.Badger {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Release() })
	return st
}

// countTiles counts the stored tiles of set at level z inside r.
func countTiles(t *testing.T, dir string, set store.Set, z int, r gridset.Range) int64 {
	t.Helper()
	if !onSuiteS3() {
		n, err := openBadger(t, dir).CountRange(set, z, r)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// <layer>/<gen>/<gridset>/<format>/<params>/<z>/<x>/<y>.<ext>, as
	// docs/storage.md documents; only PNG sets are counted here.
	var n int64
	for _, k := range currentTileKeys(t, dir, set.Layer) {
		parts := strings.Split(k, "/")
		if len(parts) != 9 || parts[3] != set.Gridset || parts[4] != "png" || parts[5] != set.Params || parts[6] != strconv.Itoa(z) {
			continue
		}
		x, _ := strconv.ParseInt(parts[7], 10, 64)
		y, _ := strconv.ParseInt(strings.TrimSuffix(parts[8], ".png"), 10, 64)
		if x >= r.MinX && x <= r.MaxX && y >= r.MinY && y <= r.MaxY {
			n++
		}
	}
	return n
}

// currentTileKeys lists the tile objects of the cache whose directory is
// dir (of one layer, or all), in each layer's current generation: what its
// store serves, not what awaits reclaiming.
func currentTileKeys(t *testing.T, dir, layer string) []string {
	t.Helper()
	prefix := filepath.Base(dir) + "/"
	if layer != "" {
		prefix += layer + "/"
	}
	keys := suiteS3.Keys(suiteBucket, prefix)
	gens := map[string]string{} // layer → current generation
	for _, k := range keys {
		if l, ok := strings.CutSuffix(k, "/generation"); ok {
			obj, err := suiteS3.Client.GetObject(context.Background(), suiteBucket, k, minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			_, err = b.ReadFrom(obj)
			obj.Close()
			if err != nil {
				t.Fatal(err)
			}
			gens[l] = b.String()
		}
	}
	var out []string
	for _, k := range keys {
		parts := strings.Split(k, "/")
		if len(parts) != 9 {
			continue // generation and drop markers
		}
		gen, ok := gens[parts[0]+"/"+parts[1]]
		if !ok {
			gen = "1"
		}
		if parts[2] == gen {
			out = append(out, k)
		}
	}
	return out
}
