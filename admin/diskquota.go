package admin

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"math/big"
	"mime"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/httpx"
	"github.com/tilecache/caddy-tilecache/module/quota"
)

// rest/diskquota, rest/diskquota.xml, rest/diskquota.json: GeoWebCache's
// disk quota resource over the cache's quota (package quota).
//
// GET answers the running quota as GeoWebCache's gwcQuotaConfiguration, in
// XML (the default) or JSON (.json, or Accept preferring application/json
// on the bare path). What maps:
//
//	enabled                     the evictor runs (false: paused, usage and
//	                            access are still recorded)
//	globalExpirationPolicyName  LRU or LFU (policy)
//	globalQuota                 max_size, absent when 0 (no global bound)
//	layerQuotas                 per layer: quota (max_size, absent when 0)
//	                            and expirationPolicyName (absent when the
//	                            layer follows the global policy)
//
// Two extensions, elements GeoWebCache does not have: lowWatermark (the
// share of a quota eviction brings usage back to, 0.5–0.99) and keepLevels
// {min, max} (levels never evicted), globally and per LayerQuota.
// cacheCleanUpFrequency/cacheCleanUpUnits report 1 SECONDS and
// maxConcurrentCleanUps 1: the evictor compares usage with the quota every
// 0.5 s (quota.CheckEvery), but GeoWebCache's units are a TimeUnit with
// nothing finer that a GeoWebCache client knows, and one pass runs at a
// time. diskBlockSize is not reported (tiles are values in Badger, not
// files in blocks).
//
// PUT (XML or JSON, the same shapes) changes the running quota as
// GeoWebCache does: the elements given replace the current ones, the
// others stay; layerQuotas, when given, replaces every per-layer quota
// (an empty <layerQuotas/> removes them). Sizes take GeoWebCache's units
// B, KiB, MiB, GiB, TiB, PiB, EiB, and KB, MB, GB, TB, PB as GeoWebCache's
// pages print them, 1024-based as well. diskBlockSize,
// cacheCleanUpFrequency, cacheCleanUpUnits, maxConcurrentCleanUps and
// quotaStore are accepted and ignored; any other element is refused.
// Every bad value (unknown policy or units, a negative or unparsable
// size, a layer the cache does not have, a malformed body) answers 400
// with one line naming the field, and nothing changes. The answer is 200
// with the new quota, as GET gives it.
//
// The change holds until the next Caddy config load: the Caddyfile or
// JSON config is the source of truth, and a load sets its quota again
// (and resumes a paused evictor).
//
// A cache without a quota (none configured, or S3 storage, which the
// config refuses a quota with) answers 404 to both: a quota is created
// in the config, not at runtime.

// quotaPutMu serialises PUTs: each reads the running quota and replaces it.
var quotaPutMu sync.Mutex

// maxSizeText bounds a size's value text.
const maxSizeText = 64

// storageUnits are GeoWebCache's StorageUnit names, and the shorter names
// its pages print (StorageUnit.toNiceString: MB for MiB), all 1024-based.
var storageUnits = map[string]int64{
	"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60,
	"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "PB": 1 << 50, "EB": 1 << 60,
}

// unitsOrder is what GET reports in, largest first (GeoWebCache's bestFit).
var unitsOrder = []string{"EiB", "PiB", "TiB", "GiB", "MiB", "KiB", "B"}

const unitsList = "B, KiB, MiB, GiB, TiB, PiB, EiB (or KB, MB, GB, TB, PB, EB, 1024-based)"

// --- the document ---

type quotaDoc struct {
	XMLName                    xml.Name       `xml:"gwcQuotaConfiguration" json:"-"`
	Enabled                    bool           `xml:"enabled" json:"enabled"`
	CacheCleanUpFrequency      int            `xml:"cacheCleanUpFrequency" json:"cacheCleanUpFrequency"`
	CacheCleanUpUnits          string         `xml:"cacheCleanUpUnits" json:"cacheCleanUpUnits"`
	MaxConcurrentCleanUps      int            `xml:"maxConcurrentCleanUps" json:"maxConcurrentCleanUps"`
	GlobalExpirationPolicyName string         `xml:"globalExpirationPolicyName" json:"globalExpirationPolicyName"`
	GlobalQuota                *sizeDoc       `xml:"globalQuota,omitempty" json:"globalQuota,omitempty"`
	LayerQuotas                layerQuotaList `xml:"layerQuotas" json:"layerQuotas"`
	// Extensions.
	LowWatermark float64    `xml:"lowWatermark" json:"lowWatermark"`
	KeepLevels   *levelsDoc `xml:"keepLevels,omitempty" json:"keepLevels,omitempty"`
}

