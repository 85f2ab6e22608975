package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"tally/api"
	"tally/auth"
	"tally/backup"
	"tally/refuse"
	"tally/service"
)

// CodeNotInCluster refuses a route a cluster node does not serve (its
// route says notInCluster).
const CodeNotInCluster = "NotInCluster"

// uploadBound is a Service that bounds the bytes of one write (a cluster
// node's, whose bytes are replicated): its byte routes take that bound, so
// a body declared past it is refused before a byte is staged.
type uploadBound interface {
	MaxUploadBytes() int64
}

// ClusterNode is a cluster node's own operations (cluster.Node), which
// the route table mounts under /v1/cluster/ (clusterRoutes). Each reads
// its request document, if it takes one, through decode (the strict
// decoder over the checked body: api.Decode) and answers a document,
// written as JSON, or a refusal (rest.Refuse maps it).
type ClusterNode interface {
	OpStatus(ctx context.Context, decode func(any) error) (any, error)
	OpMembers(ctx context.Context, decode func(any) error) (any, error)
	OpHealth(ctx context.Context, decode func(any) error) (any, error)
	OpIdentity(ctx context.Context, decode func(any) error) (any, error)
	OpJoin(ctx context.Context, decode func(any) error) (any, error)
	OpAddNode(ctx context.Context, decode func(any) error) (any, error)
	OpRemoveNode(ctx context.Context, decode func(any) error) (any, error)
	OpTransferLeader(ctx context.Context, decode func(any) error) (any, error)
	OpPlace(ctx context.Context, decode func(any) error) (any, error)
	OpPlacements(ctx context.Context, decode func(any) error) (any, error)
	OpConfigure(ctx context.Context, decode func(any) error) (any, error)
	OpMarkDead(ctx context.Context, decode func(any) error) (any, error)
	OpDrain(ctx context.Context, decode func(any) error) (any, error)
	OpConstrain(ctx context.Context, decode func(any) error) (any, error)
	// Forward is the HTTP address of a node holding tenant/session's
	// group, when this node does not (forward.go).
	Forward(tenant, session string) (addr string, ok bool)
	// OpBackup writes a backup of the cluster to w: an error before its
	// first byte is answered as a refusal, one after it in
	// backup.ErrorTrailer.
	OpBackup(ctx context.Context, decode func(any) error, w io.Writer) error
}

// custodyConfigurer is a cluster node whose custody policy an operator
// sets (cluster.Node.OpCustody).
type custodyConfigurer interface {
	OpCustody(ctx context.Context, decode func(any) error) (any, error)
}

// ClusterMover is a cluster node that moves sessions between its groups
// (cluster.Node): the operator's move and moves, and the nodes' own
// stage, command and fetch, each signed with the join secret.
type ClusterMover interface {
	OpMove(ctx context.Context, decode func(any) error) (any, error)
	OpMoves(ctx context.Context, decode func(any) error) (any, error)
	OpMoveStage(ctx context.Context, decode func(any) error) (any, error)
	OpMoveCommand(ctx context.Context, decode func(any) error) (any, error)
	OpMoveFetch(ctx context.Context, decode func(any) error, w io.Writer) error
}

// ClusterGrower is a cluster node that adds data groups and spreads
// sessions over them (cluster.Node): the operator's groups add, and the
// nodes' own listing of a group's largest sessions, signed with the join
// secret.
type ClusterGrower interface {
	OpGroupsAdd(ctx context.Context, decode func(any) error) (any, error)
	OpGroupSessions(ctx context.Context, decode func(any) error) (any, error)
}

// contentServer is a ClusterNode that serves its copies of content to the
// other nodes (cluster.Node): OpContent writes the node's verified copy of
// the content a signed request names to w, after telling setSize its
// size, for another node fetching bytes that travel beside the raft log.
// An error before the first byte is answered as a refusal; one after it
// cuts the stream.
type contentServer interface {
	OpContent(ctx context.Context, decode func(any) error, setSize func(int64), w io.Writer) error
}

