package serverbackend

// Redirects: credentials stay with the server the user named. The key and
// LLOYAL_HEADERS go with every request, and Go's client would send them
// on to a redirect's target (the key too, where only the port differs), so
// a redirect is followed only within the server's origin, and only one
// that keeps the request: 307 or 308 (301, 302 and 303 turn a POST into a
// GET without its body).

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// maxRedirects bounds the redirects one request follows.
const maxRedirects = 5

// redirectError is a redirect lloyal refused to follow; its message is for
// the user, who alone can name another server.
type redirectError struct{ msg string }

func (e *redirectError) Error() string { return e.msg }

// checkRedirect is the client's CheckRedirect: it runs before the
// redirected request is sent, so a refused target receives nothing.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	return checkRedirect(c.base, chatHints(), req, via)
}

// checkRedirect refuses a redirect of a request to base that would take
// its credentials elsewhere or drop its body; h names where the user
// gives the server's URL.
func checkRedirect(base *url.URL, h hints, req *http.Request, via []*http.Request) error {
	from, to := origin(base), origin(req.URL)
	if to != from {
		return &redirectError{fmt.Sprintf("the server at %s redirected to %s, another origin: lloyal does not follow it, so the credentials stay with %s; if %s is the server you mean, give it as %s", from, to, from, to, h.url)}
	}
	if r := req.Response; r != nil && r.StatusCode != http.StatusTemporaryRedirect && r.StatusCode != http.StatusPermanentRedirect {
		return &redirectError{fmt.Sprintf("the server at %s answered %s, redirecting to %s: lloyal follows only 307 and 308 redirects (which keep the request) within the server's origin; give the URL the API answers at as %s", from, r.Status, redact(req.URL), h.url)}
	}
	if len(via) >= maxRedirects {
		return &redirectError{fmt.Sprintf("the server at %s redirected %d times: give the URL the API answers at as %s", from, len(via), h.url)}
	}
	return nil
}

// SameOrigin says whether two server URLs share scheme, host and port
// (false when either does not parse).
func SameOrigin(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	return errA == nil && errB == nil && ua.Host != "" && origin(ua) == origin(ub)
}

// origin is a URL's scheme, host and port (the default port written out),
// in lower case: what must match for credentials to go.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
