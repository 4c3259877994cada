package tilecache

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tilecache/caddy-tilecache/module/ogc"
)

// WMTS names a layer's styles where WMS-C sends STYLES: each WMTS style
// stands for one value of the layer's STYLES filter.

// defaultStyle is the WMTS identifier of the empty STYLES value.
const defaultStyle = "default"

// wmtsStyle is one WMTS style: its identifier and the STYLES value it means.
type wmtsStyle struct {
	id, value string
	isDefault bool
}

// wmtsStyles are a layer's WMTS styles, the default first.
type wmtsStyles struct {
	list []wmtsStyle
	// filtered: the layer has a STYLES filter; without one the only style
	// is "default", the empty STYLES.
	filtered bool
	// defaultIsValue: the STYLES filter accepts "default" as a value of its
	// own, so the WMTS style "default" is that value and not the default.
	defaultIsValue bool
	// configured are the STYLES filter's values as configured (the demo
	// page offers them).
	configured []string
}

// compileStyles lists the layer's WMTS styles: the STYLES filter's values,
// its default first, in their normalized spelling; the empty value is
// called "default" (unless that is a value itself).
func compileStyles(l *Layer, c *LayerConfig) (wmtsStyles, error) {
	var values []string
	for i := range c.Parameters {
		if strings.EqualFold(c.Parameters[i].Key, "STYLES") {
			values = c.Parameters[i].Values
		}
	}
	s := wmtsStyles{filtered: l.Params.Has("STYLES"), configured: values}
	if !s.filtered {
		s.list = []wmtsStyle{{id: defaultStyle, value: "", isDefault: true}}
		return s, nil
	}
	_, err := l.Params.Normalize(map[string]string{"STYLES": defaultStyle})
	s.defaultIsValue = err == nil
	def := l.Params.Defaults().Get("STYLES")
	add := func(v string) {
		id := v
		if v == "" {
			if s.defaultIsValue {
				return // "default" names the value "default"; "" is only the KVP empty STYLE
			}
			id = defaultStyle
		}
		for _, st := range s.list {
			if st.id == id {
				return
			}
		}
		s.list = append(s.list, wmtsStyle{id: id, value: v, isDefault: v == def})
	}
	add(def)
	for _, v := range values {
		n, err := l.Params.Normalize(map[string]string{"STYLES": v})
		if err != nil {
			return s, fmt.Errorf("STYLES value %q: %v", v, err)
		}
		add(n.Get("STYLES"))
	}
	return s, nil
}

// styleValue maps a WMTS style to the STYLES value it stands for: "" and
// "default" are the filter's default (unless "default" is one of its
// values); anything else must be a value the STYLES filter accepts.
func (l *Layer) styleValue(style string) (string, *svcError) {
	if !l.styles.filtered {
		if style == "" || strings.EqualFold(style, defaultStyle) {
			return "", nil
		}
		return "", errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "Style",
			"layer %s has no style %q (only %q)", l.Name, style, defaultStyle)
	}
	if style == defaultStyle && !l.styles.defaultIsValue {
		style = ""
	}
	if _, err := l.Params.Normalize(map[string]string{"STYLES": style}); err != nil {
		ids := make([]string, len(l.styles.list))
		for i, s := range l.styles.list {
			ids[i] = s.id
		}
		return "", errorf(http.StatusBadRequest, ogc.CodeInvalidParameterValue, "Style",
			"layer %s has no style %q (styles: %s)", l.Name, style, strings.Join(ids, ", "))
	}
	return style, nil
}
