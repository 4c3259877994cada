// Package params implements GeoWebCache-style parameter filters for WMS tile
// requests.
//
// A layer declares one filter per extra request parameter it allows (STYLES,
// CQL_FILTER, TIME, ENV, ...). Normalizing a request fills in defaults and
// rejects values the filter does not allow, so that requests which mean the
// same thing map to the same cache key (Values.Hash) and send the same
// parameters upstream (Values.Pairs).
//
// Parameter names are case-insensitive, as in WMS; values are case-sensitive
// unless a filter sets IgnoreCase.
package params

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// FilterConfig is one filter as configured (JSON and Caddyfile).
//
// Exactly one of Values and Regex must be set. GeoWebCache also has an
// "accept any value" filter; it is deliberately not offered, because every
// distinct value becomes a distinct set of cached tiles and an upstream
// request, which lets any client fill the cache and load the WMS at will.
type FilterConfig struct {
	// Key is the parameter name, e.g. "STYLES". It is matched
	// case-insensitively and stored upper-case.
	Key string `json:"key"`
	// Default is used when a request omits the parameter or sends it empty.
	// It must itself be accepted by the filter (as GeoWebCache requires), so
	// that an omitted parameter and the explicit default share tiles. An
	// empty Default therefore needs "" among Values, or a Regex that
	// matches "".
	Default string `json:"default,omitempty"`
	// Values lists the allowed values (exact match), like GeoWebCache's
	// stringParameterFilter.
	Values []string `json:"values,omitempty"`
	// Regex must match a value as a whole (it is anchored as ^(?:Regex)$),
	// like GeoWebCache's regexParameterFilter. Go RE2 syntax.
	Regex string `json:"regex,omitempty"`
	// IgnoreCase compares values case-insensitively (Unicode simple case
	// folding, as strings.EqualFold). With Values the normalized value is the
	// configured spelling, so "red" and "RED" share tiles; with Regex it is
	// the value as sent, as there is no configured spelling to map to.
	IgnoreCase bool `json:"ignore_case,omitempty"`
}

// filter is a compiled FilterConfig.
type filter struct {
	key    string // upper-case
	prefix string // query-escaped key followed by '=', for Canonical
	def    string // already normalized

	// allowed maps an accepted value to its normalized spelling. Keys are
	// the values themselves, or their case fold when ignoreCase is set.
	allowed    map[string]string
	re         *regexp.Regexp // nil when allowed is used
	ignoreCase bool
}

// Set is the compiled set of a layer's filters. It is immutable and safe for
// concurrent use. A nil *Set behaves as a Set with no filters.
type Set struct {
	filters  []filter       // sorted by key
	index    map[string]int // case fold of key -> position in filters
	defaults Values
}

// New compiles and validates the filters of one layer. Errors name the key.
func New(cfgs []FilterConfig) (*Set, error) {
	s := &Set{
		filters: make([]filter, 0, len(cfgs)),
		index:   make(map[string]int, len(cfgs)),
	}
	for i := range cfgs {
		f, err := compile(&cfgs[i])
		if err != nil {
			return nil, err
		}
		s.filters = append(s.filters, f)
	}
	slices.SortFunc(s.filters, func(a, b filter) int { return strings.Compare(a.key, b.key) })
	for i := range s.filters {
		// Folding the stored upper-case key, not the configured spelling,
		// keeps Has consistent with Keys for the few runes (dotless ı) whose
		// upper case folds differently from themselves.
		fold := string(appendFold(nil, s.filters[i].key))
		if _, dup := s.index[fold]; dup {
			return nil, fmt.Errorf("params: duplicate filter for parameter %s", s.filters[i].key)
		}
		s.index[fold] = i
	}

	vals := make([]string, len(s.filters))
	for i := range s.filters {
		vals[i] = s.filters[i].def
	}
	s.defaults = s.build(vals)
	return s, nil
}

