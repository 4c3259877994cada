package caddytest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/quota/s3quota"
)

// bucketLevels is the tile objects of test:a per level: [tiles, bytes].
func (e *s3Env) bucketLevels() (map[int][2]int64, int64) {
	e.t.Helper()
	out := map[int][2]int64{}
	var total int64
	for o := range e.m.Client.ListObjects(context.Background(), e.bucket,
		minio.ListObjectsOptions{Prefix: e.prefix + "/test:a/1/", Recursive: true}) {
		if o.Err != nil {
			e.t.Fatal(o.Err)
		}
		// <prefix>/test:a/1/<gridset>/<format>/<params>/<z>/<x>/<y>.png
		parts := strings.Split(o.Key, "/")
		z, err := strconv.Atoi(parts[len(parts)-3])
		if err != nil {
			e.t.Fatalf("key %s: %v", o.Key, err)
		}
		v := out[z]
		out[z] = [2]int64{v[0] + 1, v[1] + o.Size}
		total += o.Size
	}
	return out, total
}

// With a quota over S3, rest/usage.json answers from the quota's figures
// without a request to the bucket: right after a seed, the layer's total
// is every byte PUT (listed plus unlisted, exact when nothing was
// overwritten); once the bucket is listed again, every level matches the
// bucket object for object and byte for byte; last access and evictions
// are there, and the task page shows its Storage panel; after a
// truncation, the figures drop to nothing.
func TestS3UsageFromTheQuota(t *testing.T) {
	defer func(d time.Duration) { s3quota.RefreshEvery = d }(s3quota.RefreshEvery)
	s3quota.RefreshEvery = 3 * time.Second
	e := newS3EnvWith(t, "", "quota 1GiB")
	waitFor(t, "the first listing of the bucket", func() bool { return !readUsage(t).Recounting })
	start := time.Now().Truncate(time.Second)
	path := submit(t, "test:a", "json", `{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":0,"zoomStop":4,"type":"seed","format":"image/png"}}`)
	if ti := waitTask(t, path); ti.State != "DONE" || ti.FailedTiles != 0 {
		t.Fatalf("seed: %+v", ti)
	}
	levels, total := e.bucketLevels()
	u := readUsage(t)
	if !u.Estimate || u.Quota == nil || u.Quota.MaxSize != 1<<30 || len(u.Layers) != 1 || u.Layers[0].Name != "test:a" {
		t.Fatalf("usage.json: %+v", u)
	}
	// Exact unless a refresh listing (every 3 s here) came during the seed,
	// as on a busy machine where the seed takes longer: PUTs made within
	// the clock margin of a listing's start then count twice, and the
	// figure may only be high, never low (docs/quota.md).
	listedDuring := false
	if at, err := time.Parse(time.RFC3339, u.ListedAt); err == nil && !at.Before(start) {
		listedDuring = true
	}
	if l := u.Layers[0]; l.Bytes != u.Bytes || !listedDuring && l.Bytes != total || l.Bytes < total {
		t.Fatalf("right after the seed: layer %d bytes, document %d, bucket %d (a listing during the seed: %v)", l.Bytes, u.Bytes, total, listedDuring)
	}
	// A hit is a use: two seconds after every PUT, so that no object's
	// Last-Modified can stand for it (uses are stamped by a clock that
	// ticks every second).
	time.Sleep(2100 * time.Millisecond)
	hitAt := time.Now().Truncate(time.Second).Add(-time.Second)
	mustTile(t, e.tile(gridset.Index{X: 1, Y: 0, Z: 3}), "HIT")
	waitFor(t, "the bucket listed again, every level in a tile set", func() bool {
		u = readUsage(t)
		return len(u.Layers) == 1 && u.Layers[0].Unlisted == nil && len(u.Layers[0].TileSets) == 1
	})
	l := u.Layers[0]
	if l.Tiles != 2+8+32+128+512 || l.Bytes != total {
		t.Fatalf("listed: %d tiles, %d bytes; bucket %v, %d bytes", l.Tiles, l.Bytes, levels, total)
	}
	for _, lv := range l.TileSets[0].Levels {
		if b := levels[lv.Zoom]; lv.Tiles != b[0] || lv.Bytes != b[1] {
			t.Errorf("level %d: %d tiles, %d bytes; the bucket holds %d, %d", lv.Zoom, lv.Tiles, lv.Bytes, b[0], b[1])
		}
	}
	if len(l.TileSets[0].Levels) != len(levels) {
		t.Errorf("%d levels, the bucket has %d", len(l.TileSets[0].Levels), len(levels))
	}
	listed, err := time.Parse(time.RFC3339, u.ListedAt)
	if err != nil || listed.Before(start) {
		t.Errorf("listedAt %q, the seed began %v", u.ListedAt, start)
	}
	last, err := time.Parse(time.RFC3339, l.LastAccess)
	if err != nil || last.Before(hitAt) || l.TileSets[0].LastAccess != l.LastAccess {
		t.Errorf("lastAccess %q (set %q), hit at %v", l.LastAccess, l.TileSets[0].LastAccess, hitAt)
	}
	if l.Evicted == nil || l.Evicted.Tiles != 0 {
		t.Errorf("evicted %+v, want 0 under the quota", l.Evicted)
	}
	if page := rest(t, "GET", "/", "", ""); !strings.Contains(string(page.body), `data-usage="on"`) {
		t.Errorf("the task page has no Storage panel")
	}
	// A truncation: the figures follow within a listing's spacing (5 s),
	// with nothing stored since.
	if a := rest(t, "POST", "/rest/masstruncate", "text/xml", "<truncateLayer><layerName>test:a</layerName></truncateLayer>"); a.status != 200 {
		t.Fatalf("truncateLayer: %d %s", a.status, a.body)
	}
	waitFor(t, "usage.json without the truncated tiles", func() bool {
		u = readUsage(t)
		return u.Tiles == 0 && (len(u.Layers) == 0 || u.Layers[0].Tiles == 0)
	})
}