// sizeDoc is GeoWebCache's Quota: a decimal value and its units. JSON
// gives the value as a string, as GeoWebCache does.
type sizeDoc struct {
	Value string `xml:"value" json:"value"`
	Units string `xml:"units" json:"units"`
}

type layerQuotaDoc struct {
	XMLName              xml.Name   `xml:"LayerQuota" json:"-"`
	Layer                string     `xml:"layer" json:"layer"`
	ExpirationPolicyName string     `xml:"expirationPolicyName,omitempty" json:"expirationPolicyName,omitempty"`
	Quota                *sizeDoc   `xml:"quota,omitempty" json:"quota,omitempty"`
	KeepLevels           *levelsDoc `xml:"keepLevels,omitempty" json:"keepLevels,omitempty"`
}

type levelsDoc struct {
	Min int `xml:"min" json:"min"`
	Max int `xml:"max" json:"max"`
}

// layerQuotaList is <layerQuotas><LayerQuota>…</LayerQuota></layerQuotas>
// in XML (<layerQuotas/> when empty) and an array in JSON.
type layerQuotaList []layerQuotaDoc

func (l layerQuotaList) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	if err := e.EncodeToken(start); err != nil {
		return err
	}
	for _, q := range l {
		if err := e.Encode(q); err != nil {
			return err
		}
	}
	return e.EncodeToken(start.End())
}

func (l layerQuotaList) MarshalJSON() ([]byte, error) {
	if l == nil {
		l = layerQuotaList{}
	}
	return json.Marshal([]layerQuotaDoc(l))
}

// quotaDocOf is the document of a running quota.
func quotaDocOf(cfg *quota.Config, enabled bool) quotaDoc {
	d := quotaDoc{
		Enabled: enabled,
		// The evictor checks every 0.5 s (quota.CheckEvery); GeoWebCache's
		// TimeUnit has nothing its clients know finer than SECONDS.
		CacheCleanUpFrequency:      1,
		CacheCleanUpUnits:          "SECONDS",
		MaxConcurrentCleanUps:      1,
		GlobalExpirationPolicyName: strings.ToUpper(string(cfg.Policy)),
		LayerQuotas:                layerQuotaList{},
		LowWatermark:               cfg.LowWatermark,
		KeepLevels:                 levelsDocOf(cfg.KeepLevels),
	}
	if cfg.MaxSize > 0 {
		d.GlobalQuota = sizeDocOf(cfg.MaxSize)
	}
	names := make([]string, 0, len(cfg.Layers))
	for n := range cfg.Layers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		l := cfg.Layers[n]
		if l == nil {
			continue
		}
		lq := layerQuotaDoc{Layer: n, ExpirationPolicyName: strings.ToUpper(string(l.Policy)), KeepLevels: levelsDocOf(l.KeepLevels)}
		if l.MaxSize > 0 {
			lq.Quota = sizeDocOf(l.MaxSize)
		}
		d.LayerQuotas = append(d.LayerQuotas, lq)
	}
	return d
}

func levelsDocOf(l *[2]int) *levelsDoc {
	if l == nil {
		return nil
	}
	return &levelsDoc{Min: l[0], Max: l[1]}
}

// sizeDocOf writes bytes in the largest unit not larger than them, the
// value exact (a power of two divides into a finite decimal).
func sizeDocOf(bytes int64) *sizeDoc {
	for _, u := range unitsOrder {
		n := storageUnits[u]
		if bytes >= n || u == "B" {
			r := new(big.Rat).SetFrac64(bytes, n)
			s := r.FloatString(60)
			if strings.Contains(s, ".") {
				s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
			}
			return &sizeDoc{Value: s, Units: u}
		}
	}
	panic("unreachable")
}

// --- the handler ---