// clusterRequestMax bounds the body of a join and of an operator's signed
// request (cluster.RequestMax): a member record, a few fields and the
// envelope.
const clusterRequestMax = 64 << 10

// clusterRequest is the schema of the cluster routes' bodies.
const clusterRequest = "ClusterRequest"

// clusterRoutes are a cluster node's own routes. They are public: the
// status is its operator's (operatorOnly), health and identity anyone's,
// and the join and the operator's requests are signed with the join
// secret, which the node checks.
func (s *Server) clusterRoutes(n ClusterNode) []route {
	const p = "/v1/cluster/"
	op := func(run func(context.Context, func(any) error) (any, error)) endpoint {
		return func(r *http.Request) (int, any, error) {
			doc, err := run(r.Context(), decodeBody(r))
			if err != nil {
				return 0, nil, err
			}
			b, err := json.Marshal(doc)
			if err != nil {
				return 0, nil, fmt.Errorf("cluster: encode answer: %w", err)
			}
			return http.StatusOK, append(b, '\n'), nil
		}
	}
	signed := func(name, path, summary string, run func(context.Context, func(any) error) (any, error)) route {
		return route{name: name, method: "POST", pattern: p + path, summary: summary, body: clusterRequest, write: true, bodyMax: clusterRequestMax, public: true, serve: op(run)}
	}
	routes := []route{
		{name: "cluster.status", method: "GET", pattern: p + "status", summary: "The node and the cluster as it sees them (its operator's: tenant \"*\", role admin)", public: true, serve: s.operatorOnlyEndpoint(op(n.OpStatus))},
		{name: "cluster.members", method: "GET", pattern: p + "members", summary: "The members' liveness as the node sees them: state, incarnation, health score, predicted round trip, grants (its operator's)", public: true, serve: s.operatorOnlyEndpoint(op(n.OpMembers))},
		{name: "cluster.health", method: "GET", pattern: p + "health", summary: "200 when the node serves and reaches a quorum in every group; else 503 NodeFailed or NoQuorum", public: true, serve: op(n.OpHealth)},
		{name: "cluster.identity", method: "GET", pattern: p + "identity", summary: "The cluster and node a signed request is signed for", public: true, serve: op(n.OpIdentity)},
		signed("cluster.join", "join", "A node joins, signed with the join secret", n.OpJoin),
		signed("cluster.add_node", "add-node", "Record a node before it starts (signed)", n.OpAddNode),
		signed("cluster.remove_node", "remove-node", "Remove a node from the membership and every group (signed)", n.OpRemoveNode),
		signed("cluster.transfer_leader", "transfer-leader", "Hand a group's leadership to a voter, at its leader (signed)", n.OpTransferLeader),
		signed("cluster.place", "place", "Place a session in a data group (signed)", n.OpPlace),
		signed("cluster.placements", "placements", "The directory's placements (signed)", n.OpPlacements),
		signed("cluster.configure", "configure", "Set the replication factor: each data group's voters (signed)", n.OpConfigure),
		signed("cluster.mark_dead", "mark-dead", "Commit a node dead: its replicas are replaced on live nodes (signed)", n.OpMarkDead),
		signed("cluster.drain", "drain", "Move every replica off a node, before remove-node (signed)", n.OpDrain),
		signed("cluster.constrain", "constrain", "Keep a tenant's or a session's voters in some regions or zones (signed)", n.OpConstrain),
		{name: "cluster.backup", method: "POST", pattern: p + "backup", summary: "A backup of every session of the cluster (signed; application/vnd.tally.backup)", body: clusterRequest, write: true, bodyMax: clusterRequestMax, public: true, stream: s.clusterBackup(n)},
	}
	if mv, ok := n.(ClusterMover); ok {
		routes = append(routes,
			signed("cluster.move", "move", "Move a session to another data group, or abort its move (signed)", mv.OpMove),
			signed("cluster.moves", "moves", "The moves in progress and the recent ones (signed)", mv.OpMoves),
			signed("cluster.move_stage", "move-stage", "A node stages a moving session's log from the source group (signed, between nodes)", mv.OpMoveStage),
			signed("cluster.move_command", "move-command", "A node proposes a move's command in a group it holds (signed, between nodes)", mv.OpMoveCommand),
			route{name: "cluster.move_fetch", method: "POST", pattern: p + "move-fetch", summary: "Bytes of a session's log as this node holds them (signed, between nodes)", body: clusterRequest, write: true, bodyMax: clusterRequestMax, public: true, stream: s.clusterMoveFetch(mv)},
		)
	}
	if cp, ok := n.(custodyConfigurer); ok {
		routes = append(routes, signed("cluster.custody", "custody", "Set the custody policy: how many of a group's voters hold an artifact's bytes before a check begins, all or majority (signed)", cp.OpCustody))
	}
	if gr, ok := n.(ClusterGrower); ok {
		routes = append(routes,
			signed("cluster.groups_add", "groups-add", "Add data groups, each on the replication factor's worth of the least loaded members (signed)", gr.OpGroupsAdd),
			signed("cluster.group_sessions", "group-sessions", "A data group's largest sessions and their bytes (signed, between nodes)", gr.OpGroupSessions),
		)
	}
	if cs, ok := n.(contentServer); ok {
		routes = append(routes, route{name: "cluster.content", method: "POST", pattern: p + "content", summary: "A node's verified copy of content, fetched by another node of the cluster (signed; application/octet-stream)", body: clusterRequest, bodyMax: clusterRequestMax, public: true, stream: s.clusterContent(cs)})
	}
	return routes
}

