package cluster

// Fetching bytes beside the log. A write's bytes are stored by the node
// that took them; its command names that node as their holder (replica
// content.go). Every other node of the group owes itself a copy: its
// custody sweep (custody.go) finds content its groups name that its store
// lacks, or holds damaged, and fetches it here, off the apply loop, from a
// node holding a verified copy over the node-to-node route ContentPath
// (signed with the join secret, as an operator's requests are). The bytes
// stream into a staging file and are named only once their whole BLAKE3
// digest and size verify (artifact.Store.PutVerified), fsynced; only then
// may the sweep commit the node's receipt. A fetch that fails, or whose
// bytes do not verify, goes on to the next holder, and the next sweep
// tries again.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"tally/artifact"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/digest"
	"tally/rest"
	"tally/service"
	"tally/store"
)

// ContentPath is the route a node fetches another's verified copy of
// content from (POST, a signed ContentRequest; the answer is the bytes).
const ContentPath = "/v1/cluster/content"

// ContentRequest asks a node for its copy of content, signed with the
// join secret for that node.
type ContentRequest struct {
	Content string `json:"content"`
	Signed
}

func (r *ContentRequest) envelope() (string, *Signed, []any) {
	return "content", &r.Signed, []any{r.Content}
}

// The bounds of fetching: the fetches a node runs at once, and the wait
// for a holder's answer to begin (the bytes then take what they take).
const (
	fetchesMax    = 2
	fetchAnswerIn = 30 * time.Second
)

// custodyState is what the custody sweep and the fetches it starts share.
type custodyState struct {
	mu sync.Mutex
	// verified are the contents whose copy here verified whole since it
	// was stored or last re-read, at the placement epoch then, so that a
	// receipt is not preceded by another read of bytes just verified.
	verified map[string]uint64
	// suspect are contents whose copy here was found damaged or missing
	// (the scrubber, a read): verified again before any receipt.
	suspect map[string]bool
	// fetching are the contents being fetched now.
	fetching map[string]bool
	wakeup   chan struct{}
}

func (s *custodyState) init() {
	if s.verified == nil {
		s.verified, s.suspect, s.fetching = map[string]uint64{}, map[string]bool{}, map[string]bool{}
		s.wakeup = make(chan struct{}, 1)
	}
}

// stored records that this node's copy of content verified whole when it
// was stored, at placement epoch epoch.
func (s *custodyState) stored(content string, epoch uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	s.verified[content] = epoch
	delete(s.suspect, content)
}

// found records that this node's copy of content did not verify.
func (s *custodyState) found(content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	delete(s.verified, content)
	s.suspect[content] = true
}

// wake asks the custody sweep to run now.
func (s *custodyState) wake() {
	s.mu.Lock()
	s.init()
	w := s.wakeup
	s.mu.Unlock()
	select {
	case w <- struct{}{}:
	default:
	}
}

func (s *custodyState) woken() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	return s.wakeup
}

// state is what the sweep needs of content: verified at epoch (ok),
// suspect, being fetched.
func (s *custodyState) state(content string) (epoch uint64, ok, suspect, fetching bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	epoch, ok = s.verified[content]
	return epoch, ok, s.suspect[content], s.fetching[content]
}

// startFetch marks content fetched, unless it is or fetchesMax are.
func (s *custodyState) startFetch(content string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	if s.fetching[content] || len(s.fetching) >= fetchesMax {
		return false
	}
	s.fetching[content] = true
	return true
}

func (s *custodyState) fetchDone(content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fetching, content)
}

