package server

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"tally/rest"
	"tally/service"
)

// ForwardedHeader marks a request a cluster node forwarded to the node
// that holds its session's group: the receiving node serves it itself,
// whatever it knows, so a request is forwarded at most once.
const ForwardedHeader = "Tally-Forwarded"

// forwarding serves a session's route on a cluster node: a request about a
// session whose group this node does not hold (placed on other members) is
// passed, headers and body as they came, to a node that holds it, so that
// every binding (REST, A2A, MCP's clients, the console, curl) reaches every
// session through any node. The caller's token is the cluster's, valid at
// every node.
func (s *Server) forwarding(n ClusterNode, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(ForwardedHeader) != "" {
			next.ServeHTTP(w, r)
			return
		}
		addr, ok := n.Forward(r.PathValue("tenant"), r.PathValue("session"))
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		target := &url.URL{Scheme: "http", Host: strings.TrimPrefix(addr, "http://")}
		p := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.Out.Host = target.Host
				pr.Out.Header.Set(ForwardedHeader, "1")
			},
			FlushInterval: -1, // an event stream passes each event at once
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				s.cfg.Logger.Warn("forward to the session's group", "to", addr, "path", r.URL.Path, "err", err)
				code, msg := service.CodeUnavailable, fmt.Sprintf("the node holding this session's group (%s) did not answer: %v; nothing was proposed here", addr, err)
				if r.Method != http.MethodGet && r.Method != http.MethodHead {
					// The write may have reached it before the answer was lost.
					code = service.CodeUnknownOutcome
					msg = fmt.Sprintf("the node holding this session's group (%s) did not answer (%v): the write may have committed there; retry it with the same request id", addr, err)
				}
				rest.WriteRefusal(w, rest.NewRetryable(code, msg))
			},
		}
		p.ServeHTTP(w, r)
	})
}