func compile(c *FilterConfig) (filter, error) {
	if c.Key == "" {
		return filter{}, errors.New("params: filter with empty key")
	}
	f := filter{
		key:        strings.ToUpper(c.Key),
		ignoreCase: c.IgnoreCase,
	}
	f.prefix = string(appendQueryEscape(nil, f.key)) + "="

	switch {
	case len(c.Values) > 0 && c.Regex != "":
		return filter{}, fmt.Errorf("params: filter %s: set either values or regex, not both", f.key)
	case len(c.Values) == 0 && c.Regex == "":
		return filter{}, fmt.Errorf("params: filter %s: needs values or regex; a filter accepting any value is not supported, because every distinct value would make new tiles and upstream requests", f.key)
	case len(c.Values) > 0:
		f.allowed = make(map[string]string, len(c.Values))
		for _, v := range c.Values {
			k := v
			if f.ignoreCase {
				k = string(appendFold(nil, v))
			}
			if prev, dup := f.allowed[k]; dup {
				if prev == v {
					return filter{}, fmt.Errorf("params: filter %s: duplicate value %q", f.key, v)
				}
				// Ambiguous: which spelling would the normalized value be?
				return filter{}, fmt.Errorf("params: filter %s: values %q and %q are equal ignoring case", f.key, prev, v)
			}
			f.allowed[k] = v
		}
	default:
		// Compiling the bare expression first catches unbalanced input such
		// as "a)|(b" that would otherwise escape the anchoring group below
		// and still compile.
		if _, err := regexp.Compile(c.Regex); err != nil {
			return filter{}, fmt.Errorf("params: filter %s: bad regex: %w", f.key, err)
		}
		flags := ""
		if f.ignoreCase {
			flags = "(?i)"
		}
		re, err := regexp.Compile(`^(?:` + flags + c.Regex + `)$`)
		if err != nil {
			return filter{}, fmt.Errorf("params: filter %s: bad regex: %w", f.key, err)
		}
		f.re = re
	}

	def, ok := f.accept(c.Default)
	if !ok {
		return filter{}, fmt.Errorf("params: filter %s: default value %q is not accepted by the filter (%s)", f.key, c.Default, f.describe())
	}
	f.def = def
	return f, nil
}

// accept reports whether v is allowed and returns its normalized form.
func (f *filter) accept(v string) (string, bool) {
	if f.re != nil {
		return v, f.re.MatchString(v)
	}
	if !f.ignoreCase {
		n, ok := f.allowed[v]
		return n, ok
	}
	var buf [128]byte
	n, ok := f.allowed[string(appendFold(buf[:0], v))]
	return n, ok
}

// describe says what the filter accepts, for error messages.
func (f *filter) describe() string {
	if f.re != nil {
		return "must match " + f.re.String()
	}
	vals := make([]string, 0, len(f.allowed))
	for _, v := range f.allowed {
		vals = append(vals, v)
	}
	slices.Sort(vals)
	const maxShown = 20
	more := ""
	if len(vals) > maxShown {
		more = fmt.Sprintf(", ... (%d more)", len(vals)-maxShown)
		vals = vals[:maxShown]
	}
	for i, v := range vals {
		vals[i] = fmt.Sprintf("%q", v)
	}
	ic := ""
	if f.ignoreCase {
		ic = ", ignoring case"
	}
	return "allowed: " + strings.Join(vals, ", ") + more + ic
}

// Has reports whether the set has a filter for key (case-insensitive).
func (s *Set) Has(key string) bool {
	_, ok := s.lookup(key)
	return ok
}

// Keys returns the filtered parameter names, upper-case and sorted.
func (s *Set) Keys() []string {
	if s == nil {
		return nil
	}
	keys := make([]string, len(s.filters))
	for i := range s.filters {
		keys[i] = s.filters[i].key
	}
	return keys
}

func (s *Set) lookup(key string) (int, bool) {
	if s == nil {
		return 0, false
	}
	// Requests usually spell keys as configured (upper-case ASCII), which is
	// already the fold, so this skips folding in the common case.
	if i, ok := s.index[key]; ok {
		return i, true
	}
	var buf [64]byte
	i, ok := s.index[string(appendFold(buf[:0], key))]
	return i, ok
}

// Defaults returns the normalized set of a request that sends none of the
// filtered parameters.
func (s *Set) Defaults() Values {
	if s == nil {
		return Values{}
	}
	return s.defaults
}

// maxStackSlots bounds the per-request scratch space kept on the stack; layers
// with more filters still work, with one more allocation.
const maxStackSlots = 16

type slot struct {
	val string
	set bool
}

// Normalize validates the raw request values of the filtered parameters and
// fills in defaults. Keys may be in any case; a key that is absent or has an
// empty value gets the default. A key without a filter, a key given twice in
// different case, or a value the filter does not allow is an error naming the
// key.
func (s *Set) Normalize(raw map[string]string) (Values, error) {
	var n int
	if s != nil {
		n = len(s.filters)
	}
	var stack [maxStackSlots]slot
	var slots []slot
	if n <= maxStackSlots {
		slots = stack[:n]
	} else {
		slots = make([]slot, n)
	}

	unknown, haveUnknown := "", false
	for k, v := range raw {
		i, ok := s.lookup(k)
		if !ok {
			// Report the smallest unknown key so the error does not depend
			// on map iteration order.
			if !haveUnknown || k < unknown {
				unknown, haveUnknown = k, true
			}
			continue
		}
		if slots[i].set {
			return Values{}, fmt.Errorf("parameter %s given more than once", s.filters[i].key)
		}
		slots[i] = slot{val: v, set: true}
	}
	if haveUnknown {
		return Values{}, fmt.Errorf("no filter for parameter %s", quoteShort(unknown))
	}

	allDefault := true
	for i := range slots {
		f := &s.filters[i]
		if slots[i].val == "" {
			slots[i].val = f.def
			continue
		}
		v, ok := f.accept(slots[i].val)
		if !ok {
			return Values{}, fmt.Errorf("parameter %s: value %s is not allowed (%s)", f.key, quoteShort(slots[i].val), f.describe())
		}
		slots[i].val = v
		if v != f.def {
			allDefault = false
		}
	}
	// Most requests send no filtered parameters, or only the defaults; they
	// get the precomputed set without allocating.
	if allDefault {
		return s.Defaults(), nil
	}

	vals := make([]string, n)
	for i := range slots {
		vals[i] = slots[i].val
	}
	return s.build(vals), nil
}

