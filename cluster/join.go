package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/refuse"
	"tally/rest"
)

// identity is what a node's data directory says it is: written once, when
// the node bootstraps or joins.
type identity struct {
	ClusterID string           `json:"cluster_id"`
	NodeID    uint64           `json:"node_id"`
	Groups    int              `json:"groups"`
	Members   []replica.Member `json:"members,omitempty"` // as the join answer gave them
	// Bootstrapped marks the node that made the cluster (from a backup
	// too): it gives the cluster its first admin token.
	Bootstrapped bool `json:"bootstrapped,omitempty"`
	// Restored is the backup the cluster was restored from, on its first
	// node (tally restore).
	Restored *Restored `json:"restored,omitempty"`
	// BootstrapPending marks a bootstrap whose first start has not yet
	// given every group its initial state: a start that finds it (the
	// first one crashed) bootstraps again, which is safe since no node can
	// have joined before every group existed.
	BootstrapPending bool `json:"bootstrap_pending,omitempty"`
	// Replicas is the replication factor the bootstrap was given, which
	// the bootstrapping node records in the meta group once (firstPolicy).
	Replicas int `json:"replicas,omitempty"`
}

const identityName = "cluster.json"

// establish reads the data directory's identity, or makes one by
// bootstrapping (from a restored backup too) or joining. fresh says the
// node bootstraps or joins now: its identity was just made, or a restored
// node's first start was interrupted before every group had its state.
func establish(ctx context.Context, cfg Config) (identity, bool, error) {
	path := filepath.Join(cfg.Data, identityName)
	pr, pending, err := readPendingRestore(cfg.Data)
	if err != nil {
		return identity{}, false, err
	}
	b, err := os.ReadFile(path)
	if err == nil {
		var id identity
		if err := json.Unmarshal(b, &id); err != nil {
			return identity{}, false, fmt.Errorf("%s: %w", path, err)
		}
		if id.NodeID != cfg.NodeID {
			return identity{}, false, fmt.Errorf("node-id: %d, but %s belongs to node %d of cluster %s: a node is never restarted on another's data", cfg.NodeID, cfg.Data, id.NodeID, id.ClusterID)
		}
		if cfg.Join != "" && !pending {
			if err := checkCluster(ctx, cfg, id); err != nil {
				return identity{}, false, err
			}
		}
		return id, pending || id.BootstrapPending, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return identity{}, false, err
	}
	var id identity
	switch {
	case pending:
		if id, err = restoredIdentity(cfg, pr); err != nil {
			return identity{}, false, err
		}
		id.Bootstrapped = true
	case cfg.Bootstrap:
		cid, err := newClusterID()
		if err != nil {
			return identity{}, false, err
		}
		id = identity{ClusterID: cid, NodeID: cfg.NodeID, Groups: cfg.Groups, Bootstrapped: true, BootstrapPending: true, Replicas: cfg.Replicas}
	case cfg.Join != "":
		if id, err = join(ctx, cfg); err != nil {
			return identity{}, false, err
		}
	default:
		return identity{}, false, fmt.Errorf("%s holds no node: start the first node with --bootstrap and the others with --join ADDR", cfg.Data)
	}
	if err := writeJSONFile(path, id); err != nil {
		return identity{}, false, err
	}
	return id, true, nil
}

// The join exchange: the joiner posts its member record with a MAC under
// the join secret; the member answers with the cluster's id, its groups
// and members, with a MAC of its own, so each side knows the other holds
// the secret. The secret never crosses the wire.
type joinRequest struct {
	Member replica.Member `json:"member"`
	// ClusterID is the cluster the joiner's data already belongs to: a
	// node restarted with --join asks whether it joins its own cluster. A
	// member of another cluster (a restored incarnation, fencing the nodes
	// of the one it was restored from) refuses it.
	ClusterID string `json:"cluster_id,omitempty"`
	// At is when the request was signed (a member refuses one far from its
	// clock, so a join seen on the wire cannot re-add a removed node
	// later); Nonce is the joiner's, signed into the answer, so an answer
	// recorded elsewhere (another cluster's, with the same secret) cannot
	// be played to it.
	At    string `json:"at"`
	Nonce string `json:"nonce"`
	MAC   string `json:"mac"`
}

// newJoinRequest is a signed join request of cfg's node, now.
func newJoinRequest(cfg Config, cluster string) joinRequest {
	r := joinRequest{Member: cfg.member(), ClusterID: cluster, At: signedNow(), Nonce: newNonce()}
	r.MAC = signJoin(cfg.Secret, r)
	return r
}

// signJoin signs a join request.
func signJoin(secret string, r joinRequest) string {
	return mac(secret, "join", r.Member, r.ClusterID, r.At, r.Nonce)
}

