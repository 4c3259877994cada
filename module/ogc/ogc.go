// Package ogc holds the XML documents of the tile services: the WMTS 1.0.0
// capabilities, the OWS 1.1 exception report, and the TMS 1.0.0 resources.
// It is pure data: no HTTP, no Caddy.
//
// Element names carry their namespace prefix literally ("ows:Identifier")
// and the root element declares the prefixes. encoding/xml would otherwise
// redeclare a default namespace on every element, and some clients (QGIS
// among them) look elements up by their prefixed name.
package ogc

import (
	"bytes"
	"encoding/xml"
	"strconv"
)

// Namespaces of the documents.
const (
	NSWMTS  = "http://www.opengis.net/wmts/1.0"
	NSOWS   = "http://www.opengis.net/ows/1.1"
	NSXLink = "http://www.w3.org/1999/xlink"
	NSXSI   = "http://www.w3.org/2001/XMLSchema-instance"
	NSGML   = "http://www.opengis.net/gml"
)

// Num is a number written the shortest way that reads back as the same
// float64, in plain notation ("279541132.0143589", "-180", "0.5"), never
// with an exponent: what clients' number parsers all accept.
type Num float64

// MarshalText implements encoding.TextMarshaler (used for attributes and
// character data alike).
func (n Num) MarshalText() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(n), 'f', -1, 64), nil
}

// Pair is two numbers separated by a space, as OWS corners are written.
type Pair [2]float64

// MarshalText implements encoding.TextMarshaler.
func (p Pair) MarshalText() ([]byte, error) {
	b := strconv.AppendFloat(nil, p[0], 'f', -1, 64)
	b = append(b, ' ')
	return strconv.AppendFloat(b, p[1], 'f', -1, 64), nil
}

// Marshal renders a document with the XML declaration, indented.
func Marshal(doc any) ([]byte, error) { return marshal("", doc) }

// marshal renders a document after the XML declaration and prolog (a
// DOCTYPE, or nothing).
func marshal(prolog string, doc any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	b.WriteString(prolog)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}