// OpContent writes this node's copy of the content a signed request names
// to w, hashed as it is read: a copy that does not verify cuts the stream
// before its end, so the fetcher never takes it (its own check of the
// whole digest discards what it got), and is repaired here. A missing copy
// is refused. setSize is told the size before the first byte.
func (c *Node) OpContent(ctx context.Context, decode Decode, setSize func(int64), w io.Writer) error {
	var req ContentRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return err
	}
	d, err := digest.ParseContentDigest(req.Content)
	if err != nil {
		return rest.NewRefusal(http.StatusBadRequest, "invalid", "content: must be a content digest (64 hex digits)")
	}
	objs, err := artifact.OpenStore(store.ObjectsDir(c.sm.Root()))
	if err != nil {
		return err
	}
	// Read once, hashed as it streams: the fetcher verifies the whole
	// digest itself and discards bytes that do not match; a copy found
	// damaged here is cut short and repaired.
	rc, size, err := objs.OpenChecked(d)
	if err != nil {
		return rest.NewRetryable(codeNoCopy, fmt.Sprintf("node %d holds no copy of content %s: %v", c.cfg.NodeID, d, err))
	}
	defer rc.Close()
	setSize(size)
	_, err = io.CopyBuffer(w, artifact.WithContext(ctx, rc), make([]byte, 1<<20))
	if artifact.IsDamaged(err) {
		c.custody.found(d.String())
		c.custody.wake()
	}
	return err
}

// codeNoCopy refuses a fetch of content the node holds no verified copy of.
const codeNoCopy = "NoVerifiedCopy"

// fetch fetches content of group (size bytes; -1 when no record says)
// from the first of its holders that gives bytes that verify, and stores
// it here, durably. Holders are tried in order: those the group's records
// name, then those with a receipt, then the group's other voters.
func (c *Node) fetch(ctx context.Context, group uint64, content string, size int64, from []uint64) error {
	d, err := digest.ParseContentDigest(content)
	if err != nil {
		return err
	}
	objs, err := artifact.OpenStore(store.ObjectsDir(c.sm.Root()))
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range from {
		if h == c.cfg.NodeID {
			continue
		}
		m, ok := c.sm.Member(h)
		if !ok || m.Addr == "" {
			continue
		}
		start := time.Now()
		n, err := c.fetchFrom(ctx, objs, h, m.Addr, d, size)
		if err == nil {
			c.metrics.fetched.Add(1)
			c.metrics.fetchedBytes.Add(n)
			c.log.Info("custody: fetched a copy", "group", group, "content", content, "size", n, "from", h, "took", time.Since(start).Round(time.Millisecond).String())
			return nil
		}
		c.metrics.fetchFailed.Add(1)
		c.log.Warn("custody: a fetch failed; trying the next holder", "group", group, "content", content, "from", h, "err", err)
		errs = append(errs, fmt.Errorf("node %d: %w", h, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("content %s: no holder to fetch it from", content)
	}
	return errors.Join(errs...)
}

// fetchFrom fetches d from node id at addr into objs, verified.
func (c *Node) fetchFrom(ctx context.Context, objs *artifact.Store, id uint64, addr string, d digest.ContentDigest, size int64) (int64, error) {
	req := Sign(c.cfg.Secret, Target{ClusterID: c.id.ClusterID, NodeID: id}, ContentRequest{Content: d.String()})
	b, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+strings.TrimPrefix(addr, "http://")+ContentPath, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := fetchClient.Do(hr)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return 0, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	if size < 0 {
		size = resp.ContentLength
	}
	if size < 0 {
		return 0, errors.New("the holder did not say the size of the bytes")
	}
	if err := objs.PutVerified(ctx, resp.Body, d, size); err != nil {
		return 0, err
	}
	return size, nil
}

// fetchClient fetches copies: a holder's answer must begin within
// fetchAnswerIn; the bytes then stream for as long as they take (the
// fetch's context bounds them).
var fetchClient = &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: fetchAnswerIn, MaxIdleConnsPerHost: fetchesMax, ReadBufferSize: 256 << 10}}