// clusterMoveFetch streams part of a session's log: a refusal before the
// first byte is answered as one; a failure after it cuts the stream,
// which the fetching node finds short.
func (s *Server) clusterMoveFetch(n ClusterMover) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		bw := &streamWriter{w: w, mediaType: "application/octet-stream"}
		if err := n.OpMoveFetch(r.Context(), decodeBody(r), bw); err != nil && !bw.sent {
			s.writeError(w, err)
		}
	}
}

// streamWriter declares a stream's media type before its first byte.
type streamWriter struct {
	w         http.ResponseWriter
	mediaType string
	sent      bool
}

func (b *streamWriter) Write(p []byte) (int, error) {
	if !b.sent && len(p) > 0 {
		b.sent = true
		b.w.Header().Set("Content-Type", b.mediaType)
		b.w.WriteHeader(http.StatusOK)
	}
	return b.w.Write(p)
}

// decodeBody is a route's strict decoder over its checked body.
func decodeBody(r *http.Request) func(any) error {
	return func(doc any) error {
		body, err := readBody(r)
		if err != nil {
			return err
		}
		return api.Decode("body", body, doc)
	}
}

// clusterBackup streams the node's backup: its media type and trailer are
// declared at the first byte; a failure before it is answered as a
// refusal, one after it in the trailer (the file then does not verify).
func (s *Server) clusterBackup(n ClusterNode) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		bw := &backupWriter{w: w}
		err := n.OpBackup(r.Context(), decodeBody(r), bw)
		switch {
		case err == nil:
		case !bw.sent:
			s.writeError(w, err)
		default:
			w.Header().Set(backup.ErrorTrailer, err.Error())
		}
	}
}

// clusterContent streams a node's copy of content to another node: its
// length and media type are declared at the first byte; a failure before
// it is answered as a refusal, one after it cuts the stream short (the
// fetching node's check of the digest and size discards what it got).
func (s *Server) clusterContent(n contentServer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cw := &contentWriter{w: w, size: -1}
		err := n.OpContent(r.Context(), decodeBody(r), func(size int64) { cw.size = size }, cw)
		switch {
		case err == nil:
			if !cw.sent {
				cw.start() // empty content
			}
		case !cw.sent:
			s.writeError(w, err)
		default:
			s.cfg.Logger.Warn("cluster: a copy's stream was cut", "err", err)
			panic(http.ErrAbortHandler) // the fetcher sees the stream cut, not an end
		}
	}
}

