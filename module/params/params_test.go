package params

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func mustNew(t testing.TB, cfgs ...FilterConfig) *Set {
	t.Helper()
	s, err := New(cfgs)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func mustNormalize(t testing.TB, s *Set, raw map[string]string) Values {
	t.Helper()
	v, err := s.Normalize(raw)
	if err != nil {
		t.Fatalf("Normalize(%v): %v", raw, err)
	}
	return v
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error containing %q, got nil", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func layer(t testing.TB) *Set {
	return mustNew(t,
		FilterConfig{Key: "styles", Default: "", Values: []string{"", "population", "roads"}},
		FilterConfig{Key: "CQL_FILTER", Default: "INCLUDE", Regex: `INCLUDE|type = '[a-z]+'`},
	)
}

func TestDefaultsFilled(t *testing.T) {
	s := layer(t)
	for name, raw := range map[string]map[string]string{
		"nil":    nil,
		"absent": {},
		"empty":  {"STYLES": "", "CQL_FILTER": ""},
		"mixed":  {"styles": ""},
	} {
		t.Run(name, func(t *testing.T) {
			v := mustNormalize(t, s, raw)
			if got := v.Get("STYLES"); got != "" {
				t.Errorf("STYLES = %q, want default \"\"", got)
			}
			if got := v.Get("CQL_FILTER"); got != "INCLUDE" {
				t.Errorf("CQL_FILTER = %q, want default INCLUDE", got)
			}
			if v.Hash() != s.Defaults().Hash() || v.Canonical() != s.Defaults().Canonical() {
				t.Errorf("normalized %q/%s differs from Defaults %q/%s", v.Canonical(), v.Hash(), s.Defaults().Canonical(), s.Defaults().Hash())
			}
		})
	}
	// The explicit default must share tiles with the omitted parameter.
	v := mustNormalize(t, s, map[string]string{"CQL_FILTER": "INCLUDE"})
	if v.Hash() != s.Defaults().Hash() {
		t.Errorf("explicit default hash %s != defaults hash %s", v.Hash(), s.Defaults().Hash())
	}
}

func TestAllowedValue(t *testing.T) {
	s := layer(t)
	v := mustNormalize(t, s, map[string]string{"STYLES": "roads", "CQL_FILTER": "type = 'river'"})
	if got := v.Get("styles"); got != "roads" {
		t.Errorf("STYLES = %q, want roads", got)
	}
	if got := v.Get("cql_filter"); got != "type = 'river'" {
		t.Errorf("CQL_FILTER = %q", got)
	}
	want := [][2]string{{"CQL_FILTER", "type = 'river'"}, {"STYLES", "roads"}}
	if got := v.Pairs(); !reflect.DeepEqual(got, want) {
		t.Errorf("Pairs = %q, want %q", got, want)
	}
	if v.Hash() == s.Defaults().Hash() {
		t.Error("non-default values hash like the defaults")
	}
}

func TestRejectedValue(t *testing.T) {
	s := layer(t)
	_, err := s.Normalize(map[string]string{"STYLES": "Roads"})
	wantErr(t, err, "STYLES", `"Roads"`, "not allowed", `"roads"`)

	_, err = s.Normalize(map[string]string{"cql_filter": "type = 'x' OR 1=1"})
	wantErr(t, err, "CQL_FILTER", `"type = 'x' OR 1=1"`, "not allowed")

	// A huge value is cut short rather than echoed in full.
	_, err = s.Normalize(map[string]string{"STYLES": strings.Repeat("x", 10000)})
	wantErr(t, err, "STYLES", "10000 bytes")
	if len(err.Error()) > 500 {
		t.Errorf("error message is %d bytes long", len(err.Error()))
	}
}

func TestRegexAnchored(t *testing.T) {
	s := mustNew(t, FilterConfig{Key: "X", Default: "a", Regex: "a|b"})
	for _, ok := range []string{"a", "b"} {
		if _, err := s.Normalize(map[string]string{"X": ok}); err != nil {
			t.Errorf("%q rejected: %v", ok, err)
		}
	}
	for _, bad := range []string{"ab", "xa", "bx", "a\n", "\na", "aa"} {
		if _, err := s.Normalize(map[string]string{"X": bad}); err == nil {
			t.Errorf("%q accepted by anchored a|b", bad)
		}
	}
}

func TestRegexCannotEscapeAnchoring(t *testing.T) {
	// Wrapped naively, "a)|(b" would become ^(?:a)|(b)$ and accept "ax".
	for _, re := range []string{"a)|(b", `a\Q`} {
		_, err := New([]FilterConfig{{Key: "X", Default: "a", Regex: re}})
		if err == nil {
			// If it compiles at all, it must still be anchored.
			s := mustNew(t, FilterConfig{Key: "X", Default: "a", Regex: re})
			if _, err := s.Normalize(map[string]string{"X": "ax"}); err == nil {
				t.Errorf("regex %q accepts \"ax\"", re)
			}
		}
	}
}

func TestCaseInsensitiveKeys(t *testing.T) {
	s := layer(t)
	for _, k := range []string{"STYLES", "styles", "Styles", "sTyLeS"} {
		if !s.Has(k) {
			t.Errorf("Has(%q) = false", k)
		}
		v := mustNormalize(t, s, map[string]string{k: "population"})
		for _, g := range []string{"STYLES", "styles", "Styles"} {
			if got := v.Get(g); got != "population" {
				t.Errorf("key %q: Get(%q) = %q", k, g, got)
			}
		}
	}
	if s.Has("STYLE") || s.Has("") {
		t.Error("Has accepts a key without a filter")
	}
	if got, want := s.Keys(), []string{"CQL_FILTER", "STYLES"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Keys = %q, want %q", got, want)
	}
	// The same key twice in different case is ambiguous.
	_, err := s.Normalize(map[string]string{"STYLES": "roads", "styles": "population"})
	wantErr(t, err, "STYLES", "more than once")
}

func TestKeysIsACopy(t *testing.T) {
	s := layer(t)
	s.Keys()[0] = "MUTATED"
	if s.Keys()[0] != "CQL_FILTER" {
		t.Error("Keys exposes internal storage")
	}
	v := mustNormalize(t, s, map[string]string{"STYLES": "roads"})
	v.Pairs()[0][1] = "MUTATED"
	if v.Get("CQL_FILTER") != "INCLUDE" {
		t.Error("Pairs exposes internal storage")
	}
}

func TestIgnoreCaseValues(t *testing.T) {
	s := mustNew(t, FilterConfig{Key: "STYLES", Default: "default", Values: []string{"Default", "RoadMap", "Straße"}, IgnoreCase: true})
	if got := s.Defaults().Get("STYLES"); got != "Default" {
		t.Errorf("default normalized to %q, want configured spelling Default", got)
	}
	want := mustNormalize(t, s, map[string]string{"STYLES": "RoadMap"})
	for _, in := range []string{"roadmap", "ROADMAP", "rOaDmAp", "RoadMap"} {
		v := mustNormalize(t, s, map[string]string{"styles": in})
		if got := v.Get("STYLES"); got != "RoadMap" {
			t.Errorf("%q normalized to %q, want RoadMap", in, got)
		}
		if v.Hash() != want.Hash() {
			t.Errorf("%q hashes differently from RoadMap", in)
		}
	}
	// Simple case folding, as EqualFold: ß does not fold to SS.
	if _, err := s.Normalize(map[string]string{"STYLES": "STRASSE"}); err == nil {
		t.Error("STRASSE accepted for Straße")
	}
	if got := mustNormalize(t, s, map[string]string{"STYLES": "STRAßE"}).Get("STYLES"); got != "Straße" {
		t.Errorf("STRAßE normalized to %q, want Straße", got)
	}
	_, err := s.Normalize(map[string]string{"STYLES": "roadmaps"})
	wantErr(t, err, "STYLES", `"roadmaps"`)

	// Without IgnoreCase, values are case-sensitive.
	cs := mustNew(t, FilterConfig{Key: "STYLES", Default: "RoadMap", Values: []string{"RoadMap"}})
	_, err = cs.Normalize(map[string]string{"STYLES": "roadmap"})
	wantErr(t, err, "STYLES", `"roadmap"`)
}

func TestIgnoreCaseRegex(t *testing.T) {
	s := mustNew(t, FilterConfig{Key: "TIME", Default: "current", Regex: "current|[0-9]{4}-[0-9]{2}-[0-9]{2}", IgnoreCase: true})
	v := mustNormalize(t, s, map[string]string{"time": "CURRENT"})
	if got := v.Get("TIME"); got != "CURRENT" {
		t.Errorf("regex IgnoreCase normalized to %q, want the value as sent", got)
	}
	if _, err := s.Normalize(map[string]string{"TIME": "CURRENTLY"}); err == nil {
		t.Error("IgnoreCase regex is not anchored")
	}
	cs := mustNew(t, FilterConfig{Key: "TIME", Default: "current", Regex: "current"})
	if _, err := cs.Normalize(map[string]string{"TIME": "CURRENT"}); err == nil {
		t.Error("case-sensitive regex accepts CURRENT")
	}
}

func TestUnknownKey(t *testing.T) {
	s := layer(t)
	_, err := s.Normalize(map[string]string{"STYLES": "roads", "ENV": "color:red"})
	wantErr(t, err, "no filter for parameter", "ENV")
	// Deterministic whatever the map order.
	for range 20 {
		_, err := s.Normalize(map[string]string{"ZZZ": "1", "AAA": "1", "MMM": "1"})
		wantErr(t, err, "AAA")
	}
	var nilSet *Set
	_, err = nilSet.Normalize(map[string]string{"STYLES": ""})
	wantErr(t, err, "no filter for parameter", "STYLES")
}

func TestNewValidation(t *testing.T) {
	ok := FilterConfig{Key: "STYLES", Values: []string{""}}
	for _, tc := range []struct {
		name  string
		cfgs  []FilterConfig
		parts []string
	}{
		{"empty key", []FilterConfig{{Key: "", Values: []string{""}}}, []string{"empty key"}},
		{"duplicate key", []FilterConfig{ok, {Key: "Styles", Values: []string{""}}}, []string{"STYLES", "duplicate"}},
		{"values and regex", []FilterConfig{{Key: "time", Values: []string{""}, Regex: ".*"}}, []string{"TIME", "not both"}},
		{"neither", []FilterConfig{{Key: "env", Default: "x"}}, []string{"ENV", "values or regex", "any value"}},
		{"bad regex", []FilterConfig{{Key: "time", Regex: "([0-9]"}}, []string{"TIME", "bad regex"}},
		{"unbalanced regex", []FilterConfig{{Key: "time", Default: "a", Regex: "a)|(b"}}, []string{"TIME", "bad regex"}},
		{"default not in values", []FilterConfig{{Key: "styles", Default: "x", Values: []string{"a", "b"}}}, []string{"STYLES", `"x"`, "not accepted", `"a", "b"`}},
		{"empty default not in values", []FilterConfig{{Key: "styles", Values: []string{"a"}}}, []string{"STYLES", `""`, "not accepted"}},
		{"default not matching regex", []FilterConfig{{Key: "time", Default: "now", Regex: "[0-9]+"}}, []string{"TIME", `"now"`, "not accepted"}},
		{"default case without IgnoreCase", []FilterConfig{{Key: "styles", Default: "A", Values: []string{"a"}}}, []string{"STYLES", `"A"`}},
		{"duplicate value", []FilterConfig{{Key: "styles", Values: []string{"a", "a"}}}, []string{"STYLES", "duplicate value"}},
		{"values equal ignoring case", []FilterConfig{{Key: "styles", Values: []string{"a", "A"}, IgnoreCase: true}}, []string{"STYLES", "ignoring case"}},
		{"error in second filter", []FilterConfig{ok, {Key: "cql_filter", Regex: "("}}, []string{"CQL_FILTER"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.cfgs)
			if s != nil {
				t.Error("New returned a Set with an error")
			}
			wantErr(t, err, tc.parts...)
		})
	}
	// The same values differing in case are fine when case matters.
	mustNew(t, FilterConfig{Key: "styles", Default: "a", Values: []string{"a", "A"}})
}