// holdersOf are the nodes to fetch content of group from, in order: those
// its records name, those with a receipt (at the current epoch first), the
// group's voters, then every other member, last: a node the group no
// longer places on may keep a whole copy until it collects it, and may be
// the only one left when the group's own copies rotted (the digest is
// verified whoever sends the bytes); each once.
func (c *Node) holdersOf(group uint64, content string, named, voters []uint64) []uint64 {
	var out []uint64
	add := func(ids ...uint64) {
		for _, id := range ids {
			if id != 0 && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	add(named...)
	if rs, err := c.sm.Receipts(group, content); err == nil {
		epoch := c.sm.PlacementEpoch(group)
		var now, older []uint64
		for n, e := range rs {
			if e == epoch {
				now = append(now, n)
			} else {
				older = append(older, n)
			}
		}
		slices.Sort(now)
		slices.Sort(older)
		add(now...)
		add(older...)
	}
	add(voters...)
	for _, m := range c.sm.Members() {
		add(m.ID)
	}
	return out
}

// FoundDamaged is told by the server's scrubber of a copy here that is
// damaged or missing: it is never served (every read verifies), and the
// custody sweep withdraws this node's receipt for it and repairs it from
// a holder.
func (c *Node) FoundDamaged(ch artifact.Checked) {
	c.custody.found(ch.Content.String())
	c.custody.wake()
}

// CollectArtifacts removes from this node's content store the bytes no
// committed record of its groups names (a refused publication's, an
// upload cut off), once they were last put more than grace ago: decided
// by the groups' logs as applied here (the sessions' records and the
// groups' content records), under the store's collection lock, which a
// write holds from storing its bytes until its command is decided.
func (c *Node) CollectArtifacts(ctx context.Context, grace time.Duration) (artifact.Collected, error) {
	objs, err := artifact.OpenStore(store.ObjectsDir(c.sm.Root()))
	if err != nil {
		return artifact.Collected{}, err
	}
	refd, ok := c.sm.Service().(interface {
		ReferencedContent(ctx context.Context) (map[digest.ContentDigest]bool, error)
	})
	if !ok {
		return artifact.Collected{}, errors.New("cluster: the replica's Service cannot list the content its records name")
	}
	return objs.Collect(ctx, time.Now(), grace, func() (map[digest.ContentDigest]bool, error) {
		refs, err := refd.ReferencedContent(ctx)
		if err != nil {
			return nil, err
		}
		sts := c.lastStatus()
		if len(sts) == 0 {
			return nil, errors.New("cluster: the node's groups are not known now: nothing is collected")
		}
		for _, st := range sts {
			if st.Group == node.MetaGroup {
				continue
			}
			contents, err := c.sm.Contents(st.Group)
			if err != nil {
				return nil, err
			}
			for _, s := range contents {
				if d, err := digest.ParseContentDigest(s); err == nil {
					refs[d] = true
				}
			}
		}
		return refs, nil
	})
}

// wakeAfterApply is how long after a write naming bytes applies the
// custody sweep looks for them: time for its batch's records to commit.
const wakeAfterApply = 20 * time.Millisecond

// wakeOnBytes wraps the writes that name bytes so that, applied here, they
// start this node's fetch soon rather than at the sweep's next tick.
func (c *Node) wakeOnBytes(methods map[string]replica.Method) map[string]replica.Method {
	for name := range bytesMethods(nil) {
		m, ok := methods[name]
		if !ok {
			continue
		}
		methods[name] = func(ctx context.Context, svc service.Service, call service.Call, doc []byte) (any, error) {
			v, err := m(ctx, svc, call, doc)
			if err == nil {
				time.AfterFunc(wakeAfterApply, c.custody.wake)
			}
			return v, err
		}
	}
	return methods
}

// fetchForRead fetches, for a read refused for this node's copy (missing:
// not fetched yet, as on a node that has just joined; or damaged), a
// verified copy of content from the session's group's holders at once,
// bounded by the read's context, and reports whether the read may be
// answered again from it. The copy is marked suspect first, so no receipt
// is made for it until it verifies; the custody sweep is woken either way
// to receipt or repair it.
func (c *Node) fetchForRead(ctx context.Context, call service.Call, content string) bool {
	c.custody.found(content)
	defer c.custody.wake()
	group := c.sm.GroupOf(call.Tenant, call.Session)
	size, named, _, err := c.sm.ContentHolders(group, content)
	if err != nil {
		return false
	}
	if len(named) == 0 {
		size = -1
	}
	var voters []uint64
	for _, st := range c.lastStatus() {
		if st.Group == group {
			voters = st.Voters
		}
	}
	if err := c.fetch(ctx, group, content, size, c.holdersOf(group, content, named, voters)); err != nil {
		c.log.Warn("custody: a read found no copy here and fetched none", "group", group, "content", content, "err", err)
		return false
	}
	c.custody.stored(content, c.sm.PlacementEpoch(group))
	return true
}
