package tilelist

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/tilelist/internal/gen"
)

func mercator(t testing.TB) *gridset.Gridset {
	g, ok := gridset.Builtin("EPSG:900913")
	if !ok {
		t.Fatal("no EPSG:900913")
	}
	return g
}

func wgs84(t testing.TB) *gridset.Gridset {
	g, ok := gridset.Builtin("EPSG:4326")
	if !ok {
		t.Fatal("no EPSG:4326")
	}
	return g
}

func opts(g *gridset.Gridset) Options {
	return Options{Gridset: g, MetaW: 1, MetaH: 1, Parents: None, Children: None}
}

func mustParse(t testing.TB, s string, o Options) *List {
	t.Helper()
	l, err := Parse(strings.NewReader(s), o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// allTiles flattens a list in unit order.
func allTiles(l *List) []gridset.Index {
	var out []gridset.Index
	l.Each(func(u Unit) bool {
		out = append(out, u.Tiles()...)
		return true
	})
	return out
}

func TestParseForms(t *testing.T) {
	g := mercator(t)
	in := "# expire list\r\n" +
		"3/1/2\r\n" +
		"\n" +
		"  3 1 2  \n" + // the same tile again, spaces
		"3\t\t4\t5\n" +
		"\t\r\n" +
		"   # indented comment\n" +
		"0/0/0" // no final newline
	l := mustParse(t, in, opts(g))
	// XYZ rows from the top: at level 3, y=2 is native row 8-1-2=5.
	// Units go by level, then row from the bottom: 3/4/5 is native row 2.
	want := []gridset.Index{{X: 0, Y: 0, Z: 0}, {X: 4, Y: 2, Z: 3}, {X: 1, Y: 5, Z: 3}}
	if got := allTiles(l); !slices.Equal(got, want) {
		t.Fatalf("tiles %v, want %v", got, want)
	}
	if l.Lines() != 4 || l.Tiles() != 3 || l.Units() != 3 || l.Dropped() != 0 {
		t.Fatalf("lines %d tiles %d units %d dropped %d", l.Lines(), l.Tiles(), l.Units(), l.Dropped())
	}
	if lo, hi := l.Levels(); lo != 0 || hi != 3 {
		t.Fatalf("levels %d..%d", lo, hi)
	}
	empty := mustParse(t, "# nothing\n\n", opts(g))
	if lo, hi := empty.Levels(); empty.Units() != 0 || lo != -1 || hi != -1 {
		t.Fatalf("empty list: %d units, levels %d..%d", empty.Units(), lo, hi)
	}
}

// max_list_lines counts tile lines: the docs say blank lines and comments
// are skipped, so a list of exactly the limit's tiles passes however many
// of them it has (up to as many again).
func TestCommentsAndBlankLinesDoNotCount(t *testing.T) {
	o := opts(mercator(t))
	o.MaxLines = 3
	l := mustParse(t, "# expired by osm2pgsql\n1/0/0\n\t\n1/0/1\n# next\n1/1/1\n", o)
	if l.Lines() != 3 || l.Tiles() != 3 {
		t.Fatalf("%d lines, %d tiles", l.Lines(), l.Tiles())
	}
}

func TestParseErrors(t *testing.T) {
	g := mercator(t)
	limited := opts(g)
	limited.MaxLines, limited.MaxTiles = 3, 5
	cases := []struct {
		in   string
		o    Options
		want string
	}{
		{"1/0/0\n12/x/5\n", opts(g), `line 2: "12/x/5" is not z/x/y or "z x y"`},
		{"12/1 5", opts(g), `line 1: "12/1 5" is not z/x/y or "z x y"`},
		{"12/1/5/3", opts(g), `line 1: "12/1/5/3" is not z/x/y or "z x y"`},
		{"12/1/", opts(g), `line 1: "12/1/" is not z/x/y or "z x y"`},
		{"-1/0/0", opts(g), `line 1: "-1/0/0" is not z/x/y or "z x y"`},
		{"1/0/0 # trailing", opts(g), `line 1: "1/0/0 # trailing" is not z/x/y or "z x y"`},
		{"\n\n31/0/0", opts(g), `line 3: level 31 is not in gridset EPSG:900913 (levels 0 to 30)`},
		{"2/4/0", opts(g), `line 1: tile 2/4/0 is outside level 2's grid of 4x4 tiles`},
		{"2/0/4", opts(g), `line 1: tile 2/0/4 is outside level 2's grid of 4x4 tiles`},
		{"2/0/99999999999999999999999", opts(g), `line 1: tile 2/0/4611686018427387904 is outside level 2's grid of 4x4 tiles`},
		{"1/0/0\n#\n1/0/1\n\n1/1/1\n1/1/0\n", limited, `line 6: more than 3 tile lines`},
		{"1/0/0\n#\n\n  \n# end\n", limited, `line 5: more than 3 blank or comment lines`},
		{"1/0/0\n1/0/1\n1/1/1\n", func() Options { o := limited; o.MaxLines = 0; o.Children = 2; return o }(), `line 2: more than 5 tiles (derived tiles included)`},
		{"0/0/0", func() Options { o := opts(g); o.Children = 30; return o }(), `line 1: more than 200000000 tiles (derived tiles included)`},
		{strings.Repeat("1", 5000), opts(g), `line 1: longer than 4096 bytes`},
	}
	for _, c := range cases {
		_, err := Parse(strings.NewReader(c.in), c.o)
		if err == nil || err.Error() != c.want {
			t.Errorf("%.30q: error %v, want %s", c.in, err, c.want)
		}
	}
	// Option errors.
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "tilelist: a gridset is required"},
		{Options{Gridset: g, MetaW: 17, Parents: None, Children: None}, "tilelist: metatile size 17x1: each side must be 1 to 16"},
		{Options{Gridset: g, Parents: 31, Children: None}, "tilelist: parents level 31 is not in gridset EPSG:900913 (levels 0 to 30)"},
		{Options{Gridset: g, Parents: None, Children: -2}, "tilelist: children level -2 is not in gridset EPSG:900913 (levels 0 to 30)"},
	} {
		_, err := Parse(strings.NewReader(""), c.o)
		if err == nil || err.Error() != c.want {
			t.Errorf("options %+v: error %v, want %s", c.o, err, c.want)
		}
	}
}

