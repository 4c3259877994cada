package cluster

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// quotaPass is one eviction pass as a node logs it.
type quotaPass struct {
	node         string
	Start, EndNS int64 // Unix nanoseconds (one machine: one clock)
	Pages, Bytes int64
	Listed       int64
	ListTook     float64
}

// passes reads the eviction passes a node logged.
func (n *node) quotaPasses() []quotaPass {
	var out []quotaPass
	for _, l := range n.log.Grep("s3 quota: eviction pass") {
		i := strings.Index(l, "{")
		if i < 0 {
			continue
		}
		var v struct {
			Start  int64   `json:"start_ns"`
			End    int64   `json:"end_ns"`
			Pages  int64   `json:"pages"`
			Bytes  int64   `json:"bytes"`
			Listed int64   `json:"listed_objects"`
			Took   float64 `json:"listing_took"`
		}
		if json.Unmarshal([]byte(l[i:]), &v) != nil {
			continue
		}
		out = append(out, quotaPass{node: n.name, Start: v.Start, EndNS: v.End, Pages: v.Pages, Bytes: v.Bytes, Listed: v.Listed, ListTook: v.Took})
	}
	return out
}

// bucketTiles is the number and bytes of the tile objects of layer.
func (c *cluster) bucketTiles(layer string) (n, b int64) {
	c.t.Helper()
	for o := range minioSrv.Client.ListObjects(context.Background(), c.bucket,
		minio.ListObjectsOptions{Prefix: c.prefix + "/" + layer + "/1/", Recursive: true}) {
		if o.Err != nil {
			c.t.Fatal(o.Err)
		}
		n++
		b += o.Size
	}
	return n, b
}

// Three nodes with one quota over one bucket, seeded through the REST
// interface with about three times the quota: the bucket ends within 10 %
// of the quota, evictions happened, no two nodes' passes overlapped, and
// each node wrote only its own usage record.
func TestClusterQuotaOverS3(t *testing.T) {
	f := newFakeWMS(t)
	const quota = 2 << 20
	c := newCluster(t, options{name: "q", upstream: f.url, tiles: "quota 2MiB", workers: 2})
	a := c.node("a")
	start := time.Now()
	id := a.submit("test:a", seedReq("seed", 0, 6, ""))
	// The bucket's size while seeding (for the record: passes follow
	// the estimate, one listing at a time).
	var maxSeen int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
			var b int64
			for o := range minioSrv.Client.ListObjects(context.Background(), c.bucket,
				minio.ListObjectsOptions{Prefix: c.prefix + "/test:a/1/", Recursive: true}) {
				b += o.Size
			}
			maxSeen = max(maxSeen, b)
		}
	}()
	ti := a.waitTask(id, 3*time.Minute)
	close(done)
	<-sampled
	if ti.State != "DONE" {
		t.Fatalf("seed: %+v", ti)
	}
	seedTook := time.Since(start)
	// The last passes: a node's record reaches the others within 2 s, and
	// a listing is not repeated within 5 s, so the PUTs made after the
	// last pass's listing need a pass of their own. The estimate never
	// counts a stored byte low, so a bucket over its quota always gets
	// that pass: wait, bounded, for the bucket to be under the quota.
	n, b := c.bucketTiles("test:a")
	atEnd := b
	for deadline := time.Now().Add(30 * time.Second); b > quota && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		n, b = c.bucketTiles("test:a")
	}
	settled := time.Since(start) - seedTook
	var passes []quotaPass
	var evicted, evictedBytes int64
	for _, nd := range c.nodes {
		for _, p := range nd.quotaPasses() {
			passes = append(passes, p)
			if p.Pages > 0 {
				evicted++
				evictedBytes += p.Bytes
			}
		}
	}
	// What the seed stored: its tiles at the average size of those left.
	seeded := ti.Processed * b / max(n, 1)
	t.Logf("seeded %d tiles in %v, ≈%d bytes (%.2f× the quota); bucket %.3f× the quota as the seed ended, "+
		"%d objects, %d bytes = %.3f× the quota %v after (at most %.2f× while seeding); %d passes, %d evicting",
		ti.Processed, seedTook.Round(time.Millisecond), seeded, float64(seeded)/quota, float64(atEnd)/quota, n, b, float64(b)/quota,
		settled.Round(time.Second), float64(maxSeen)/quota, len(passes), evicted)
	if b > quota {
		t.Errorf("bucket %d bytes 30 s after the seed, quota %d", b, quota)
	}
	if evicted == 0 {
		t.Fatal("no pass evicted")
	}
	if seeded < 5*quota/2 {
		t.Errorf("seeded only %.2f× the quota", float64(seeded)/quota)
	}
	// One node evicting at a time: passes never overlap.
	slices.SortFunc(passes, func(x, y quotaPass) int { return int(x.Start - y.Start) })
	byNode := map[string]int{}
	for i, p := range passes {
		byNode[p.node]++
		if p.EndNS < p.Start {
			t.Errorf("pass of %s ends before it starts", p.node)
		}
		if i > 0 && p.Start < passes[i-1].EndNS {
			q := passes[i-1]
			t.Errorf("pass of %s began %v before the pass of %s ended", p.node, time.Duration(q.EndNS-p.Start), q.node)
		}
	}
	t.Logf("passes per node: %v", byNode)
	for _, p := range passes {
		t.Logf("pass of %s: listed %d objects in %.3fs, evicted %d pages, %d bytes, held the lock %v",
			p.node, p.Listed, p.ListTook, p.Pages, p.Bytes, time.Duration(p.EndNS-p.Start).Round(time.Millisecond))
	}
	// Each node wrote its own record and no other.
	ids := map[string]bool{}
	for _, nd := range c.nodes {
		ids[nd.id()] = true
	}
	recs := 0
	filepath.WalkDir(c.storage, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(filepath.ToSlash(p), "/quota/nodes/") {
			return nil
		}
		recs++
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Error(err)
			return nil
		}
		var r struct {
			ID    string `json:"id"`
			Epoch string `json:"epoch"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		if r.ID != d.Name() || !ids[r.ID] {
			t.Errorf("usage record %s written by %q", d.Name(), r.ID)
		}
		return nil
	})
	if recs != 3 {
		t.Errorf("%d usage records, want one per node", recs)
	}
	// The quota's state: one listing, one evicted record, the lock free.
	for _, k := range []string{"/quota/listing", "/quota/evicted"} {
		c.storedFile(k)
	}
}