// diskQuota serves rest/diskquota[.xml|.json]: GET and PUT.
func (h *Handler) diskQuota(w http.ResponseWriter, r *http.Request, rt route) error {
	c, err := h.cache()
	if err != nil {
		return httpx.Text(w, http.StatusServiceUnavailable, err.Error())
	}
	ev := c.Quota()
	if ev == nil {
		return httpx.Text(w, http.StatusNotFound, "no quota configured: add quota to tile_cache")
	}
	if r.Method == http.MethodGet {
		return writeQuota(w, quotaDocOf(ev.Config(), ev.Enabled()), rt.format == "json" || rt.format == "" && prefersJSON(r))
	}
	body, ok := readBody(w, r, h.MaxBody)
	if !ok {
		return nil
	}
	asJSON := rt.format == "json"
	if rt.format == "" {
		asJSON = bodyIsJSON(r, body)
	}
	var p quotaPatch
	if asJSON {
		p, err = parseQuotaJSON(body)
	} else {
		p, err = parseQuotaXML(body)
	}
	if err != nil {
		return httpx.Text(w, http.StatusBadRequest, err.Error())
	}
	quotaPutMu.Lock()
	defer quotaPutMu.Unlock()
	cfg, enabled, err := p.apply(ev.Config(), ev.Enabled(), func(layer string) bool { _, ok := c.Layer(layer); return ok })
	if err != nil {
		return httpx.Text(w, http.StatusBadRequest, err.Error())
	}
	// SetConfig leaves a paused evictor paused, so no pass runs between
	// the two calls when the answer is to stay off.
	ev.SetConfig(cfg)
	ev.SetEnabled(enabled)
	h.log.Info("tile quota changed through rest/diskquota (until the next config load)",
		zap.String("quota", cfg.String()), zap.Bool("enabled", enabled))
	return writeQuota(w, quotaDocOf(cfg, enabled), asJSON)
}

func writeQuota(w http.ResponseWriter, d quotaDoc, asJSON bool) error {
	w.Header().Set("Cache-Control", "no-cache")
	if asJSON {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(struct {
			Doc quotaDoc `json:"gwcQuotaConfiguration"`
		}{d})
	}
	out, err := xml.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/xml")
	_, err = w.Write(append(append([]byte(xml.Header), out...), '\n'))
	return err
}

// prefersJSON: the Accept header ranks application/json above XML (XML
// wins ties and is the default, as for GeoWebCache).
func prefersJSON(r *http.Request) bool {
	best, bestQ := "", 0.0
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		}
		switch mt {
		case "application/json", "application/xml", "text/xml":
			if q > bestQ || q == bestQ && mt != "application/json" {
				best, bestQ = mt, q
			}
		}
	}
	return best == "application/json"
}

// bodyIsJSON tells a PUT's format on the bare path: by Content-Type, else
// by its first character.
func bodyIsJSON(r *http.Request, body []byte) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil {
		switch {
		case mt == "application/json" || strings.HasSuffix(mt, "+json"):
			return true
		case mt == "application/xml" || mt == "text/xml" || strings.HasSuffix(mt, "+xml"):
			return false
		}
	}
	return bytes.HasPrefix(bytes.TrimSpace(body), []byte("{"))
}

// --- PUT bodies ---

// quotaPatch is what a PUT body sets; nil: not given.
type quotaPatch struct {
	enabled      *bool
	policy       *quota.Policy
	maxSize      *int64
	lowWatermark *float64
	keepLevels   **[2]int // given as nil: removed
	layers       *[]layerPatch
}

type layerPatch struct {
	name       string
	policy     quota.Policy
	maxSize    int64
	keepLevels *[2]int
}