func TestEmptySet(t *testing.T) {
	var nilSet *Set
	empty := mustNew(t)
	for _, s := range []*Set{nilSet, empty} {
		v := mustNormalize(t, s, nil)
		if v.Canonical() != "" || v.Pairs() != nil || v.Get("STYLES") != "" || s.Has("STYLES") || len(s.Keys()) != 0 {
			t.Errorf("empty set: %q %q", v.Canonical(), v.Pairs())
		}
		if v.Hash() != (Values{}).Hash() || s.Defaults().Hash() != v.Hash() {
			t.Errorf("empty set hashes disagree: %s %s %s", v.Hash(), Values{}.Hash(), s.Defaults().Hash())
		}
	}
}

func TestCanonicalAndHash(t *testing.T) {
	cfgs := []FilterConfig{
		{Key: "styles", Default: "", Values: []string{"", "population", "roads"}},
		{Key: "CQL_FILTER", Default: "INCLUDE", Regex: `.+`},
		{Key: "Time", Default: "2024", Regex: `[0-9]{4}`},
	}
	a := mustNew(t, cfgs...)
	// Configuration order must not matter.
	b := mustNew(t, cfgs[2], cfgs[0], cfgs[1])
	raw := map[string]string{"time": "2025", "STYLES": "roads", "cql_filter": "name = 'x y'"}
	va := mustNormalize(t, a, raw)
	vb := mustNormalize(t, b, map[string]string{"Cql_Filter": "name = 'x y'", "TIME": "2025", "styles": "roads"})

	wantCanon := "CQL_FILTER=name+%3D+%27x+y%27&STYLES=roads&TIME=2025"
	if va.Canonical() != wantCanon {
		t.Errorf("Canonical = %q, want %q", va.Canonical(), wantCanon)
	}
	sum := sha256.Sum256([]byte(wantCanon))
	wantHash := hex.EncodeToString(sum[:])[:16]
	if va.Hash() != wantHash {
		t.Errorf("Hash = %q, want %q", va.Hash(), wantHash)
	}
	if vb.Canonical() != va.Canonical() || vb.Hash() != va.Hash() {
		t.Errorf("order-dependent: %q/%s vs %q/%s", va.Canonical(), va.Hash(), vb.Canonical(), vb.Hash())
	}
	// Stable across calls and copies.
	c := va
	if c.Hash() != va.Hash() || va.Hash() != va.Hash() || mustNormalize(t, a, raw).Hash() != wantHash {
		t.Error("Hash not stable")
	}
	// Defaults have the documented form too.
	if got, want := a.Defaults().Canonical(), "CQL_FILTER=INCLUDE&STYLES=&TIME=2024"; got != want {
		t.Errorf("defaults Canonical = %q, want %q", got, want)
	}
	for _, h := range []string{va.Hash(), a.Defaults().Hash(), (Values{}).Hash()} {
		if len(h) != 16 || strings.Trim(h, "0123456789abcdef") != "" {
			t.Errorf("Hash %q is not 16 lower-case hex digits", h)
		}
	}
}

