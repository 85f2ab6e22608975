package timekeeper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Lapse targets. A raise names where its lapses go, so without a bound any
// raiser could make the server POST to any address it can reach: its own
// loopback services, a cloud metadata endpoint, the private network. Hosts
// is the allow-list of lapse targets:
//
//   - empty (the default): any host, but never a loopback, link-local,
//     private-range, unspecified or multicast address, judged on the
//     addresses the name resolves to when a delivery connects (so a name
//     that later resolves to 127.0.0.1 is refused too);
//   - not empty: only the hosts it lists, whatever they resolve to. An
//     entry is a host ("agent.example.org", "10.0.0.7", "::1") matching
//     any port, host:port ("127.0.0.1:8080", "[::1]:8080") matching that
//     port only, or "*.example.org" (with or without a port) matching every
//     name under example.org but not example.org itself.
//
// A listed host is the only way to reach a private address: tests on
// 127.0.0.1 list it. Every connection a delivery makes is checked (the
// card's endpoint and redirects included), and no proxy is used.

// ErrHostNotAllowed is why a lapse target is refused.
var ErrHostNotAllowed = errors.New("host not allowed")

// HostPolicy judges lapse targets against an allow-list (see above).
type HostPolicy struct {
	entries []hostEntry
}

type hostEntry struct {
	host     string // lower case; without brackets; "*.x" for a wildcard
	port     string // "" for any port
	wildcard bool
}

// NewHostPolicy parses an allow-list; an entry that is not a host, host:port
// or *.domain pattern is an error quoting it.
func NewHostPolicy(patterns []string) (HostPolicy, error) {
	var p HostPolicy
	for _, raw := range patterns {
		s := strings.ToLower(strings.TrimSpace(raw))
		if s == "" {
			continue
		}
		e := hostEntry{host: s}
		if h, port, err := net.SplitHostPort(s); err == nil {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return HostPolicy{}, fmt.Errorf("lapse host %q: bad port", raw)
			}
			e.host, e.port = h, port
		} else if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			e.host = s[1 : len(s)-1]
		}
		if rest, ok := strings.CutPrefix(e.host, "*."); ok {
			e.host, e.wildcard = rest, true
		}
		if e.host == "" || strings.ContainsAny(e.host, "*/@ ") {
			return HostPolicy{}, fmt.Errorf("lapse host %q: want host, host:port or *.domain", raw)
		}
		p.entries = append(p.entries, e)
	}
	return p, nil
}

// Open reports whether the allow-list is empty (any public host).
func (p HostPolicy) Open() bool { return len(p.entries) == 0 }

// listed reports whether host (no brackets) and port match an entry.
func (p HostPolicy) listed(host, port string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, e := range p.entries {
		if e.port != "" && e.port != port {
			continue
		}
		if e.wildcard {
			if strings.HasSuffix(host, "."+e.host) {
				return true
			}
			continue
		}
		if host == e.host {
			return true
		}
		// 127.0.0.1 and ::ffff:127.0.0.1, or two spellings of one IPv6 address.
		if a, err := netip.ParseAddr(host); err == nil {
			if b, err := netip.ParseAddr(e.host); err == nil && a.Unmap() == b.Unmap() {
				return true
			}
		}
	}
	return false
}

// privateAddr reports an address a lapse is never sent to unless listed.
func privateAddr(a netip.Addr) bool {
	a = a.Unmap()
	return !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() ||
		cgnat.Contains(a) // 100.64.0.0/10, shared address space
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// CheckURL judges a lapse target as far as it can be judged without
// resolving names: an http(s) URL whose host is listed, or (allow-list
// empty) whose host is a name or a public address. The error wraps
// ErrHostNotAllowed when the host is refused. A name that passes may still
// be refused at delivery, on what it resolves to.
func (p HostPolicy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return errors.New("must be an http or https URL")
	}
	host, port := u.Hostname(), urlPort(u)
	if p.listed(host, port) {
		return nil
	}
	if !p.Open() {
		return ErrHostNotAllowed
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") || strings.HasSuffix(strings.ToLower(strings.TrimSuffix(host, ".")), ".localhost") {
		return ErrHostNotAllowed
	}
	if a, err := netip.ParseAddr(host); err == nil && privateAddr(a) {
		return ErrHostNotAllowed
	}
	return nil
}

func urlPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// dial connects to address (host:port as the request names it) if the
// policy allows: a listed host as it resolves; otherwise (allow-list empty)
// only to resolved addresses that are not private. It never dials a refused
// address, so a name cannot be rebound between the check and the connect.
func (p HostPolicy) dial(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if p.listed(host, port) {
		return d.DialContext(ctx, network, address)
	}
	if !p.Open() {
		return nil, fmt.Errorf("%s: %w", address, ErrHostNotAllowed)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var last error
	for _, a := range addrs {
		if privateAddr(a) {
			last = fmt.Errorf("%s resolves to %s: %w", address, a.Unmap(), ErrHostNotAllowed)
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	if last == nil {
		last = fmt.Errorf("%s: no address", address)
	}
	return nil, last
}

// Client is an HTTP client that connects only where the policy allows,
// with no proxy, following at most 3 redirects, each request bounded by
// timeout.
func (p HostPolicy) Client(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			return p.dial(ctx, d, network, address)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Transport: t, Timeout: timeout, CheckRedirect: func(_ *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return errors.New("stopped after 3 redirects")
		}
		return nil
	}}
}
