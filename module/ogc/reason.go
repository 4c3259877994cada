package ogc

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ReasonMaxLen bounds an upstream's reason (Reason) in bytes: a long
// MapServer message fits, and a log line or a 502 body stays one line.
const ReasonMaxLen = 300

// reasonScan bounds how much of an answer is parsed for its reason: an
// exception report is a few hundred bytes, and an upstream that sends
// megabytes of something else must not cost a parse of all of it.
const reasonScan = 64 << 10

// Reason returns, as one escaped line of at most ReasonMaxLen bytes, what
// an upstream WMS said when it answered a GetMap with something other than
// an image: the codes and texts of a WMS ServiceExceptionReport (1.1.1, or
// 1.3.0 in the OGC namespace) or of an OWS ExceptionReport (1.0 to 2.0),
// "code: text" for each, joined by " | ". An answer in other markup (an
// HTML error page) gives its text between tags, a plain-text answer its
// text; a binary one, or an empty one, gives "". contentType is the answer's
// Content-Type, consulted only to tell text from binary.
func Reason(contentType string, body []byte) string {
	check := body // what must be valid UTF-8 for the answer to be text
	if len(body) > reasonScan {
		body = body[:reasonScan]
		// The cut may have split the last character: only earlier
		// invalid bytes mean binary.
		check = body[:reasonScan-utf8.UTFMax]
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '<' {
		trimmed = escapeIllegal(trimmed)
		if s := exceptionText(trimmed); s != "" {
			return OneLine(s, ReasonMaxLen)
		}
		return OneLine(markupText(trimmed), ReasonMaxLen)
	}
	mt, _, _ := strings.Cut(strings.ToLower(contentType), ";")
	mt = strings.TrimSpace(mt)
	textual := strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "json") || strings.HasSuffix(mt, "xml") || mt == ""
	if !textual || !utf8.Valid(check) {
		return ""
	}
	return OneLine(string(body), ReasonMaxLen)
}

// escapeIllegal writes the bytes XML forbids (control characters other
// than tab and line breaks, invalid UTF-8) as Go escapes before parsing:
// encoding/xml stops at the first, losing the text around it, and the
// escape is what OneLine would make of them anyway.
func escapeIllegal(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		var esc string
		switch {
		case r == utf8.RuneError && size == 1:
			esc = fmt.Sprintf(`\x%02x`, b[i])
		case (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f:
			esc = fmt.Sprintf(`\x%02x`, r)
		}
		if esc != "" && out == nil {
			out = append(make([]byte, 0, len(b)+64), b[:i]...)
		}
		switch {
		case esc != "":
			out = append(out, esc...)
		case out != nil:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	if out == nil {
		return b // the usual case: nothing to escape, nothing copied
	}
	return out
}

// exceptionText collects the exceptions of a ServiceExceptionReport or an
// OWS ExceptionReport, by local element names: servers differ in
// namespaces and versions, and a truncated or malformed document still
// gives what came before the damage.
func exceptionText(body []byte) string {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	var (
		out       []string
		cur       *strings.Builder // text of the exception being read
		code, loc string
		inText    bool // inside an OWS ExceptionText
		ows       bool // the current exception is an OWS one
	)
	flush := func() {
		if cur == nil {
			return
		}
		text := strings.TrimSpace(cur.String())
		head := code
		if loc != "" {
			head = strings.TrimSpace(head + " (" + loc + ")")
		}
		switch {
		case head != "" && text != "":
			out = append(out, head+": "+text)
		case head != "":
			out = append(out, head)
		case text != "":
			out = append(out, text)
		}
		cur = nil
	}
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "ServiceException", "Exception":
				flush()
				cur = new(strings.Builder)
				ows = t.Name.Local == "Exception"
				code, loc = "", ""
				for _, a := range t.Attr {
					switch a.Name.Local {
					case "code", "exceptionCode":
						code = strings.TrimSpace(a.Value)
					case "locator":
						loc = strings.TrimSpace(a.Value)
					}
				}
			case "ExceptionText":
				inText = true
				if cur != nil && cur.Len() > 0 {
					cur.WriteString(" ")
				}
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "ServiceException", "Exception":
				flush()
			case "ExceptionText":
				inText = false
			}
		case xml.CharData:
			// An OWS exception's words are in its ExceptionText; a WMS
			// one's are its own character data (CDATA included).
			if cur != nil && (!ows || inText) {
				cur.Write(t)
			}
		}
	}
	flush()
	return strings.Join(out, " | ")
}

// markupText is the character data of an XML or HTML answer without its
// tags, comments, declarations, scripts and styles: a best effort for
// error pages, which need not be well-formed.
func markupText(body []byte) string {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false
	d.AutoClose = xml.HTMLAutoClose
	d.Entity = xml.HTMLEntity
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	var b strings.Builder
	skip := 0
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if n := strings.ToLower(t.Name.Local); n == "script" || n == "style" {
				skip++
			}
		case xml.EndElement:
			if n := strings.ToLower(t.Name.Local); (n == "script" || n == "style") && skip > 0 {
				skip--
			}
		case xml.CharData:
			if skip == 0 {
				b.Write(t)
				b.WriteByte(' ')
			}
		}
	}
	return b.String()
}

// OneLine makes s safe for a one-line log entry or a plain-text body, also
// when printed in a terminal: each run of white space (tab, CR, LF, VT, FF,
// Unicode spaces) becomes one space, and none is left at either end; other
// C0 controls and DEL are written as Go escapes (\x1b, \x7f), C1 controls
// and the line and paragraph separators U+0085, U+2028, U+2029 as \u009b,
// \u2028, and a byte that is not UTF-8 as \xff. The result is cut to at
// most max bytes between whole characters and escapes, ending in "…" when
// cut.
func OneLine(s string, max int) string {
	var b strings.Builder
	space := false
	cutAt := -1 // where the text is cut if it turns out too long
	for i := 0; i < len(s) && b.Len() <= max; {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029:
			// C1 controls: a terminal takes U+009B for ESC [, which
			// starts the same sequences \x1b does. U+0085 and the
			// separators are white space too, but no exception text
			// wraps its lines with them: the escape shows what was sent.
			piece = fmt.Sprintf(`\u%04x`, r)
		case unicode.IsSpace(r):
			space = b.Len() > 0
			i += size
			continue
		case r < 0x20 || r == 0x7f:
			piece = fmt.Sprintf(`\x%02x`, r)
		default:
			piece = s[i : i+size]
		}
		i += size
		if space {
			piece = " " + piece
			space = false
		}
		if cutAt < 0 && b.Len()+len(piece) > max-len("…") {
			cutAt = b.Len() // whole pieces only: never half a character or escape
		}
		b.WriteString(piece)
	}
	if b.Len() <= max {
		return b.String()
	}
	return b.String()[:cutAt] + "…"
}