func TestNotNested(t *testing.T) {
	g, err := gridset.New(gridset.Config{Name: "odd", SRS: "EPSG:2056",
		Extent: [4]float64{0, 0, 1000, 1000}, TileWidth: 1, TileHeight: 1,
		Resolutions: []float64{100, 50, 30}})
	if err != nil {
		t.Fatal(err)
	}
	o := opts(g)
	// Without derivation, any gridset works.
	mustParse(t, "2/33/0\n1/19/3\n", o)
	o.Parents = 0
	// Levels 0 and 1 nest (10 and 20 tiles at 100 and 50): fine.
	mustParse(t, "1/19/3\n", o)
	_, err = Parse(strings.NewReader("1/19/3\n2/33/0\n"), o)
	want := "line 2: derived levels need nested levels (each level twice the tiles of the one above each way, at half the resolution), and gridset odd's level 2 does not nest in level 1"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
}

func TestScheme(t *testing.T) {
	for _, g := range []*gridset.Gridset{mercator(t), wgs84(t)} {
		o := opts(g)
		xyz := allTiles(mustParse(t, "5/3/1\n", o))
		o.Scheme = Native
		native := allTiles(mustParse(t, "5/3/1\n", o))
		h := g.Levels[5].TilesHigh
		if !slices.Equal(xyz, []gridset.Index{{X: 3, Y: h - 2, Z: 5}}) || !slices.Equal(native, []gridset.Index{{X: 3, Y: 1, Z: 5}}) {
			t.Errorf("%s: xyz %v native %v", g.Name, xyz, native)
		}
	}
}

