package ogc

import (
	"encoding/xml"
	"strings"
	"testing"
)

func TestNumAndPairKeepEveryDigitWithoutExponent(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{279541132.0143589, "279541132.0143589"},
		{-180, "-180"},
		{20037508.34, "20037508.34"},
		{0.5, "0.5"},
		{1e21, "1000000000000000000000"},
	} {
		b, _ := Num(c.v).MarshalText()
		if string(b) != c.want {
			t.Errorf("Num(%v) = %q, want %q", c.v, b, c.want)
		}
	}
	b, _ := Pair{90, -180}.MarshalText()
	if string(b) != "90 -180" {
		t.Errorf("Pair = %q", b)
	}
}

// The prefixed element names must come out literally and be declared on
// the root, so that a namespace-aware parser sees OWS elements in the OWS
// namespace and WMTS elements in the WMTS one.
func TestCapabilitiesNamespaces(t *testing.T) {
	c := NewCapabilities()
	c.ServiceIdentification.Title = "t"
	c.Contents.Layers = []Layer{{Identifier: "l", Styles: []Style{{IsDefault: true, Identifier: "default"}}}}
	c.OperationsMetadata.Operations = []Operation{{Name: "GetTile", Gets: []Get{{Href: "http://h/wmts?",
		Constraint: Constraint{Name: "GetEncoding", Values: []string{"KVP"}}}}}}
	b, err := Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{`<?xml version="1.0" encoding="UTF-8"?>`, `<ows:Identifier>l</ows:Identifier>`,
		`xmlns:ows="http://www.opengis.net/ows/1.1"`, `<Style isDefault="true">`, `xlink:href="http://h/wmts?"`} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in\n%s", want, s)
		}
	}
	var got struct {
		XMLName  xml.Name
		Contents struct {
			Layer []struct {
				Identifier struct {
					XMLName xml.Name
					Value   string `xml:",chardata"`
				} `xml:"http://www.opengis.net/ows/1.1 Identifier"`
			} `xml:"http://www.opengis.net/wmts/1.0 Layer"`
		} `xml:"http://www.opengis.net/wmts/1.0 Contents"`
		Ops struct {
			Op []struct {
				Name string `xml:"name,attr"`
				Get  []struct {
					Href string `xml:"http://www.w3.org/1999/xlink href,attr"`
				} `xml:"http://www.opengis.net/ows/1.1 DCP>HTTP>Get"`
			} `xml:"http://www.opengis.net/ows/1.1 Operation"`
		} `xml:"http://www.opengis.net/ows/1.1 OperationsMetadata"`
	}
	if err := xml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.XMLName.Space != NSWMTS || got.XMLName.Local != "Capabilities" {
		t.Errorf("root %v", got.XMLName)
	}
	if len(got.Contents.Layer) != 1 || got.Contents.Layer[0].Identifier.Value != "l" ||
		got.Contents.Layer[0].Identifier.XMLName.Space != NSOWS {
		t.Errorf("layers %+v", got.Contents.Layer)
	}
	if len(got.Ops.Op) != 1 || len(got.Ops.Op[0].Get) != 1 || got.Ops.Op[0].Get[0].Href != "http://h/wmts?" {
		t.Errorf("operations %+v", got.Ops)
	}
}

func TestExceptionReport(t *testing.T) {
	b, err := Marshal(NewExceptionReport(CodeTileOutOfRange, "TILEROW", "row 9 > 3"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		XMLName   xml.Name
		Version   string `xml:"version,attr"`
		Exception []struct {
			Code    string `xml:"exceptionCode,attr"`
			Locator string `xml:"locator,attr"`
			Text    string `xml:"http://www.opengis.net/ows/1.1 ExceptionText"`
		} `xml:"http://www.opengis.net/ows/1.1 Exception"`
	}
	if err := xml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.XMLName.Space != NSOWS || got.XMLName.Local != "ExceptionReport" || got.Version != "1.1.0" ||
		len(got.Exception) != 1 || got.Exception[0].Code != "TileOutOfRange" ||
		got.Exception[0].Locator != "TILEROW" || got.Exception[0].Text != "row 9 > 3" {
		t.Errorf("%+v\n%s", got, b)
	}
}