// signJoined signs a join's answer to the request with nonce.
func signJoined(secret, nonce string, a joinAnswer) string {
	return mac(secret, "joined", nonce, a.ClusterID, a.Groups, a.Members)
}

// CodeWrongCluster refuses a node whose data belongs to another cluster.
const CodeWrongCluster = "WrongCluster"

type joinAnswer struct {
	ClusterID string           `json:"cluster_id"`
	Groups    int              `json:"groups"`
	Members   []replica.Member `json:"members"`
	MAC       string           `json:"mac"`
}

func mac(secret, role string, parts ...any) string {
	h := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(h, "tally cluster %s v1\n", role)
	for _, p := range parts {
		b, _ := json.Marshal(p)
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// JoinPath is the route a node joins through.
const JoinPath = "/v1/cluster/join"

// join asks a member to add this node and learns the cluster from it,
// retrying while the member cannot commit yet.
func join(ctx context.Context, cfg Config) (identity, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for attempt := 0; ; attempt++ {
		id, retry, err := joinOnce(ctx, cfg, newJoinRequest(cfg, ""))
		if err == nil || !retry {
			return id, err
		}
		last = err
		select {
		case <-ctx.Done():
			return identity{}, fmt.Errorf("join %s: %w (last: %v)", cfg.Join, ctx.Err(), last)
		case <-time.After(time.Duration(min(attempt+1, 10)) * 200 * time.Millisecond):
		}
	}
}

func joinOnce(ctx context.Context, cfg Config, jr joinRequest) (identity, bool, error) {
	body, _ := json.Marshal(jr)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL(cfg.Join)+JoinPath, bytes.NewReader(body))
	if err != nil {
		return identity{}, false, fmt.Errorf("join: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return identity{}, true, fmt.Errorf("join %s: %w", cfg.Join, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusServiceUnavailable {
		return identity{}, true, fmt.Errorf("join %s: %s", cfg.Join, bytes.TrimSpace(b))
	}
	if resp.StatusCode != http.StatusOK {
		var ref struct{ Code string }
		_ = json.Unmarshal(b, &ref)
		return identity{}, false, &joinRefusal{Join: cfg.Join, Status: resp.StatusCode, Code: ref.Code, Body: bytes.TrimSpace(b)}
	}
	var a joinAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return identity{}, false, fmt.Errorf("join %s: answer: %w", cfg.Join, err)
	}
	if !hmac.Equal([]byte(a.MAC), []byte(signJoined(cfg.Secret, jr.Nonce, a))) {
		return identity{}, false, fmt.Errorf("join %s: the answer is not signed with this join secret", cfg.Join)
	}
	return identity{ClusterID: a.ClusterID, NodeID: cfg.NodeID, Groups: a.Groups, Members: a.Members}, false, nil
}

// joinRefusal is a member's refusal of a join, as it answered.
type joinRefusal struct {
	Join   string
	Status int
	Code   string
	Body   []byte
}

func (e *joinRefusal) Error() string {
	return fmt.Sprintf("join %s refused (%d): %s", e.Join, e.Status, e.Body)
}

func baseURL(addr string) string {
	if bytes.Contains([]byte(addr), []byte("://")) {
		return addr
	}
	return "http://" + addr
}

// announce commits this node as the first member of the cluster it
// bootstrapped, once the meta group elects it.
func (c *Node) announce(ctx context.Context) {
	me := c.cfg.member()
	for ctx.Err() == nil {
		if _, err := c.addMember(ctx, me); err == nil {
			return
		} else {
			c.log.Debug("announce: retrying", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// addMember commits a member record in the meta group.
func (c *Node) addMember(ctx context.Context, m replica.Member) (replica.Member, error) {
	data, _ := json.Marshal(replica.MetaCommand{Op: replica.OpMemberAdd, Member: &m})
	out, err := c.propose(ctx, node.MetaGroup, data)
	if err != nil {
		return replica.Member{}, err
	}
	if out.Err != nil {
		return replica.Member{}, out.Err
	}
	return m, nil
}

// CodeBadJoin refuses a join request that is not well formed (HTTP 400).
const CodeBadJoin = "BadJoin"

// OpJoin adds the posting node to the membership (its groups follow, by
// the reconciler of each group's leader) and answers with the cluster.
func (c *Node) OpJoin(ctx context.Context, decode Decode) (any, error) {
	var req joinRequest
	if err := decode(&req); err != nil {
		if _, ok := refuse.As(err); ok {
			return nil, rest.NewRefusal(http.StatusBadRequest, CodeBadJoin, "join: "+err.Error())
		}
		return nil, err
	}
	if !hmac.Equal([]byte(req.MAC), []byte(signJoin(c.cfg.Secret, req))) {
		return nil, rest.NewRefusal(http.StatusForbidden, codeWrongSecret, "join: the request is not signed with this cluster's join secret")
	}
	now := time.Now()
	if err := fresh("join", req.At, now); err != nil {
		return nil, refusal(err)
	}
	// The nonce is one-time, as an operator request's: a join seen on the
	// wire cannot add a node again (once removed) within the signature's
	// lifetime, here or, through the meta group, at another node.
	at, _ := time.Parse(time.RFC3339Nano, req.At)
	if len(req.Nonce) < nonceLenMin || len(req.Nonce) > nonceLenMax {
		return nil, rest.NewRefusal(http.StatusBadRequest, CodeBadJoin, fmt.Sprintf("join: nonce: must be %d to %d characters, used once", nonceLenMin, nonceLenMax))
	}
	if ok, _ := c.nonces.use(req.Nonce, at.Add(SignatureMax), now); !ok {
		return nil, rest.NewRefusal(http.StatusForbidden, CodeReplayed, fmt.Sprintf("join: nonce: %s was used already at this node, or this node holds too many: a join is good once", req.Nonce))
	}
	if req.ClusterID != "" {
		// A restart asking whether it rejoins its own cluster: nothing to
		// add, and no node of another cluster is let in.
		if req.ClusterID != c.id.ClusterID {
			return nil, rest.NewRefusal(http.StatusConflict, CodeWrongCluster, fmt.Sprintf("join: node %d belongs to cluster %s; this is cluster %s%s: a node never moves between clusters (remove its data directory to join it as a new node)",
				req.Member.ID, req.ClusterID, c.id.ClusterID, c.id.restoredNote()))
		}
		return c.answerJoin(req.Nonce), nil
	}
	if err := CheckMember(req.Member, "member."); err != nil {
		return nil, rest.NewRefusal(http.StatusBadRequest, CodeBadJoin, "join: "+err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.spendNonce(ctx, &Signed{Nonce: req.Nonce, At: req.At})
	if err == nil {
		_, err = c.addMember(ctx, req.Member)
	}
	if err != nil {
		var u *Unavailable
		if errors.As(err, &u) || errors.Is(err, context.DeadlineExceeded) {
			return nil, rest.NewRetryable(CodeUnavailable, "join: "+err.Error())
		}
		code, status := "JoinRefused", http.StatusConflict
		if r, ok := refuse.As(err); ok {
			code = string(r.Code)
			if r.Code == replica.CodeReplayed {
				status = http.StatusForbidden
			}
		}
		return nil, rest.NewRefusal(status, code, "join: "+err.Error())
	}
	return c.answerJoin(req.Nonce), nil
}

func (c *Node) answerJoin(nonce string) joinAnswer {
	a := joinAnswer{ClusterID: c.id.ClusterID, Groups: c.cfg.Groups, Members: c.sm.Members()}
	a.MAC = signJoined(c.cfg.Secret, nonce, a)
	return a
}

// restoredNote says, for a refusal, that this cluster was restored from
// another one's backup.
func (id identity) restoredNote() string {
	if id.Restored == nil || id.Restored.ClusterID == "" {
		return ""
	}
	return fmt.Sprintf(", restored from a backup of cluster %s taken %s", id.Restored.ClusterID, id.Restored.Created.Format(time.RFC3339))
}

// checkCluster asks, once and briefly, the member a restarting node names
// with --join whether it is a node of the same cluster, and stops the node
// if it answers for another. Any other outcome (no answer, a member of a
// release that does not know the question, another secret) lets the node
// start as before, with a warning: a restart must not wait for the others,
// and the transport refuses another cluster's peers anyway.
func checkCluster(ctx context.Context, cfg Config, id identity) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	a, _, err := joinOnce(ctx, cfg, newJoinRequest(cfg, id.ClusterID))
	var refused *joinRefusal
	switch {
	case errors.As(err, &refused) && refused.Code == CodeWrongCluster:
		return err
	case err != nil:
		cfg.Logger.Warn("join: could not learn whether the member named by --join is of this node's cluster; starting anyway", "join", cfg.Join, "err", err)
	case a.ClusterID != id.ClusterID:
		return fmt.Errorf("join %s: it answers for cluster %s; this node belongs to cluster %s: a node never moves between clusters", cfg.Join, a.ClusterID, id.ClusterID)
	}
	return nil
}

// ReadIdentity reads the identity of the node whose data directory is
// data: its cluster and node id.
func ReadIdentity(data string) (cluster string, err error) {
	b, err := os.ReadFile(filepath.Join(data, identityName))
	if err != nil {
		return "", err
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(data, identityName), err)
	}
	return id.ClusterID, nil
}
