package ogc

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReason(t *testing.T) {
	for _, c := range []struct {
		name, contentType, body, want string
	}{
		{"WMS 1.1.1 (MapServer, with DOCTYPE)", "application/vnd.ogc.se_xml", `<?xml version='1.0' encoding="UTF-8" standalone="no" ?>
<!DOCTYPE ServiceExceptionReport SYSTEM "http://schemas.opengis.net/wms/1.1.1/exception_1_1_1.dtd">
<ServiceExceptionReport version="1.1.1">
<ServiceException code="LayerNotDefined">
msWMSLoadGetMapParams(): WMS server error. Invalid layer(s) given in the LAYERS parameter.
</ServiceException>
</ServiceExceptionReport>`, "LayerNotDefined: msWMSLoadGetMapParams(): WMS server error. Invalid layer(s) given in the LAYERS parameter."},
		{"WMS 1.3.0 (QGIS Server)", "text/xml; charset=utf-8", `<?xml version="1.0" encoding="UTF-8"?>
<ServiceExceptionReport version="1.3.0" xmlns="http://www.opengis.net/ogc">
 <ServiceException code="LayerNotDefined">The layer 'nope' does not exist.</ServiceException>
</ServiceExceptionReport>`, "LayerNotDefined: The layer 'nope' does not exist."},
		{"two exceptions, a locator, entities and CDATA", "text/xml", `<ServiceExceptionReport><ServiceException code="InvalidFormat" locator="FORMAT">bad &amp; <![CDATA[worse <x>]]></ServiceException><ServiceException>second</ServiceException></ServiceExceptionReport>`,
			"InvalidFormat (FORMAT): bad & worse <x> | second"},
		{"OWS 1.1 ExceptionReport (GeoServer)", "application/xml", `<?xml version="1.0" encoding="UTF-8"?>
<ows:ExceptionReport xmlns:ows="http://www.opengis.net/ows/1.1" version="1.1.0">
  <ows:Exception exceptionCode="InvalidParameterValue" locator="layers">
    <ows:ExceptionText>Could not find layer nope</ows:ExceptionText>
    <ows:ExceptionText>second line</ows:ExceptionText>
  </ows:Exception>
</ows:ExceptionReport>`, "InvalidParameterValue (layers): Could not find layer nope second line"},
		{"code without text", "text/xml", `<ServiceExceptionReport><ServiceException code="MissingDimensionValue"/></ServiceExceptionReport>`, "MissingDimensionValue"},
		{"truncated report keeps what came", "text/xml", `<ServiceExceptionReport><ServiceException code="X">cut here`, "X: cut here"},
		{"HTML error page: its text", "text/html", `<html><head><title>500 Internal Server Error</title><style>p{x:y}</style></head><body><h1>Oops</h1><p>mapserv crashed&nbsp;again<br></body></html>`,
			"500 Internal Server Error Oops mapserv crashed again"},
		{"plain text", "text/plain", "Service Unavailable\r\n\r\nback soon", "Service Unavailable back soon"},
		{"binary", "image/png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", ""},
		{"binary labelled text", "text/plain", "ab\xff\xfe\x00\x01cdefghij", ""},
		{"empty", "text/xml", "", ""},
		{"control characters and invalid UTF-8 in a report", "text/xml", "<ServiceExceptionReport><ServiceException code=\"C\">a\x1b[2Jb\xffc\r\nd</ServiceException></ServiceExceptionReport>", `C: a\x1b[2Jb\xffc d`},
		{"control characters and line breaks", "text/plain", "a\x1b[31mred\x07\u2028b\nc", `a\x1b[31mred\x07\u2028b c`},
	} {
		if got := Reason(c.contentType, []byte(c.body)); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestReasonIsBounded(t *testing.T) {
	// A huge report: one line, at most ReasonMaxLen bytes, valid UTF-8,
	// cut with an ellipsis, and the parse stops early.
	long := `<ServiceExceptionReport><ServiceException code="Big">` +
		strings.Repeat("é\n", 1<<20) + `</ServiceException></ServiceExceptionReport>`
	got := Reason("text/xml", []byte(long))
	if len(got) > ReasonMaxLen || !strings.HasPrefix(got, "Big: é é") || !strings.HasSuffix(got, "…") ||
		strings.ContainsAny(got, "\n\r") || !utf8.ValidString(got) {
		t.Errorf("huge report: %d bytes %q", len(got), got)
	}
	got = Reason("text/plain", []byte(strings.Repeat("\x01", 1000)))
	if len(got) > ReasonMaxLen || !strings.HasSuffix(got, `\x01…`) {
		t.Errorf("escapes: %d bytes %q", len(got), got)
	}
}

func TestOneLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"  fits exactly  ", 12, "fits exactly"},
		{"one two three", 10, "one two…"},
		{"ab\x07cd", 6, "ab…"}, // never half an escape
		{"aéb", 5, "aéb"},
		{"aéébb", 6, "aé…"}, {"aéébb", 5, "a…"},
		{"x\xffy", 20, `x\xffy`},
		// White space: each run one space, none at the ends.
		{"\t a\tb\r\nc\vd\fe\u00a0f\u3000g \n", 40, "a b c d e f g"},
		// Other C0 controls and DEL as \xNN.
		{"a\x00b\x1b[2Jc\x7fd", 40, `a\x00b\x1b[2Jc\x7fd`},
		// C1 controls (U+009B is CSI) and the line and paragraph
		// separators as \uNNNN, spaces around them kept.
		{"a\u0080b\u009b2Jc\u0085d \u2028 e\u2029", 60, `a\u0080b\u009b2Jc\u0085d \u2028 e\u2029`},
		{"a\u2028b", 7, "a…"}, // never half an escape
	} {
		if got := OneLine(c.in, c.max); got != c.want || len(got) > c.max {
			t.Errorf("OneLine(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