// model is the brute-force reference: a map of tiles, derived by walking
// every level with plain arithmetic, grouped by metatile with maps.
func model(t *testing.T, lines []string, o Options) (units [][]gridset.Index, dropped int64) {
	g := o.Gridset
	set := map[gridset.Index]bool{}
	for _, ln := range lines {
		var z int
		var x, y int64
		if _, err := fmt.Sscanf(ln, "%d/%d/%d", &z, &x, &y); err != nil {
			t.Fatal(err)
		}
		if o.Scheme == XYZ {
			y = g.Levels[z].TilesHigh - 1 - y
		}
		var cands []gridset.Index
		cands = append(cands, gridset.Index{X: x, Y: y, Z: z})
		if o.Parents != None {
			for p := z - 1; p >= o.Parents; p-- {
				d := int64(1) << (z - p)
				cands = append(cands, gridset.Index{X: x / d, Y: y / d, Z: p})
			}
		}
		if o.Children != None {
			for c := z + 1; c <= o.Children; c++ {
				d := int64(1) << (c - z)
				for cy := y * d; cy < (y+1)*d; cy++ {
					for cx := x * d; cx < (x+1)*d; cx++ {
						cands = append(cands, gridset.Index{X: cx, Y: cy, Z: c})
					}
				}
			}
		}
		for _, c := range cands {
			r, ok := g.GridRange(c.Z), true
			if o.Coverage != nil {
				r, ok = o.Coverage(c.Z)
			}
			if !ok || !r.Contains(c.X, c.Y) {
				dropped++
				continue
			}
			set[c] = true
		}
	}
	mw, mh := int64(max(o.MetaW, 1)), int64(max(o.MetaH, 1))
	byMeta := map[gridset.Index][]gridset.Index{}
	for c := range set {
		k := gridset.Index{X: c.X - c.X%mw, Y: c.Y - c.Y%mh, Z: c.Z}
		byMeta[k] = append(byMeta[k], c)
	}
	order := func(a, b gridset.Index) int {
		if a.Z != b.Z {
			return a.Z - b.Z
		}
		if a.Y != b.Y {
			return int(a.Y - b.Y)
		}
		return int(a.X - b.X)
	}
	keys := make([]gridset.Index, 0, len(byMeta))
	for k := range byMeta {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, order)
	for _, k := range keys {
		ts := byMeta[k]
		slices.SortFunc(ts, order)
		units = append(units, ts)
	}
	return units, dropped
}

func TestAgainstModel(t *testing.T) { testAgainstModel(t, 7) }

// TestAgainstModelManyRuns shrinks the sort buffer so that each list is
// split into many runs, with duplicates and stretches across them, to test
// the merge.
func TestAgainstModelManyRuns(t *testing.T) {
	defer func(n int) { chunkKeys = n }(chunkKeys)
	for _, n := range []int{1, 2, 7, 64} {
		chunkKeys = n
		testAgainstModel(t, uint64(n))
	}
}

func testAgainstModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	for iter := range 300 {
		g := mercator(t)
		if iter%3 == 1 {
			g = wgs84(t)
		}
		o := opts(g)
		o.MetaW, o.MetaH = 1+r.IntN(16), 1+r.IntN(16)
		if iter%4 == 0 {
			o.MetaW, o.MetaH = 1, 1
		}
		base := 3 + r.IntN(6)
		if r.IntN(2) == 0 {
			o.Parents = r.IntN(base + 1)
		}
		if r.IntN(2) == 0 {
			o.Children = base + r.IntN(3)
		}
		if r.IntN(2) == 0 {
			o.Scheme = Native
		}
		if r.IntN(3) == 0 {
			// Cover a box in the middle of each level, and not level base+1.
			skip := base + 1
			o.Coverage = func(z int) (gridset.Range, bool) {
				gr := g.GridRange(z)
				return gridset.Range{MinX: gr.MaxX / 4, MinY: gr.MaxY / 3, MaxX: gr.MaxX * 3 / 4, MaxY: gr.MaxY}, z != skip
			}
		}
		// Clustered tiles at a few levels around base, with duplicates.
		var lines []string
		n := 1 + r.IntN(60)
		for range n {
			z := base + r.IntN(2)
			w, h := g.Levels[z].TilesWide, g.Levels[z].TilesHigh
			x := min(w-1, w/2+int64(r.IntN(20)))
			y := min(h-1, h/2+int64(r.IntN(20)))
			ln := fmt.Sprintf("%d/%d/%d", z, x, y)
			lines = append(lines, ln)
			if r.IntN(4) == 0 {
				lines = append(lines, ln)
			}
		}
		want, wantDropped := model(t, lines, o)
		l := mustParse(t, strings.Join(lines, "\n"), o)
		var got [][]gridset.Index
		var tiles int64
		l.Each(func(u Unit) bool {
			ts := u.Tiles()
			got = append(got, ts)
			tiles += int64(len(ts))
			mt := u.Metatile()
			if mt.MinX%int64(o.MetaW) != 0 || mt.MinY%int64(o.MetaH) != 0 {
				t.Fatalf("unit %d: metatile %v not aligned", u.Seq, mt)
			}
			if u.Count() != len(ts) {
				t.Fatalf("unit %d: Count %d, %d tiles", u.Seq, u.Count(), len(ts))
			}
			b := gridset.Range{MinX: 1 << 62, MinY: 1 << 62, MaxX: -1, MaxY: -1}
			for _, ti := range ts {
				if !u.Contains(ti.X, ti.Y) {
					t.Fatalf("unit %d does not contain its tile %v", u.Seq, ti)
				}
				b = gridset.Range{MinX: min(b.MinX, ti.X), MinY: min(b.MinY, ti.Y), MaxX: max(b.MaxX, ti.X), MaxY: max(b.MaxY, ti.Y)}
			}
			if u.Bounds() != b {
				t.Fatalf("unit %d: bounds %v, want %v", u.Seq, u.Bounds(), b)
			}
			for y := mt.MinY - 1; y <= mt.MaxY+1; y++ {
				for x := mt.MinX - 1; x <= mt.MaxX+1; x++ {
					if u.Contains(x, y) != slices.Contains(ts, gridset.Index{X: x, Y: y, Z: u.Z}) {
						t.Fatalf("unit %d: Contains(%d,%d) wrong", u.Seq, x, y)
					}
				}
			}
			return true
		})
		if len(got) != len(want) {
			t.Fatalf("iter %d %+v: %d units, model %d", iter, o, len(got), len(want))
		}
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("iter %d: unit %d: %v, model %v", iter, i, got[i], want[i])
			}
		}
		if l.Units() != int64(len(want)) || l.Tiles() != tiles || l.Dropped() != wantDropped || l.Lines() != int64(len(lines)) {
			t.Fatalf("iter %d: units %d tiles %d dropped %d (model %d) lines %d", iter, l.Units(), l.Tiles(), l.Dropped(), wantDropped, l.Lines())
		}
	}
}

