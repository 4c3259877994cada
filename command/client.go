package command

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// client talks to one tile_cache_admin: the URL it is mounted at, Basic
// credentials, and a TLS configuration that trusts what Caddy would.
type client struct {
	base       string // the mount point, without a trailing slash
	user, pass string
	hasAuth    bool
	http       *http.Client
}

// newClient checks the connection settings; nothing is sent yet.
func newClient(o *connOptions) (*client, error) {
	raw := o.url
	if raw == "" {
		return nil, usage("no URL of the cache's REST interface: give --url or set %s (e.g. https://tiles.example.com/geowebcache)", envURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usage("--url %q is not an http:// or https:// URL", redact(raw))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, usage("--url must be where tile_cache_admin is mounted, without a query or fragment")
	}
	c := &client{user: o.user}
	if u.User != nil {
		if _, set := u.User.Password(); set && o.urlFromFlag {
			// The process list shows every argument to every user of the machine.
			return nil, usage("no password in --url: it would show in the process list; set %s or use --password-file", envPassword)
		}
		if c.user == "" {
			c.user = u.User.Username()
		}
		if p, set := u.User.Password(); set {
			c.pass, c.hasAuth = p, true
		}
		u.User = nil
	}
	// The mount point: http://host/geowebcache, also when given as
	// .../geowebcache/ or .../geowebcache/rest.
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/rest")
	u.RawPath = ""
	c.base = strings.TrimSuffix(u.String(), "/")
	if c.user != "" && !c.hasAuth {
		p, err := o.password()
		if err != nil {
			return nil, err
		}
		c.pass, c.hasAuth = p, true
	}
	tr := http.DefaultTransport.(*http.Transport).Clone() // keeps HTTP(S)_PROXY
	if u.Scheme == "https" {
		roots, err := trustedRoots(o.caCerts)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	c.http = &http.Client{
		Transport: tr,
		Timeout:   o.timeout,
		// A redirect would resend the request elsewhere, credentials and
		// all, or turn a POST into a GET: show it instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// redact hides a password in a URL that goes into a message.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable)"
}

// localCARoot is where Caddy keeps the root certificate of its local CA
// (`tls internal`, and every localhost site): the default storage of the
// user running the command.
func localCARoot() string {
	return filepath.Join(caddy.AppDataDir(), "pki", "authorities", "local", "root.crt")
}

// trustedRoots is the system's roots (with the fallback bundle Caddy's
// binary carries), the local CA root of this user's Caddy if there is one,
// and the --ca-cert files.
func trustedRoots(files []string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if pem, err := os.ReadFile(localCARoot()); err == nil {
		pool.AppendCertsFromPEM(pem) // a broken file is no reason to refuse other roots
	}
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, usage("--ca-cert: %v", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usage("--ca-cert %s: no PEM certificate in it", f)
		}
	}
	return pool, nil
}

// answer is a response read whole (every answer of the interface is small).
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request and reads the answer. A transport failure is
// ExitUnreachable; an error status is the server's one-line message with
// its exit status.
func (c *client) do(ctx context.Context, method, path, contentType string, body io.Reader) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return answer{}, usage("%v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.hasAuth {
		req.SetBasicAuth(c.user, c.pass)
	}
	req.Header.Set("User-Agent", "caddy-tile-cache-cli")
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return answer{}, ctx.Err()
		}
		return answer{}, fail(ExitUnreachable, "%s unreachable: %s", hostOf(c.base), netReason(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return answer{}, fail(ExitUnreachable, "%s: reading the answer: %s", hostOf(c.base), netReason(err))
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: b}
	if resp.StatusCode/100 == 2 {
		return a, nil
	}
	return a, c.statusError(a)
}

func hostOf(base string) string {
	if u, err := url.Parse(base); err == nil {
		return u.Host
	}
	return base
}

// netReason is a transport error without the request line Go's url.Error
// puts in front (the URL is known to whoever typed it).
func netReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ce *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ce) || errors.As(err, &ua) {
		return fmt.Sprintf("TLS: %v (trust its CA with --ca-cert)", err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "no answer in time (--timeout)"
	}
	return err.Error()
}

// statusError turns an error status into one line: the status, the
// server's own one-line text/plain message, and a hint where the status
// alone says little.
func (c *client) statusError(a answer) error {
	code := ExitRefused
	if a.status == http.StatusTooManyRequests || a.status/100 == 5 {
		code = ExitUnavailable
	}
	msg := fmt.Sprintf("%d %s", a.status, http.StatusText(a.status))
	if line := firstLine(a); line != "" {
		msg += ": " + line
	}
	switch a.status {
	case http.StatusUnauthorized:
		msg += fmt.Sprintf(" (wrong or missing credentials: --user or %s, and %s or --password-file)", envUser, envPassword)
	case http.StatusForbidden:
		if firstLine(a) == "" {
			msg += " (the credentials may not do this)"
		}
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		if firstLine(a) == "" {
			msg += fmt.Sprintf(" (is %s where tile_cache_admin is mounted?)", c.base)
		}
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		msg += " to " + a.header.Get("Location") + " (give that URL as --url)"
	}
	if ra := a.header.Get("Retry-After"); ra != "" && code == ExitUnavailable {
		msg += " (retry after " + ra + " s)"
	}
	return fail(code, "%s", msg)
}

// firstLine is the server's message: the first line of a text/plain body
// (the REST interface's errors are one line), nothing for HTML pages.
func firstLine(a answer) string {
	mt, _, _ := mime.ParseMediaType(a.header.Get("Content-Type"))
	if mt != "" && mt != "text/plain" {
		return ""
	}
	s := strings.TrimSpace(string(a.body))
	s, _, _ = strings.Cut(s, "\n")
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// connOptions are the flags and environment every subcommand shares.
type connOptions struct {
	url          string
	urlFromFlag  bool
	user         string
	passwordFile string
	caCerts      []string
	timeout      time.Duration
	// readPassword asks for the password on a terminal; nil when stdin is not one.
	readPassword func() (string, error)
}

// The environment variables the subcommands read.
const (
	envURL          = "TILECACHE_URL"
	envUser         = "TILECACHE_USER"
	envPassword     = "TILECACHE_PASSWORD"
	envPasswordFile = "TILECACHE_PASSWORD_FILE"
	envCACert       = "TILECACHE_CA_CERT"
)

// password is the password of user: --password-file, else
// TILECACHE_PASSWORD, else asked for on the terminal.
func (o *connOptions) password() (string, error) {
	if o.passwordFile != "" {
		b, err := os.ReadFile(o.passwordFile)
		if err != nil {
			return "", usage("--password-file: %v", err)
		}
		// The first line: files written with echo end in a newline.
		p, _, _ := strings.Cut(string(b), "\n")
		p = strings.TrimSuffix(p, "\r")
		if strings.TrimSpace(p) == "" {
			// An empty file, or a blank first line, is a mistake far more
			// often than a password of spaces: sent, it would only come
			// back as a 401 that blames the credentials, not the file.
			return "", usage("--password-file %s: the first line, the password, is blank", o.passwordFile)
		}
		return p, nil
	}
	if p, ok := os.LookupEnv(envPassword); ok {
		return p, nil
	}
	if o.readPassword != nil {
		return o.readPassword()
	}
	return "", usage("no password for user %q: set %s or use --password-file", o.user, envPassword)
}
