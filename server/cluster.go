package server

import (
	"fmt"
	"net/http"

	"tally/api"
	"tally/auth"
	"tally/jsondoc"
	"tally/service"
	"tally/vocab"
)

// clusterRoutes are the routes a cluster node serves: those that run
// through the Service (so a write is replicated) and those that only read
// this node's files (its replicas' logs, as the event stream does). The
// others still write a ledger directly and are refused until they too go
// through the Service.
var clusterRoutes = map[string]bool{
	"health": true, "ready": true, "work.ready": true, "metrics": true, "openapi": true, "whoami": true, "events": true,
	"promise.declare": true, "promise.list": true, "promise.show": true,
	"promise.amend": true, "promise.resolve": true, "promise.assess": true,
	"session.export": true, "session.verify": true, "verify": true, "session.import": true,
	"expect.raise": true, "expect.list": true, "expect.show": true, "expect.withdraw": true, "expect.supersede": true,
	"expect.fact": true, "expect.task.outcome": true, "expect.lapses": true, "expect.lapse": true,
	"claim.create": true, "claim.list": true, "claim.show": true, "claim.post": true, "claim.cancel": true,
	"claim.revoke": true, "claim.supersede": true, "claim.receipt": true, "claim.adopt": true, "claim.progress": true,
	"claim.testament.close": true, "claim.testament.post": true, "claim.testament.receive": true,
	"claim.deadline": true, "claim.dependency": true, "claim.check.begin": true, "claim.check.report": true,
	"claim.check.report_evidence": true, "claim.artifact.put": true, "claim.artifact.get": true,
	"claim.artifact.verify": true, "claim.artifact.receive": true, "artifact.list": true, "artifact.content": true,
	"claim.graph": true,
	// A2A: what does not run through the Service yet is refused in the
	// binding (ledgerOf), not the route.
	"a2a.card": true, "a2a.session_card": true, "a2a.session_card_bare": true,
	"token.create": true, "token.list": true, "token.revoke": true,
	// MCP: its tools call the node's Service; its resources follow this
	// replica's logs, as the event stream does.
	"mcp": true, "mcp.stream": true, "mcp.end": true,
	// The console reads this node's replica as applied, as the event
	// stream does: a node shows what it holds.
	"console": true, "console.config": true, "console.asset": true, "tenant.list": true, "session.list": true,
	"session.summary": true, "obligation.list": true, "promise.history": true, "claim.history": true,
	"a2a.jsonrpc": true, "a2a.send": true, "a2a.tasks": true, "a2a.task": true, "a2a.cancel": true,
}

// CodeNotInCluster refuses a route a cluster node does not serve yet.
const CodeNotInCluster = "NotInCluster"

// uploadBound is a Service that bounds the bytes of one write (a cluster
// node's, whose bytes are replicated): its byte routes take that bound, so
// a body declared past it is refused before a byte is staged.
type uploadBound interface {
	MaxUploadBytes() int64
}

// NewCluster is the server of a cluster node: cfg.Root is the node's
// replica ledger directory, svc the node's Service, and the routes under
// /v1/cluster/ are the node's own (status, join), served by cluster.
func NewCluster(cfg Config, svc service.Service, cluster http.Handler) (*Server, error) {
	cfg.WatchEvery = 0 // a group's timekeeper runs on its leader, through the Service
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	s.local, s.replicated = svc, true
	if ub, ok := svc.(uploadBound); ok {
		for i, r := range s.routes {
			if r.body == "Bytes" {
				s.routes[i].bodyMax = min(r.bodyMax, ub.MaxUploadBytes())
			}
		}
	}
	s.mux = http.NewServeMux()
	for _, r := range s.routes {
		if r.name == "metrics" {
			r.handle, r.stream = s.operatorOnly(r.stream).ServeHTTP, nil
		}
		if !clusterRoutes[r.name] {
			name := r.name
			r.handle = func(w http.ResponseWriter, _ *http.Request) {
				writeDoc(w, http.StatusNotImplemented, jsondoc.Error(fmt.Sprintf("%s is not served by a cluster node yet", name), CodeNotInCluster))
			}
		}
		s.mux.Handle(r.method+" "+r.pattern, s.instrument(r))
	}
	s.mux.Handle("/v1/cluster/", cluster)
	s.mux.Handle("GET "+clusterStatusPath, s.operatorOnly(cluster))
	mux := s.mux
	s.mux = http.NewServeMux()
	s.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.ReplicatedHeader, "true")
		mux.ServeHTTP(w, r)
	}))
	return s, nil
}

// clusterStatusPath is cluster.StatusPath: a node's status, which names
// every member and its addresses.
const clusterStatusPath = "/v1/cluster/status"

// operatorOnly serves next, a read of the whole cluster (its status, its
// metrics), only to the cluster's operator: a token that administers
// every tenant's tokens (tenant "*", role admin: the first admin token, or
// one made like it). Without tokens (--insecure-dev) it serves anyone.
func (s *Server) operatorOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.Insecure {
			p, err := s.authenticate(r)
			if err != nil {
				s.writeError(w, err)
				return
			}
			if !(auth.Token{Tenant: p.tenant, Role: p.role}).Administers(auth.AllTenants) {
				s.writeError(w, vocab.Forbiddenf("token", "a cluster's status and metrics are served to an admin of every tenant (tenant \"*\", role admin) only"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