// apply makes the quota a patch asks for from the running one (never
// changed: it is the evictor's), checks it and fills its defaults.
func (p *quotaPatch) apply(cur *quota.Config, enabled bool, known func(string) bool) (*quota.Config, bool, error) {
	cfg := copyQuota(cur)
	if p.enabled != nil {
		enabled = *p.enabled
	}
	if p.policy != nil {
		cfg.Policy = *p.policy
	}
	if p.maxSize != nil {
		cfg.MaxSize = *p.maxSize
	}
	if p.lowWatermark != nil {
		cfg.LowWatermark = *p.lowWatermark
	}
	if p.keepLevels != nil {
		cfg.KeepLevels = *p.keepLevels
	}
	if p.layers != nil {
		cfg.Layers = map[string]*quota.LayerConfig{}
		for i, l := range *p.layers {
			if !known(l.name) {
				return nil, false, fmt.Errorf("layerQuotas[%d]: %q is not a layer of this cache", i, l.name)
			}
			if _, dup := cfg.Layers[l.name]; dup {
				return nil, false, fmt.Errorf("layerQuotas[%d]: layer %q is given twice", i, l.name)
			}
			cfg.Layers[l.name] = &quota.LayerConfig{MaxSize: l.maxSize, Policy: l.policy, KeepLevels: l.keepLevels}
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, false, fmt.Errorf("the quota would be invalid: %s (globalQuota or a layer's quota must be over 0)", err)
	}
	return cfg, enabled, nil
}

func copyQuota(c *quota.Config) *quota.Config {
	out := *c
	if c.KeepLevels != nil {
		k := *c.KeepLevels
		out.KeepLevels = &k
	}
	out.Layers = make(map[string]*quota.LayerConfig, len(c.Layers))
	for n, l := range c.Layers {
		if l == nil {
			continue
		}
		lc := *l
		if l.KeepLevels != nil {
			k := *l.KeepLevels
			lc.KeepLevels = &k
		}
		out.Layers[n] = &lc
	}
	return &out
}

// ignoredFields are GeoWebCache's, accepted and without effect here.
var ignoredFields = map[string]bool{
	"diskBlockSize": true, "cacheCleanUpFrequency": true, "cacheCleanUpUnits": true,
	"maxConcurrentCleanUps": true, "quotaStore": true,
}

func parsePolicy(field, s string) (quota.Policy, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "LRU":
		return quota.LRU, nil
	case "LFU":
		return quota.LFU, nil
	}
	return "", fmt.Errorf("%s: unknown expiration policy %q: LRU or LFU", field, truncated(s))
}