func TestDifferentValuesDifferentHashes(t *testing.T) {
	s := mustNew(t,
		FilterConfig{Key: "STYLES", Default: "", Values: []string{"", "a", "b"}},
		FilterConfig{Key: "ENV", Default: "", Regex: ".*"},
	)
	seen := map[string]string{}
	for _, st := range []string{"", "a", "b"} {
		for _, env := range []string{"", "x", "X", "a", "b", " ", "+", "%20", "color:red", "color:blue"} {
			v := mustNormalize(t, s, map[string]string{"STYLES": st, "ENV": env})
			if prev, dup := seen[v.Hash()]; dup {
				t.Errorf("hash collision: %q and %q", prev, v.Canonical())
			}
			seen[v.Hash()] = v.Canonical()
		}
	}
}

func TestCanonicalEscaping(t *testing.T) {
	// Without escaping, both would read "A=x&B=y&B=z" or similar; the
	// canonical forms must differ and parse back to the values.
	s := mustNew(t,
		FilterConfig{Key: "A", Default: "", Regex: "(?s).*"},
		FilterConfig{Key: "B", Default: "", Regex: ".*"},
	)
	cases := []map[string]string{
		{"A": "x&B=y", "B": ""},
		{"A": "x", "B": "y"},
		{"A": "x", "B": "&B=y"},
		{"A": "x=", "B": "=y"},
		{"A": "x==", "B": "y"},
		{"A": "x+y", "B": "x y"},
		{"A": "100%", "B": "%25"},
		{"A": "é\x00\n", "B": "a/b?c#d"},
	}
	seen := map[string]bool{}
	for _, raw := range cases {
		v := mustNormalize(t, s, raw)
		c := v.Canonical()
		if seen[c] {
			t.Errorf("ambiguous canonical form %q", c)
		}
		seen[c] = true
		if strings.Count(c, "&") != 1 || strings.Count(c, "=") != 2 {
			t.Errorf("separators not escaped in %q", c)
		}
		parsed, err := url.ParseQuery(c)
		if err != nil {
			t.Fatalf("ParseQuery(%q): %v", c, err)
		}
		for k, want := range raw {
			if got := parsed.Get(k); got != want {
				t.Errorf("%q: %s round-trips to %q, want %q", c, k, got, want)
			}
		}
	}
}

