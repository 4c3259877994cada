package seeder

import "testing"

// The checkpoint only moves past units finished in order, and sums their
// tiles, whatever order the workers finish them in.
func TestCheckpointAdvancesOverFinishedPrefix(t *testing.T) {
	var c checkpoint
	c.finish(1, outcome{processed: 16})
	c.finish(2, outcome{failed: 16})
	if next, p, f := c.snapshot(); next != 0 || p != 0 || f != 0 {
		t.Fatalf("moved without unit 0: %d %d %d", next, p, f)
	}
	c.finish(0, outcome{processed: 8})
	if next, p, f := c.snapshot(); next != 3 || p != 24 || f != 16 {
		t.Fatalf("after 0..2: next %d processed %d failed %d", next, p, f)
	}
	c.finish(4, outcome{processed: 4})
	if next, _, _ := c.snapshot(); next != 3 {
		t.Fatalf("jumped over unit 3: %d", next)
	}
	c.finish(3, outcome{processed: 4})
	if next, p, _ := c.snapshot(); next != 5 || p != 32 {
		t.Fatalf("after 0..4: next %d processed %d", next, p)
	}
}
