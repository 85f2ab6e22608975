package cluster

// Signed operator requests. An operator's request (add-node, remove-node,
// transfer-leader, place, placements, backup) is signed with the join
// secret over its fields and an envelope: the cluster and the node it is
// addressed to, a one-time nonce and the instant it was signed. A node
// takes one only if it is signed for its cluster and for itself, within
// SignatureMax of its clock, under a nonce it has not seen: it remembers
// each nonce until the signature expires, so a request seen on the wire
// cannot be played again at that node; one played at another node names
// the wrong node; one played at another cluster sharing the secret names
// the wrong cluster. A request that changes the cluster records its nonce
// in the meta group too (replica.OpNonceUse) before it acts, so it is
// taken once in the whole cluster, whichever node a replay reaches.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/refuse"
	"tally/rest"
)

// IdentityPath answers which cluster and node this is (Target), without a
// token: what an operator's request is signed for.
const IdentityPath = "/v1/cluster/identity"

// Target is the node a signed request is addressed to: its cluster and its
// id, as IdentityPath answers them.
type Target struct {
	ClusterID string `json:"cluster_id"`
	NodeID    uint64 `json:"node_id"`
}

// Signed is the envelope every operator request carries beside its
// fields. All of it is signed.
type Signed struct {
	ClusterID string `json:"cluster_id"`
	NodeID    uint64 `json:"node_id"`
	Nonce     string `json:"nonce"`
	At        string `json:"at"` // when it was signed (RFC 3339)
	MAC       string `json:"mac"`
}

// signedRequest is an operator's request: what it is for, its envelope and
// the fields its signature covers beside the envelope.
type signedRequest interface {
	envelope() (what string, s *Signed, fields []any)
}

// sign fills r's envelope for the node to, signed with secret at at.
// Sign signs an operator's request r for the node to with the join secret,
// now.
func Sign[R any, P interface {
	*R
	signedRequest
}](secret string, to Target, r R) R {
	sign(secret, to, time.Now(), P(&r))
	return r
}

func sign(secret string, to Target, at time.Time, r signedRequest) {
	what, s, fields := r.envelope()
	s.ClusterID, s.NodeID, s.Nonce, s.At = to.ClusterID, to.NodeID, newNonce(), at.UTC().Format(time.RFC3339Nano)
	s.MAC = s.sum(secret, what, fields)
}

// sum is the MAC the join secret gives the request.
func (s *Signed) sum(secret, what string, fields []any) string {
	return mac(secret, what, append(fields, s.ClusterID, s.NodeID, s.Nonce, s.At)...)
}

// newNonce is a fresh one-time nonce: 16 random bytes, in hex.
func newNonce() string {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		panic("cluster: no randomness: " + err.Error())
	}
	return hex.EncodeToString(n[:])
}

// SignatureMax is how far from a node's clock an operator's request may
// have been signed; its nonce is remembered for as long.
const SignatureMax = 5 * time.Minute

// Refusal codes of signed requests (HTTP 403).
const (
	// CodeStaleRequest: signed too far from the node's clock.
	CodeStaleRequest = "StaleRequest"
	// CodeWrongNode: addressed to another node of the cluster.
	CodeWrongNode = "WrongNode"
	// CodeReplayed: its nonce was used already, here or (for a request
	// that changes the cluster) at any node.
	CodeReplayed = string(replica.CodeReplayed)
	// codeWrongSecret: not signed with this cluster's join secret.
	codeWrongSecret = "WrongJoinSecret"
)

// nonceMax bounds the nonces a node remembers at once; nonceLen bounds a
// nonce's length.
const (
	nonceMax    = 1 << 14
	nonceLenMin = 16
	nonceLenMax = 128
)

// nonces are the nonces of the signed requests this node took, each until
// the instant (by this node's clock) after which its signature is stale
// here anyway.
type nonces struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// use records nonce until until, and reports whether it is new; full says
// nonceMax are remembered and none has expired.
func (n *nonces) use(nonce string, until, now time.Time) (fresh, full bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen == nil {
		n.seen = map[string]time.Time{}
	}
	if _, ok := n.seen[nonce]; ok {
		return false, false
	}
	if len(n.seen) >= nonceMax {
		for k, t := range n.seen {
			if t.Before(now) {
				delete(n.seen, k)
			}
		}
		if len(n.seen) >= nonceMax {
			return false, true
		}
	}
	n.seen[nonce] = until
	return true, false
}

// Decode reads an operation's request document into doc: the server's
// strict decoder over the request's checked body (its media type and
// bound), which refuses a member the document does not have by name.
type Decode = func(doc any) error

// RequestMax bounds the body of a join and of an operator's signed
// request: a member record, a few fields and the envelope.
const RequestMax = 64 << 10

