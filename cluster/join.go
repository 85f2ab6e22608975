package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
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
	"tally/vocab"
)

// identity is what a node's data directory says it is: written once, when
// the node bootstraps or joins.
type identity struct {
	ClusterID string           `json:"cluster_id"`
	NodeID    uint64           `json:"node_id"`
	Groups    int              `json:"groups"`
	Members   []replica.Member `json:"members,omitempty"` // as the join answer gave them
	// Bootstrapped marks the node that made the cluster: it gives the
	// cluster its first admin token.
	Bootstrapped bool `json:"bootstrapped,omitempty"`
}

const identityName = "cluster.json"

// establish reads the data directory's identity, or makes one by
// bootstrapping or joining. fresh says it was just made.
func establish(ctx context.Context, cfg Config) (identity, bool, error) {
	path := filepath.Join(cfg.Data, identityName)
	b, err := os.ReadFile(path)
	if err == nil {
		var id identity
		if err := json.Unmarshal(b, &id); err != nil {
			return identity{}, false, fmt.Errorf("%s: %w", path, err)
		}
		if id.NodeID != cfg.NodeID {
			return identity{}, false, fmt.Errorf("node-id: %d, but %s belongs to node %d of cluster %s: a node is never restarted on another's data", cfg.NodeID, cfg.Data, id.NodeID, id.ClusterID)
		}
		return id, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return identity{}, false, err
	}
	var id identity
	switch {
	case cfg.Bootstrap:
		var r [16]byte
		if _, err := rand.Read(r[:]); err != nil {
			return identity{}, false, err
		}
		id = identity{ClusterID: hex.EncodeToString(r[:]), NodeID: cfg.NodeID, Groups: cfg.Groups, Bootstrapped: true}
	case cfg.Join != "":
		if id, err = join(ctx, cfg); err != nil {
			return identity{}, false, err
		}
	default:
		return identity{}, false, fmt.Errorf("%s holds no node: start the first node with --bootstrap and the others with --join ADDR", cfg.Data)
	}
	enc, _ := json.MarshalIndent(id, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(enc, '\n'), 0o644); err != nil {
		return identity{}, false, err
	}
	if err := os.Rename(tmp, path); err != nil {
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
	MAC    string         `json:"mac"`
}

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
	me := replica.Member{ID: cfg.NodeID, RaftAddr: cfg.RaftAddr, Addr: cfg.Addr, Zone: cfg.Zone}
	body, _ := json.Marshal(joinRequest{Member: me, MAC: mac(cfg.Secret, "join", me)})
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for attempt := 0; ; attempt++ {
		id, retry, err := joinOnce(ctx, cfg, body)
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

func joinOnce(ctx context.Context, cfg Config, body []byte) (identity, bool, error) {
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
		return identity{}, false, fmt.Errorf("join %s refused (%d): %s", cfg.Join, resp.StatusCode, bytes.TrimSpace(b))
	}
	var a joinAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return identity{}, false, fmt.Errorf("join %s: answer: %w", cfg.Join, err)
	}
	if !hmac.Equal([]byte(a.MAC), []byte(mac(cfg.Secret, "joined", a.ClusterID, a.Groups, a.Members))) {
		return identity{}, false, fmt.Errorf("join %s: the answer is not signed with this join secret", cfg.Join)
	}
	return identity{ClusterID: a.ClusterID, NodeID: cfg.NodeID, Groups: a.Groups, Members: a.Members}, false, nil
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
	me := replica.Member{ID: c.cfg.NodeID, RaftAddr: c.cfg.RaftAddr, Addr: c.cfg.Addr, Zone: c.cfg.Zone}
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

// handleJoin adds the posting node to the membership (its groups follow,
// by the reconciler of each group's leader) and answers with the cluster.
func (c *Node) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, "BadJoin", "join: "+err.Error())
		return
	}
	if !hmac.Equal([]byte(req.MAC), []byte(mac(c.cfg.Secret, "join", req.Member))) {
		writeErr(w, http.StatusForbidden, "WrongJoinSecret", "join: the request is not signed with this cluster's join secret")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.addMember(ctx, req.Member); err != nil {
		var u *Unavailable
		if errors.As(err, &u) || errors.Is(err, context.DeadlineExceeded) {
			writeErr(w, http.StatusServiceUnavailable, "Unavailable", "join: "+err.Error())
			return
		}
		code := "JoinRefused"
		if r, ok := vocab.As(err); ok {
			code = string(r.Code)
		}
		writeErr(w, http.StatusConflict, code, "join: "+err.Error())
		return
	}
	members := c.sm.Members()
	a := joinAnswer{ClusterID: c.id.ClusterID, Groups: c.cfg.Groups, Members: members}
	a.MAC = mac(c.cfg.Secret, "joined", a.ClusterID, a.Groups, a.Members)
	writeJSON(w, http.StatusOK, a)
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