func TestCoverageDrops(t *testing.T) {
	g := mercator(t)
	o := opts(g)
	o.Scheme = Native
	o.Children = 4
	o.Coverage = func(z int) (gridset.Range, bool) {
		if z == 2 {
			return gridset.Range{}, false // level 2 not cached
		}
		return gridset.Range{MinX: 0, MinY: 0, MaxX: 3, MaxY: 3}, true
	}
	// 3/0/0: itself kept; children: z4 block 0..1 x 0..1 all kept.
	// 3/7/7: outside, and its 4 children too (outside 0..3): 5 dropped.
	// 2/0/0: level not cached; children z3 0..1 (4 kept), z4 0..3 (16 kept).
	l := mustParse(t, "3/0/0\n3/7/7\n2/0/0\n", o)
	if l.Dropped() != 6 {
		t.Errorf("dropped %d, want 6", l.Dropped())
	}
	if l.Tiles() != 4+16 {
		t.Errorf("tiles %d, want 20", l.Tiles())
	}
}

// bigList is a list with many units spread over several encoding blocks.
func bigList(t testing.TB, n int64, mw, mh int) *List {
	var buf bytes.Buffer
	if err := gen.Random(&buf, n/2, 18, 3); err != nil {
		t.Fatal(err)
	}
	if err := gen.Realistic(&buf, n/2, 15, 3); err != nil {
		t.Fatal(err)
	}
	o := opts(mercator(t))
	o.MetaW, o.MetaH = mw, mh
	l, err := Parse(&buf, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRandomAccess(t *testing.T) {
	for _, m := range [][2]int{{1, 1}, {4, 4}, {3, 7}} {
		l := bigList(t, 1_200_000, m[0], m[1])
		if m[0] == 1 && len(l.blocks) < 2 {
			t.Fatalf("want several blocks, have %d", len(l.blocks))
		}
		var i int64
		l.Each(func(u Unit) bool {
			if got := l.Unit(i); got != u || u.Seq != i {
				t.Fatalf("%v: Unit(%d) = %+v, Each gave %+v", m, i, got, u)
			}
			i++
			return true
		})
		if i != l.Units() {
			t.Fatalf("Each gave %d units of %d", i, l.Units())
		}
		// EachFrom from a few places, index marks and between them.
		for _, from := range []int64{0, 1, indexEvery - 1, indexEvery, 5*indexEvery + 17, l.Units() - 1} {
			j := from
			l.EachFrom(from, func(u Unit) bool {
				if u != l.Unit(j) {
					t.Fatalf("EachFrom(%d): unit %d differs", from, j)
				}
				j++
				return j < from+300
			})
			if j != min(from+300, l.Units()) {
				t.Fatalf("EachFrom(%d) stopped at %d", from, j)
			}
		}
		l.EachFrom(l.Units(), func(Unit) bool { t.Fatal("unit past the end"); return false })
	}
}

func equalLists(t *testing.T, a, b *List) {
	t.Helper()
	if a.Units() != b.Units() || a.Tiles() != b.Tiles() || a.Lines() != b.Lines() || a.Dropped() != b.Dropped() || a.Gridset() != b.Gridset() {
		t.Fatalf("counts differ: %d/%d/%d/%d %s vs %d/%d/%d/%d %s", a.Units(), a.Tiles(), a.Lines(), a.Dropped(), a.Gridset(),
			b.Units(), b.Tiles(), b.Lines(), b.Dropped(), b.Gridset())
	}
	alo, ahi := a.Levels()
	blo, bhi := b.Levels()
	if alo != blo || ahi != bhi {
		t.Fatalf("levels differ")
	}
	var ua []Unit
	a.Each(func(u Unit) bool { ua = append(ua, u); return true })
	i := 0
	b.Each(func(u Unit) bool {
		if u != ua[i] {
			t.Fatalf("unit %d differs: %+v vs %+v", i, ua[i], u)
		}
		i++
		return true
	})
	for j := int64(0); j < b.Units(); j += 97 {
		if b.Unit(j) != ua[j] {
			t.Fatalf("Unit(%d) differs after decoding", j)
		}
	}
}

func TestMarshal(t *testing.T) {
	g := mercator(t)
	o := opts(g)
	o.MetaW, o.MetaH, o.Children = 4, 4, 12
	o.Coverage = func(z int) (gridset.Range, bool) {
		return gridset.Range{MinX: 0, MinY: 0, MaxX: 2000, MaxY: 5000}, true
	}
	small := mustParse(t, "10/3/1000\n10/3/1000\n11/2000/2046\n3/1/1\n", o)
	for _, l := range []*List{small, mustParse(t, "", o), bigList(t, 400_000, 4, 4), bigList(t, 400_000, 1, 1)} {
		rec, err := l.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back List
		if err := back.UnmarshalBinary(rec); err != nil {
			t.Fatal(err)
		}
		equalLists(t, l, &back)
		// The decoded list marshals to the same bytes.
		rec2, _ := back.MarshalBinary()
		if !bytes.Equal(rec, rec2) {
			t.Fatal("re-marshalled record differs")
		}
		// Every truncation of a small record, and some of a big one, is an error.
		step := max(1, len(rec)/500)
		for n := 0; n < len(rec); n += step {
			var x List
			if err := x.UnmarshalBinary(rec[:n]); err == nil {
				t.Fatalf("record truncated to %d of %d bytes accepted", n, len(rec))
			}
		}
		// So is a flipped bit.
		bad := slices.Clone(rec)
		bad[len(bad)/2] ^= 4
		var x List
		if err := x.UnmarshalBinary(bad); err == nil {
			t.Fatal("damaged record accepted")
		}
	}
	if len(small.blocks) != 1 {
		t.Fatal("small list should be one block")
	}
}

func TestMarshalErrors(t *testing.T) {
	rec, _ := mustParse(t, "1/0/0\n", opts(mercator(t))).MarshalBinary()
	var l List
	for _, c := range []struct {
		rec  []byte
		want string
	}{
		{rec[:5], "tilelist: bad record: not a tile list record"},
		{append([]byte("TLST\x09"), rec[5:]...), "tilelist: bad record: version 9, this build reads version 1"},
		{rec[:len(rec)-1], "tilelist: bad record: checksum mismatch (truncated or damaged)"},
	} {
		if err := l.UnmarshalBinary(c.rec); err == nil || err.Error() != c.want {
			t.Errorf("error %v, want %s", err, c.want)
		}
	}
}

func TestCheckPayload(t *testing.T) {
	for _, c := range []struct {
		p              []byte
		cnt, slots, mb int
		ok             bool
	}{
		{nil, 16, 16, 2, true},
		{[]byte{3}, 1, 16, 2, true},
		{[]byte{16}, 1, 16, 2, false},         // slot past the metatile
		{[]byte{1, 5, 9}, 3, 64, 8, true},     // slots ascending
		{[]byte{5, 5, 9}, 3, 64, 8, false},    // repeated slot
		{[]byte{0xff, 0x01}, 9, 9, 2, true},   // full: no payload checked
		{[]byte{0xff, 0x00}, 8, 9, 2, true},   // bitmask of 8 in 9 slots
		{[]byte{0x7f, 0x02}, 8, 9, 2, false},  // bit 9 of a 9-slot metatile
		{[]byte{0x7f, 0x01}, 9, 10, 2, false}, // count mismatch (8 bits set)
		{[]byte{0x0f, 0x0f, 0x00}, 8, 20, 3, true},
	} {
		if err := checkPayload(c.p, c.cnt, c.slots, c.mb); (err == nil) != c.ok {
			t.Errorf("%v cnt %d slots %d: error %v", c.p, c.cnt, c.slots, err)
		}
	}
}