// quoteShort quotes a request-supplied string for an error message, cut short
// so that a huge CQL_FILTER does not end up in logs and responses in full.
func quoteShort(v string) string {
	const limit = 100
	if len(v) <= limit {
		return fmt.Sprintf("%q", v)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%q... (%d bytes)", v[:cut], len(v))
}

// Values is a normalized parameter set: every key of its Set with its value,
// defaults filled in. The zero Values is the normalized set of a Set with no
// filters. Values is immutable; copies share storage safely.
type Values struct {
	set  *Set
	vals []string // parallel to set.filters
	// str is Canonical() followed by the 16 characters of Hash(), built once
	// in a single allocation so that both are free on every later call.
	str string
}

const hashLen = 16

var emptyHash = func() string {
	sum := sha256.Sum256(nil)
	return hex.EncodeToString(sum[:hashLen/2])
}()

func (s *Set) build(vals []string) Values {
	var stack [512]byte
	buf := stack[:0]
	for i := range s.filters {
		if i > 0 {
			buf = append(buf, '&')
		}
		buf = append(buf, s.filters[i].prefix...)
		buf = appendQueryEscape(buf, vals[i])
	}
	sum := sha256.Sum256(buf)
	buf = hex.AppendEncode(buf, sum[:hashLen/2])
	return Values{set: s, vals: vals, str: string(buf)}
}

// Get returns the value of key (case-insensitive), or "" if the set has no
// such key.
func (v Values) Get(key string) string {
	i, ok := v.set.lookup(key)
	if !ok {
		return ""
	}
	return v.vals[i]
}

// Pairs returns the key/value pairs sorted by key, e.g. to build the upstream
// request. The result is a fresh slice the caller may modify.
func (v Values) Pairs() [][2]string {
	if len(v.vals) == 0 {
		return nil
	}
	pairs := make([][2]string, len(v.vals))
	for i := range v.vals {
		pairs[i] = [2]string{v.set.filters[i].key, v.vals[i]}
	}
	return pairs
}

// Canonical returns a stable string form: upper-case keys in sorted order,
// "KEY=value" joined with "&", keys and values escaped as url.QueryEscape
// does. Escaping '&' and '=' makes the form unambiguous, so different sets
// never share a canonical string. Equal normalized sets give equal strings.
func (v Values) Canonical() string {
	if v.str == "" {
		return ""
	}
	return v.str[:len(v.str)-hashLen]
}

// Hash returns a short identifier of the normalized set that is safe in file
// names and cache keys: the first 16 hex digits of the SHA-256 of
// Canonical().
func (v Values) Hash() string {
	if v.str == "" {
		return emptyHash
	}
	return v.str[len(v.str)-hashLen:]
}

// appendQueryEscape appends s escaped exactly as url.QueryEscape does; it
// exists so that building a canonical form does not allocate per value.
func appendQueryEscape(dst []byte, s string) []byte {
	const upperhex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~':
			dst = append(dst, c)
		case c == ' ':
			dst = append(dst, '+')
		default:
			dst = append(dst, '%', upperhex[c>>4], upperhex[c&15])
		}
	}
	return dst
}

// appendFold appends a case fold of s: appendFold(a) equals appendFold(b)
// exactly when strings.EqualFold(a, b), which lets case-insensitive matching
// use a map lookup instead of comparing against every entry.
func appendFold(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			// Within an ASCII letter's fold orbit (which may include runes
			// like the Kelvin sign) the upper-case letter is the smallest.
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		dst = utf8.AppendRune(dst, foldRune(r))
	}
	return dst
}

// foldRune maps r to the smallest rune of its simple case folding orbit, one
// fixed representative per class of runes that EqualFold treats as equal.
func foldRune(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < m {
			m = f
		}
	}
	return m
}