// contentWriter declares a copy's length and media type before its first
// byte.
type contentWriter struct {
	w    http.ResponseWriter
	size int64
	sent bool
}

func (c *contentWriter) start() {
	c.sent = true
	c.w.Header().Set("Content-Type", "application/octet-stream")
	if c.size >= 0 {
		c.w.Header().Set("Content-Length", strconv.FormatInt(c.size, 10))
	}
	c.w.WriteHeader(http.StatusOK)
}

func (c *contentWriter) Write(p []byte) (int, error) {
	if !c.sent && len(p) > 0 {
		c.start()
	}
	return c.w.Write(p)
}

// backupWriter declares a backup's media type and trailer before its
// first byte.
type backupWriter struct {
	w    http.ResponseWriter
	sent bool
}

func (b *backupWriter) Write(p []byte) (int, error) {
	if !b.sent && len(p) > 0 {
		b.sent = true
		b.w.Header().Set("Content-Type", backup.MediaType)
		b.w.Header().Set("Trailer", backup.ErrorTrailer)
		b.w.WriteHeader(http.StatusOK)
	}
	return b.w.Write(p)
}

// NewCluster is the server of a cluster node: cfg.Root is the node's
// replica ledger directory, svc the node's Service, and node's own
// operations are served under /v1/cluster/ (clusterRoutes). A route that
// says notInCluster answers 501 NotInCluster.
func NewCluster(cfg Config, svc service.Service, node ClusterNode) (*Server, error) {
	cfg.WatchEvery = 0 // a group's timekeeper runs on its leader, through the Service
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	s.local, s.replicated = svc, true
	s.routes = append(s.routes, s.clusterRoutes(node)...)
	s.mux = http.NewServeMux()
	for _, r := range s.routes {
		if r.name == "metrics" {
			r.handle, r.stream = s.operatorOnly(r.stream).ServeHTTP, nil
		}
		if r.notInCluster {
			name := r.name
			r.handle = func(w http.ResponseWriter, _ *http.Request) {
				writeDoc(w, http.StatusNotImplemented, api.Error(fmt.Sprintf("%s is not served by a cluster node", name), CodeNotInCluster))
			}
		}
		h := s.instrument(r)
		if strings.HasPrefix(r.pattern, sessionPath) {
			h = s.forwarding(node, h)
		}
		s.mux.Handle(r.method+" "+r.pattern, h)
	}
	mux := s.mux
	s.mux = http.NewServeMux()
	s.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.ReplicatedHeader, "true")
		mux.ServeHTTP(w, r)
	}))
	return s, nil
}

// operatorOnlyEndpoint is operatorOnly for a REST endpoint.
func (s *Server) operatorOnlyEndpoint(next endpoint) endpoint {
	return func(r *http.Request) (int, any, error) {
		if err := s.checkOperator(r); err != nil {
			return 0, nil, err
		}
		return next(r)
	}
}

// operatorOnly serves next, a read of the whole cluster (its status, its
// metrics), only to the cluster's operator: a token that administers
// every tenant's tokens (tenant "*", role admin: the first admin token, or
// one made like it). Without tokens (--insecure-dev) it serves anyone.
func (s *Server) operatorOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkOperator(r); err != nil {
			s.writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkOperator refuses a request not made by the cluster's operator.
func (s *Server) checkOperator(r *http.Request) error {
	if s.cfg.Insecure {
		return nil
	}
	p, err := s.authenticate(r)
	if err != nil {
		return err
	}
	if !(auth.Token{Tenant: p.tenant, Role: p.role}).Administers(auth.AllTenants) {
		return refuse.Forbiddenf("token", "a cluster's status and metrics are served to an admin of every tenant (tenant \"*\", role admin) only")
	}
	return nil
}