var decimalRE = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$`)

// parseSize reads a GeoWebCache Quota: bytes = value × units, truncated
// as GeoWebCache does.
func parseSize(field, value, units string, hasValue, hasUnits bool) (int64, error) {
	if !hasValue {
		return 0, fmt.Errorf("%s: value is missing", field)
	}
	if !hasUnits {
		return 0, fmt.Errorf("%s: units is missing: one of %s", field, unitsList)
	}
	value, units = strings.TrimSpace(value), strings.TrimSpace(units)
	n, ok := storageUnits[units]
	if !ok {
		for u, v := range storageUnits { // case aside, the same names
			if strings.EqualFold(u, units) {
				n, ok = v, true
				break
			}
		}
	}
	if !ok {
		return 0, fmt.Errorf("%s: unknown units %q: one of %s", field, truncated(units), unitsList)
	}
	if len(value) > maxSizeText || !decimalRE.MatchString(value) {
		return 0, fmt.Errorf("%s: value %q is not a number", field, truncated(value))
	}
	v, ok := new(big.Rat).SetString(value)
	if !ok {
		return 0, fmt.Errorf("%s: value %q is not a number", field, truncated(value))
	}
	if v.Sign() < 0 {
		return 0, fmt.Errorf("%s: value %s must not be negative", field, value)
	}
	b := new(big.Int).Quo(new(big.Int).Mul(v.Num(), big.NewInt(n)), v.Denom())
	if !b.IsInt64() {
		return 0, fmt.Errorf("%s: %s %s is too large", field, value, units)
	}
	return b.Int64(), nil
}

func parseShare(field, s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || v < 0.5 || v > 0.99 {
		return 0, fmt.Errorf("%s: %q is not a share between 0.5 and 0.99", field, truncated(s))
	}
	return v, nil
}

func parseLevels(field string, min, max string) (*[2]int, error) {
	lo, err1 := strconv.Atoi(strings.TrimSpace(min))
	hi, err2 := strconv.Atoi(strings.TrimSpace(max))
	if err1 != nil || err2 != nil || lo < 0 || hi < lo || hi > 255 {
		return nil, fmt.Errorf("%s: min %q and max %q must be levels with 0 ≤ min ≤ max ≤ 255", field, truncated(min), truncated(max))
	}
	return &[2]int{lo, hi}, nil
}

func parseBool(field, s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s: %q is neither true nor false", field, truncated(s))
}

// --- XML ---

type xmlText struct {
	V string `xml:",chardata"`
}

type xmlSize struct {
	Value *xmlText  `xml:"value"`
	Units *xmlText  `xml:"units"`
	Other []xmlName `xml:",any"`
}

type xmlLevels struct {
	Min   *xmlText  `xml:"min"`
	Max   *xmlText  `xml:"max"`
	Other []xmlName `xml:",any"`
}

type xmlName struct {
	XMLName xml.Name
}

type xmlLayerQuota struct {
	Layer      *xmlText   `xml:"layer"`
	Policy     *xmlText   `xml:"expirationPolicyName"`
	Quota      *xmlSize   `xml:"quota"`
	KeepLevels *xmlLevels `xml:"keepLevels"`
	Other      []xmlName  `xml:",any"`
}

type xmlQuota struct {
	XMLName      xml.Name
	Enabled      *xmlText   `xml:"enabled"`
	Policy       *xmlText   `xml:"globalExpirationPolicyName"`
	GlobalQuota  *xmlSize   `xml:"globalQuota"`
	LowWatermark *xmlText   `xml:"lowWatermark"`
	KeepLevels   *xmlLevels `xml:"keepLevels"`
	LayerQuotas  *struct {
		LayerQuota []xmlLayerQuota `xml:"LayerQuota"`
		Other      []xmlName       `xml:",any"`
	} `xml:"layerQuotas"`
	Other []xmlName `xml:",any"`
}

func unknownElement(where string, others []xmlName, ignored map[string]bool) error {
	for _, o := range others {
		if !ignored[o.XMLName.Local] {
			return fmt.Errorf("unknown element <%s> in %s", truncated(o.XMLName.Local), where)
		}
	}
	return nil
}

func parseQuotaXML(body []byte) (quotaPatch, error) {
	var p quotaPatch
	if len(bytes.TrimSpace(body)) == 0 {
		return p, errors.New("empty request body: a gwcQuotaConfiguration is expected")
	}
	if err := checkNoDTD(body); err != nil {
		return p, err
	}
	var x xmlQuota
	if err := xml.Unmarshal(body, &x); err != nil {
		return p, fmt.Errorf("malformed XML: %v", err)
	}
	if x.XMLName.Local != "gwcQuotaConfiguration" {
		return p, fmt.Errorf("the root element is <%s>: a gwcQuotaConfiguration is expected", truncated(x.XMLName.Local))
	}
	if err := unknownElement("gwcQuotaConfiguration", x.Other, ignoredFields); err != nil {
		return p, err
	}
	if x.Enabled != nil {
		v, err := parseBool("enabled", x.Enabled.V)
		if err != nil {
			return p, err
		}
		p.enabled = &v
	}
	if x.Policy != nil {
		v, err := parsePolicy("globalExpirationPolicyName", x.Policy.V)
		if err != nil {
			return p, err
		}
		p.policy = &v
	}
	if x.GlobalQuota != nil {
		v, err := xmlSizeOf("globalQuota", x.GlobalQuota)
		if err != nil {
			return p, err
		}
		p.maxSize = &v
	}
	if x.LowWatermark != nil {
		v, err := parseShare("lowWatermark", x.LowWatermark.V)
		if err != nil {
			return p, err
		}
		p.lowWatermark = &v
	}
	if x.KeepLevels != nil {
		v, err := xmlLevelsOf("keepLevels", x.KeepLevels)
		if err != nil {
			return p, err
		}
		p.keepLevels = &v
	}
	if x.LayerQuotas != nil {
		if err := unknownElement("layerQuotas", x.LayerQuotas.Other, nil); err != nil {
			return p, err
		}
		layers := []layerPatch{}
		for i, lq := range x.LayerQuotas.LayerQuota {
			field := fmt.Sprintf("layerQuotas[%d]", i)
			if err := unknownElement(field, lq.Other, nil); err != nil {
				return p, err
			}
			if lq.Layer == nil || strings.TrimSpace(lq.Layer.V) == "" {
				return p, fmt.Errorf("%s: layer is missing", field)
			}
			l := layerPatch{name: strings.TrimSpace(lq.Layer.V)}
			field = fmt.Sprintf("layerQuotas[%d] (layer %q)", i, truncated(l.name))
			var err error
			if lq.Policy != nil {
				if l.policy, err = parsePolicy(field+": expirationPolicyName", lq.Policy.V); err != nil {
					return p, err
				}
			}
			if lq.Quota != nil {
				if l.maxSize, err = xmlSizeOf(field+": quota", lq.Quota); err != nil {
					return p, err
				}
			}
			if lq.KeepLevels != nil {
				if l.keepLevels, err = xmlLevelsOf(field+": keepLevels", lq.KeepLevels); err != nil {
					return p, err
				}
			}
			layers = append(layers, l)
		}
		p.layers = &layers
	}
	return p, nil
}

func xmlSizeOf(field string, s *xmlSize) (int64, error) {
	if err := unknownElement(field, s.Other, nil); err != nil {
		return 0, err
	}
	var v, u string
	if s.Value != nil {
		v = s.Value.V
	}
	if s.Units != nil {
		u = s.Units.V
	}
	return parseSize(field, v, u, s.Value != nil, s.Units != nil)
}

// xmlLevelsOf: <keepLevels/> (neither min nor max) removes the levels.
func xmlLevelsOf(field string, l *xmlLevels) (*[2]int, error) {
	if err := unknownElement(field, l.Other, nil); err != nil {
		return nil, err
	}
	if l.Min == nil && l.Max == nil {
		return nil, nil
	}
	if l.Min == nil || l.Max == nil {
		return nil, fmt.Errorf("%s: needs both min and max (or neither, to remove them)", field)
	}
	return parseLevels(field, l.Min.V, l.Max.V)
}

// --- JSON ---

// jsonScalar is a JSON string, number or boolean as text (GeoWebCache's
// JSON gives numbers as strings); ok false for anything else.
func jsonScalar(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case '{', '[', 'n':
		return "", false
	}
	return string(raw), true
}

func jsonObject(field string, raw json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s must be a JSON object", field)
	}
	return m, nil
}

func scalarField(field string, raw json.RawMessage) (string, error) {
	s, ok := jsonScalar(raw)
	if !ok {
		return "", fmt.Errorf("%s must be a string or a number", field)
	}
	return s, nil
}

func parseQuotaJSON(body []byte) (quotaPatch, error) {
	var p quotaPatch
	if len(bytes.TrimSpace(body)) == 0 {
		return p, errors.New("empty request body: a gwcQuotaConfiguration is expected")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return p, fmt.Errorf("malformed JSON: %v", err)
	}
	raw, ok := top["gwcQuotaConfiguration"]
	if !ok || len(top) != 1 {
		return p, errors.New(`the body must be {"gwcQuotaConfiguration": {...}}`)
	}
	m, err := jsonObject("gwcQuotaConfiguration", raw)
	if err != nil {
		return p, err
	}
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "enabled":
			s, err := scalarField(k, v)
			if err != nil {
				return p, err
			}
			b, err := parseBool(k, s)
			if err != nil {
				return p, err
			}
			p.enabled = &b
		case "globalExpirationPolicyName":
			s, err := scalarField(k, v)
			if err != nil {
				return p, err
			}
			pol, err := parsePolicy(k, s)
			if err != nil {
				return p, err
			}
			p.policy = &pol
		case "globalQuota":
			n, err := jsonSize(k, v)
			if err != nil {
				return p, err
			}
			p.maxSize = &n
		case "lowWatermark":
			s, err := scalarField(k, v)
			if err != nil {
				return p, err
			}
			f, err := parseShare(k, s)
			if err != nil {
				return p, err
			}
			p.lowWatermark = &f
		case "keepLevels":
			l, err := jsonLevels(k, v)
			if err != nil {
				return p, err
			}
			p.keepLevels = &l
		case "layerQuotas":
			layers, err := jsonLayers(v)
			if err != nil {
				return p, err
			}
			p.layers = &layers
		default:
			if !ignoredFields[k] {
				return p, fmt.Errorf("unknown field %q in gwcQuotaConfiguration", truncated(k))
			}
		}
	}
	return p, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func jsonSize(field string, raw json.RawMessage) (int64, error) {
	m, err := jsonObject(field, raw)
	if err != nil {
		return 0, err
	}
	var value, units string
	v, hasValue := m["value"]
	u, hasUnits := m["units"]
	for k := range m {
		if k != "value" && k != "units" {
			return 0, fmt.Errorf("%s: unknown field %q", field, truncated(k))
		}
	}
	if hasValue {
		if value, err = scalarField(field+": value", v); err != nil {
			return 0, err
		}
	}
	if hasUnits {
		if units, err = scalarField(field+": units", u); err != nil {
			return 0, err
		}
	}
	return parseSize(field, value, units, hasValue, hasUnits)
}

// jsonLevels: {"min": a, "max": b}, or null to remove the levels.
func jsonLevels(field string, raw json.RawMessage) (*[2]int, error) {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	m, err := jsonObject(field, raw)
	if err != nil {
		return nil, err
	}
	for k := range m {
		if k != "min" && k != "max" {
			return nil, fmt.Errorf("%s: unknown field %q", field, truncated(k))
		}
	}
	lo, okLo := jsonScalar(m["min"])
	hi, okHi := jsonScalar(m["max"])
	if !okLo || !okHi {
		return nil, fmt.Errorf("%s: needs both min and max (or null, to remove them)", field)
	}
	return parseLevels(field, lo, hi)
}

// jsonLayers reads layerQuotas: an array of LayerQuota objects (as GET
// writes it), each possibly wrapped as {"LayerQuota": {...}}, or
// {"LayerQuota": object or array} (XStream's other JSON mappings).
func jsonLayers(raw json.RawMessage) ([]layerPatch, error) {
	raw = bytes.TrimSpace(raw)
	var items []json.RawMessage
	switch {
	case string(raw) == "null" || string(raw) == `""`:
		// Jettison's empty list.
	case len(raw) > 0 && raw[0] == '[':
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, errors.New("layerQuotas must be an array of LayerQuota objects")
		}
	case len(raw) > 0 && raw[0] == '{':
		m, err := jsonObject("layerQuotas", raw)
		if err != nil {
			return nil, err
		}
		inner, ok := m["LayerQuota"]
		if len(m) > 1 || len(m) == 1 && !ok {
			return nil, errors.New(`layerQuotas must be an array of LayerQuota objects or {"LayerQuota": [...]}`)
		}
		inner = bytes.TrimSpace(inner)
		if len(inner) > 0 && inner[0] == '[' {
			if err := json.Unmarshal(inner, &items); err != nil {
				return nil, errors.New("layerQuotas.LayerQuota must be an array of objects")
			}
		} else if ok {
			items = []json.RawMessage{inner}
		}
	default:
		return nil, errors.New("layerQuotas must be an array of LayerQuota objects")
	}
	layers := []layerPatch{}
	for i, item := range items {
		field := fmt.Sprintf("layerQuotas[%d]", i)
		m, err := jsonObject(field, item)
		if err != nil {
			return nil, err
		}
		if inner, ok := m["LayerQuota"]; ok && len(m) == 1 {
			if m, err = jsonObject(field, inner); err != nil {
				return nil, err
			}
		}
		name, ok := jsonScalar(m["layer"])
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("%s: layer is missing", field)
		}
		l := layerPatch{name: strings.TrimSpace(name)}
		field = fmt.Sprintf("layerQuotas[%d] (layer %q)", i, truncated(l.name))
		for _, k := range sortedKeys(m) {
			v := m[k]
			switch k {
			case "layer":
			case "expirationPolicyName":
				s, err := scalarField(field+": "+k, v)
				if err != nil {
					return nil, err
				}
				if l.policy, err = parsePolicy(field+": "+k, s); err != nil {
					return nil, err
				}
			case "quota":
				if string(bytes.TrimSpace(v)) == "null" {
					continue
				}
				if l.maxSize, err = jsonSize(field+": quota", v); err != nil {
					return nil, err
				}
			case "keepLevels":
				if l.keepLevels, err = jsonLevels(field+": keepLevels", v); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("%s: unknown field %q", field, truncated(k))
			}
		}
		layers = append(layers, l)
	}
	return layers, nil
}
