package imaging

import (
	"fmt"
	"strings"
)

// PNGCompression trades PNG encoding time against tile size. Every setting
// is lossless; they differ only in how hard deflate and the row filters
// work. The zero value is PNGDefault.
type PNGCompression uint8

const (
	// PNGDefault is the best size/speed balance measured on rendered map
	// tiles (see pngSettingsOf): on this project's MapServer tiles about a
	// third of image/png's time, and 9-17 % smaller.
	PNGDefault PNGCompression = iota
	// PNGFast spends the least CPU per tile (about a fifth of image/png's
	// on maps), for seeds where time matters more than storage.
	PNGFast
	// PNGBest makes the smallest tiles this encoder can, at 3-22× the CPU
	// of PNGDefault and up to twice image/png's.
	PNGBest
)

var pngCompressionNames = [...]string{PNGDefault: "default", PNGFast: "fast", PNGBest: "best"}

// ParsePNGCompression accepts "fast", "default" and "best"
// (case-insensitive); "" means default, like the zero value.
func ParsePNGCompression(s string) (PNGCompression, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return PNGDefault, nil
	}
	for c, name := range pngCompressionNames {
		if t == name {
			return PNGCompression(c), nil
		}
	}
	return 0, fmt.Errorf("imaging: unknown PNG compression %q (want fast, default or best)", s)
}

func (c PNGCompression) String() string {
	if int(c) < len(pngCompressionNames) {
		return pngCompressionNames[c]
	}
	return fmt.Sprintf("PNGCompression(%d)", uint8(c))
}

// MarshalText and UnmarshalText let configurations (JSON, Caddyfile
// adapters) carry the setting as its name.
func (c PNGCompression) MarshalText() ([]byte, error) {
	if int(c) >= len(pngCompressionNames) {
		return nil, fmt.Errorf("imaging: invalid PNG compression %d", uint8(c))
	}
	return []byte(c.String()), nil
}

func (c *PNGCompression) UnmarshalText(b []byte) error {
	v, err := ParsePNGCompression(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}
