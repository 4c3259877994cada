package imaging

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"regexp"
	"strings"
	"unicode/utf8"
)

var (
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte{0xff, 0xd8, 0xff}
	utf8BOM   = []byte{0xef, 0xbb, 0xbf}
)

// excerptLen bounds how much of an upstream error body goes into an error
// message: enough for a ServiceException text, short enough for a log line.
const excerptLen = 160

// Decode checks an upstream answer and decodes it. PNGs of 8-bit RGBA,
// RGB or paletted pixels, not interlaced (what WMS servers send), are
// decoded by this package's decoder into pooled pixel buffers: give the
// image back with Recycle once its tiles are encoded, or let the GC have
// it. Other PNGs go to image/png, JPEGs to image/jpeg, freshly allocated.
// (Profile of a 1024² MapServer PNG with image/png: inflate half the time,
// its Adler-32 check a quarter, zeroing the new image a tenth.) Slice then
// cuts the image without copying, and the PNG encoder reads the tiles in
// place.
//
// It fails unless
// contentType (the HTTP Content-Type header) starts with "image/", the body
// is not XML, the body is PNG or JPEG by its magic bytes (the header is not
// trusted for that: servers mislabel), and the image is exactly wantW×wantH.
func Decode(contentType string, body []byte, wantW, wantH int) (image.Image, error) {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if len(body) == 0 {
		return nil, fmt.Errorf("imaging: upstream sent an empty body (Content-Type %q)", contentType)
	}
	if !strings.HasPrefix(mt, "image/") {
		return nil, fmt.Errorf("imaging: upstream sent %q, not an image: %s", contentType, excerpt(body))
	}
	// WMS servers report errors as a ServiceException document, and some send
	// it with the Content-Type of the requested format.
	if looksLikeXML(body) {
		return nil, fmt.Errorf("imaging: upstream sent XML labelled %q: %s", contentType, excerpt(body))
	}

	var (
		kind   string
		config func([]byte) (image.Config, error)
		decode func([]byte) (image.Image, error)
	)
	switch {
	case bytes.HasPrefix(body, pngMagic):
		kind = "png"
		config = func(b []byte) (image.Config, error) { return png.DecodeConfig(bytes.NewReader(b)) }
		decode = func(b []byte) (image.Image, error) {
			img, err := decodePNG(b)
			if err == errNotHandled {
				return png.Decode(bytes.NewReader(b))
			}
			return img, err
		}
	case bytes.HasPrefix(body, jpegMagic):
		kind = "jpeg"
		config = func(b []byte) (image.Config, error) { return jpeg.DecodeConfig(bytes.NewReader(b)) }
		decode = func(b []byte) (image.Image, error) { return jpeg.Decode(bytes.NewReader(b)) }
	default:
		return nil, fmt.Errorf("imaging: upstream body (%q, %d bytes) is neither PNG nor JPEG, starts % x",
			contentType, len(body), body[:min(len(body), 8)])
	}

	// The header alone tells the size: a wrong-sized answer is refused before
	// paying for a full decode.
	cfg, err := config(body)
	if err != nil {
		return nil, fmt.Errorf("imaging: bad %s header from upstream (%d bytes): %v", kind, len(body), err)
	}
	if cfg.Width != wantW || cfg.Height != wantH {
		return nil, fmt.Errorf("imaging: upstream %s is %dx%d, want %dx%d", kind, cfg.Width, cfg.Height, wantW, wantH)
	}
	img, err := decode(body)
	if err != nil {
		return nil, fmt.Errorf("imaging: cannot decode upstream %s (%d bytes): %v", kind, len(body), err)
	}
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
		Recycle(img)
		return nil, fmt.Errorf("imaging: upstream %s decoded to %dx%d, want %dx%d", kind, b.Dx(), b.Dy(), wantW, wantH)
	}
	return img, nil
}

// exceptionCode matches the code attribute of a WMS ServiceException and of
// an OWS Exception (WMTS, WMS 1.3 via OWS).
var exceptionCode = regexp.MustCompile(`^<(?:\w+:)?(?:ServiceException|Exception)\s[^>]*\b(?:code|exceptionCode)\s*=\s*["']([^"']*)["']`)

func looksLikeXML(body []byte) bool {
	body = bytes.TrimPrefix(body, utf8BOM)
	body = bytes.TrimLeft(body, " \t\r\n")
	return len(body) > 0 && body[0] == '<'
}

// excerpt renders the start of a non-image body for an error message. For
// XML or HTML it keeps only the text between tags, because that is where a
// ServiceException carries its message.
func excerpt(body []byte) string {
	size := len(body)
	body = body[:min(len(body), 4096)]
	// The cut may split a rune; only earlier invalid bytes mean binary.
	if !utf8.Valid(body[:max(0, len(body)-utf8.UTFMax)]) {
		return fmt.Sprintf("(%d bytes of binary data, starts % x)", size, body[:min(len(body), 8)])
	}
	var sb strings.Builder
	text := markupText(body)
	if text == "" {
		text = string(body)
	}
	space := false
	for _, r := range text {
		if sb.Len() >= excerptLen {
			sb.WriteString("…")
			break
		}
		switch {
		case r == utf8.RuneError:
			continue
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			space = sb.Len() > 0
			continue
		case r < 0x20 || r == 0x7f:
			continue
		}
		if space {
			sb.WriteByte(' ')
			space = false
		}
		sb.WriteRune(r)
	}
	return fmt.Sprintf("%q", sb.String())
}

// markupText returns the character data of an XML/HTML fragment, CDATA
// included, without tags, comments or declarations. It is not a parser: the
// body may be truncated or malformed, and a best effort is all a log needs.
func markupText(b []byte) string {
	if !looksLikeXML(b) {
		return ""
	}
	var sb strings.Builder
	for len(b) > 0 {
		i := bytes.IndexByte(b, '<')
		if i < 0 {
			sb.Write(b)
			break
		}
		sb.Write(b[:i])
		b = b[i:]
		if rest, ok := bytes.CutPrefix(b, []byte("<![CDATA[")); ok {
			data, after, _ := bytes.Cut(rest, []byte("]]>"))
			sb.Write(data)
			b = after
			continue
		}
		end := []byte(">")
		if bytes.HasPrefix(b, []byte("<!--")) {
			end = []byte("-->")
		}
		tag, after, found := bytes.Cut(b, end)
		if !found {
			break
		}
		b = after
		sb.WriteByte(' ')
		// The exception code (LayerNotDefined, InvalidSRS...) is an
		// attribute, yet it is the most useful word in the report.
		if m := exceptionCode.FindSubmatch(tag); m != nil {
			sb.Write(m[1])
			sb.WriteString(": ")
		}
	}
	r := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'", "&amp;", "&")
	return strings.TrimSpace(r.Replace(sb.String()))
}