func TestAppendQueryEscapeMatchesURL(t *testing.T) {
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	for _, s := range []string{"", "abc", "a b&c=d+e%f", "ümlaut", "~-._", all.String()} {
		if got, want := string(appendQueryEscape(nil, s)), url.QueryEscape(s); got != want {
			t.Errorf("appendQueryEscape(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestFoldMatchesEqualFold(t *testing.T) {
	words := []string{"", "a", "A", "k", "K", "\u212a", "s", "S", "\u017f", "ß", "ẞ", "σ", "ς", "Σ",
		"ı", "I", "i", "İ", "Straße", "STRAßE", "strasse", "\xff", "\ufffd", "ǅ", "ǆ", "Ǆ", "Ω", "\u2126", "ω"}
	for _, a := range words {
		for _, b := range words {
			eq := string(appendFold(nil, a)) == string(appendFold(nil, b))
			if eq != strings.EqualFold(a, b) {
				t.Errorf("fold(%q)==fold(%q) is %v, EqualFold is %v", a, b, eq, !eq)
			}
		}
	}
}

func TestJSONTags(t *testing.T) {
	var c FilterConfig
	in := `{"key":"STYLES","default":"a","values":["a","b"],"regex":"x","ignore_case":true}`
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	want := FilterConfig{Key: "STYLES", Default: "a", Values: []string{"a", "b"}, Regex: "x", IgnoreCase: true}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got %+v", c)
	}
	out, _ := json.Marshal(FilterConfig{Key: "X", Regex: "y"})
	if string(out) != `{"key":"X","regex":"y"}` {
		t.Errorf("marshal = %s", out)
	}
}

func TestManyFilters(t *testing.T) {
	// More filters than fit the on-stack scratch space.
	var cfgs []FilterConfig
	raw := map[string]string{}
	for i := range maxStackSlots + 5 {
		k := fmt.Sprintf("P%02d", i)
		cfgs = append(cfgs, FilterConfig{Key: k, Default: "0", Regex: "[0-9]+"})
		raw[strings.ToLower(k)] = fmt.Sprint(i)
	}
	s := mustNew(t, cfgs...)
	v := mustNormalize(t, s, raw)
	for i := range maxStackSlots + 5 {
		if got := v.Get(fmt.Sprintf("P%02d", i)); got != fmt.Sprint(i) {
			t.Errorf("P%02d = %q", i, got)
		}
	}
	_, err := s.Normalize(map[string]string{"P20": "x"})
	wantErr(t, err, "P20")
}

func TestConcurrent(t *testing.T) {
	s := layer(t)
	want := mustNormalize(t, s, map[string]string{"STYLES": "roads"}).Hash()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				v, err := s.Normalize(map[string]string{"styles": "roads"})
				if err != nil || v.Hash() != want {
					t.Errorf("concurrent Normalize: %v %s", err, v.Hash())
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestAllocs(t *testing.T) {
	s := layer(t)
	def := map[string]string{"STYLES": "", "CQL_FILTER": "INCLUDE"}
	if n := testing.AllocsPerRun(100, func() { s.Normalize(def) }); n != 0 {
		t.Errorf("Normalize to defaults: %v allocs, want 0", n)
	}
	raw := map[string]string{"styles": "roads", "cql_filter": "type = 'river'"}
	if n := testing.AllocsPerRun(100, func() { s.Normalize(raw) }); n > 2 {
		t.Errorf("Normalize: %v allocs, want <= 2", n)
	}
	v := mustNormalize(t, s, raw)
	if n := testing.AllocsPerRun(100, func() { _ = v.Hash(); _ = v.Canonical(); _ = v.Get("STYLES") }); n != 0 {
		t.Errorf("Hash/Canonical/Get: %v allocs, want 0", n)
	}
}

func BenchmarkNormalize(b *testing.B) {
	s := mustNew(b,
		FilterConfig{Key: "STYLES", Default: "", Values: []string{"", "population", "roads", "rivers", "landuse"}},
		FilterConfig{Key: "CQL_FILTER", Default: "INCLUDE", Regex: `INCLUDE|type = '[a-z]+'`},
	)
	for _, bc := range []struct {
		name string
		raw  map[string]string
	}{
		{"defaults", map[string]string{}},
		{"values", map[string]string{"styles": "roads", "CQL_FILTER": "type = 'river'"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, err := s.Normalize(bc.raw)
				if err != nil {
					b.Fatal(err)
				}
				_ = v.Hash()
			}
		})
	}
}