// decodeSigned reads an operator's request and checks its signature, its
// instant against the node's clock, its cluster, its node and its nonce
// (recorded here), returning the refusal when one fails.
func (c *Node) decodeSigned(decode Decode, req signedRequest) error {
	if err := decode(req); err != nil {
		return err
	}
	what, s, fields := req.envelope()
	if !hmac.Equal([]byte(s.MAC), []byte(s.sum(c.cfg.Secret, what, fields))) {
		return rest.NewRefusal(http.StatusForbidden, codeWrongSecret, what+": the request is not signed with this cluster's join secret")
	}
	now := time.Now()
	if err := fresh(what, s.At, now); err != nil {
		return refusal(err)
	}
	switch {
	case s.ClusterID != c.id.ClusterID:
		return rest.NewRefusal(http.StatusForbidden, CodeWrongCluster, fmt.Sprintf("%s: cluster_id: signed for cluster %q; this is cluster %s", what, s.ClusterID, c.id.ClusterID))
	case s.NodeID != c.cfg.NodeID:
		return rest.NewRefusal(http.StatusForbidden, CodeWrongNode, fmt.Sprintf("%s: node_id: addressed to node %d; this is node %d: a signed request is taken only by the node it names", what, s.NodeID, c.cfg.NodeID))
	case len(s.Nonce) < nonceLenMin || len(s.Nonce) > nonceLenMax:
		return rest.NewRefusal(http.StatusBadRequest, "invalid", fmt.Sprintf("%s: nonce: must be %d to %d characters, used once", what, nonceLenMin, nonceLenMax))
	}
	at, _ := time.Parse(time.RFC3339Nano, s.At) // fresh parsed it
	switch ok, full := c.nonces.use(s.Nonce, at.Add(SignatureMax), now); {
	case full:
		return rest.NewRefusal(http.StatusTooManyRequests, string(replica.CodeTooManySigned), fmt.Sprintf("%s: this node remembers %d signed requests, the most it holds: retry once some have expired (within minutes)", what, nonceMax))
	case !ok:
		return rest.NewRefusal(http.StatusForbidden, CodeReplayed, fmt.Sprintf("%s: nonce: %s was used already at this node: a signed request is good once (sign a new one)", what, s.Nonce))
	}
	return nil
}

// spendNonce records a request's nonce in the meta group, which refuses
// one recorded already (replica.CodeReplayed) whichever node took it: a
// request that changes the cluster does so before it acts. The meta group
// forgets it once no node's clock within SignatureMax of the proposer's
// can take its signature any more.
func (c *Node) spendNonce(ctx context.Context, s *Signed) error {
	at, err := time.Parse(time.RFC3339Nano, s.At)
	if err != nil {
		return refuse.Invalidf("at", "must be the RFC 3339 instant the request was signed at")
	}
	use := &replica.NonceEntry{Nonce: s.Nonce, Expires: at.Add(2 * SignatureMax).UnixNano(), By: newNonce()}
	for attempt := 0; ; attempt++ {
		data, err := json.Marshal(replica.MetaCommand{Op: replica.OpNonceUse, Nonce: use, TS: time.Now().UnixNano()})
		if err != nil {
			return err
		}
		out, err := c.propose(ctx, node.MetaGroup, data)
		var u *Unavailable
		if !errors.As(err, &u) || attempt == spendAttempts-1 {
			if err != nil {
				return err
			}
			return out.Err
		}
		// The meta group's leader changed, or none is known yet: propose
		// again under the same token, which a committed first attempt
		// answers as itself.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
}

// spendAttempts bounds the proposals of one nonce.use.
const spendAttempts = 5

// staleRequest is a signed request's instant too far from the clock.
type staleRequest struct{ msg string }

func (e staleRequest) Error() string { return e.msg }

// fresh checks a signed instant against now.
func fresh(what, at string, now time.Time) error {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return refuse.Invalidf("at", "must be the RFC 3339 instant the request was signed at")
	}
	if d := now.Sub(t).Abs(); d > SignatureMax {
		return staleRequest{fmt.Sprintf("%s: at: signed %s, %v from this node's clock; a signed %s request is good for %v", what, at, d.Round(time.Second), what, SignatureMax)}
	}
	return nil
}

func signedNow() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// Identity is which cluster and node this is, as IdentityPath answers.
type Identity struct {
	SchemaVersion int `json:"schema_version"`
	Target
}

// OpIdentity answers which cluster and node this is.
func (c *Node) OpIdentity(context.Context, Decode) (any, error) {
	return Identity{1, Target{ClusterID: c.id.ClusterID, NodeID: c.cfg.NodeID}}, nil
}

// ReadTarget asks the node at base (its HTTP URL) which cluster and node
// it is, for a request signed for it.
func ReadTarget(ctx context.Context, base string) (Target, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+IdentityPath, nil)
	if err != nil {
		return Target{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Target{}, fmt.Errorf("%s: %w", IdentityPath, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var t Target
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &t) != nil || t.ClusterID == "" || t.NodeID == 0 {
		return Target{}, fmt.Errorf("%s is not a cluster node of this release (it answers %s to %s)", base, resp.Status, IdentityPath)
	}
	return t, nil
}
