package tilecache

import (
	"runtime"
	"strings"
	"testing"
)

// A seed's local work runs at seedNice on a thread of its own; the caller's
// thread keeps its priority, and a panic comes back to the caller.
func TestOnSeedThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := threadNice()
	if err != nil {
		t.Fatal(err)
	}
	var inside int
	onSeedThread(func() { inside, err = threadNice() })
	if err != nil {
		t.Fatal(err)
	}
	if before >= seedNice || inside != seedNice {
		t.Fatalf("nice %d before, %d in the seed's work; want %d there", before, inside, seedNice)
	}
	if after, _ := threadNice(); after != before {
		t.Fatalf("the caller's thread went from nice %d to %d", before, after)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "boom") {
			t.Fatalf("recovered %v", r)
		}
	}()
	onSeedThread(func() { panic("boom") })
	t.Fatal("no panic")
}
