package cluster

// Evidence custody on a node: each node establishes, for the bytes its
// groups' records name, that its own copy verifies whole, and commits a
// custody receipt bound to the group's placement epoch
// (replica.MethodReceipt); an evaluation of an artifact begins only once
// the voters of its group at the current epoch with one are as many as
// the cluster's custody policy requires, every voter by default
// (CustodyPending otherwise; custody_policy.go). After a placement change the epoch moves and every copy
// the new placement requires establishes custody again.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"tally/api"
	"tally/artifact"
	"tally/claim"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/digest"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/rest"
	"tally/service"
	"tally/store"
)

// custodyEvery is how often a node looks for bytes of its groups it holds
// without a receipt at the current epoch.
const custodyEvery = 250 * time.Millisecond

// keepCustody commits this node's receipts until ctx ends, fetching the
// copies it lacks (fetch.go).
func (c *Node) keepCustody(ctx context.Context) {
	t := time.NewTicker(custodyEvery)
	defer t.Stop()
	woken := c.custody.woken()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-woken:
		}
		c.custodySweep(ctx)
	}
}

// custodySweep goes over the contents the records of each group this node
// holds name. A copy here that is missing or does not verify is fetched
// from a holder (started here, run on its own goroutine), and a receipt
// this node made for it withdrawn; a copy that verifies, with no receipt
// at the group's epoch, gets one, if this node is a voter.
func (c *Node) custodySweep(ctx context.Context) {
	if c.holdReceipts.Load() {
		return
	}
	var sts []node.GroupStatus
	if err := c.do(ctx, func(n *node.MultiRaft) { sts = n.Status() }); err != nil {
		return
	}
	objs, err := artifact.OpenStore(store.ObjectsDir(c.sm.Root()))
	if err != nil {
		c.log.Error("custody: no content store", "err", err)
		return
	}
	me := c.id.NodeID
	awaiting := 0
	defer func() { c.metrics.awaiting.Store(int64(awaiting)) }()
	for _, st := range sts {
		voter := slices.Contains(st.Voters, me)
		if st.Group == node.MetaGroup || !voter && !slices.Contains(st.Learners, me) {
			continue
		}
		contents, err := c.sm.Contents(st.Group)
		if err != nil {
			c.log.Error("custody: list a group's contents", "group", st.Group, "err", err)
			continue
		}
		epoch := c.sm.PlacementEpoch(st.Group)
		for _, content := range contents {
			if ctx.Err() != nil {
				return
			}
			rs, err := c.sm.Receipts(st.Group, content)
			if err != nil {
				continue
			}
			verifiedAt, verified, suspect, fetching := c.custody.state(content)
			mine, held := rs[me]
			if held && mine == epoch && !suspect {
				continue
			}
			if voter {
				awaiting++
			}
			d, err := digest.ParseContentDigest(content)
			if err != nil || fetching {
				continue
			}
			if !verified || verifiedAt != epoch || suspect {
				if err := objs.Verify(ctx, d); err != nil {
					c.metrics.unverified.Add(1)
					c.custody.found(content)
					c.log.Warn("custody: this node's copy is missing or does not verify: no receipt; fetching it", "group", st.Group, "content", content, "err", err)
					if held && c.commitReceipt(ctx, st.Group, replica.ReceiptDoc{Content: content, Node: me, Epoch: mine, Withdrawn: true}) {
						c.metrics.withdrawn.Add(1)
					}
					c.startFetch(ctx, st, content, held || !errors.Is(err, artifact.ErrNotFound))
					continue
				}
				c.custody.stored(content, epoch)
			}
			if voter && c.commitReceipt(ctx, st.Group, replica.ReceiptDoc{Content: content, Node: me, Epoch: epoch}) {
				awaiting--
				c.metrics.receipts.Add(1)
			}
		}
	}
}

// startFetch fetches content of the group st on its own goroutine, unless
// it is fetched already or fetchesMax fetches run; repair says the copy
// here was held and went bad (counted repaired once fetched).
func (c *Node) startFetch(ctx context.Context, st node.GroupStatus, content string, repair bool) {
	if !c.custody.startFetch(content) {
		return
	}
	size, named, _, err := c.sm.ContentHolders(st.Group, content)
	if err != nil {
		c.custody.fetchDone(content)
		return
	}
	if len(named) == 0 {
		size = -1 // a record from before holders: whatever the holder says, the digest checks it
	}
	from := c.holdersOf(st.Group, content, named, st.Voters)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer c.custody.fetchDone(content)
		if err := c.fetch(ctx, st.Group, content, size, from); err != nil {
			c.log.Warn("custody: no copy fetched; the next sweep tries again", "group", st.Group, "content", content, "err", err)
			return
		}
		if repair {
			c.metrics.repaired.Add(1)
		}
		c.custody.stored(content, c.sm.PlacementEpoch(st.Group))
		c.custody.wake()
	}()
}

// commitReceipt proposes a receipt and reports whether it committed; a
// refusal (a stale epoch) or a failure is tried again by the next sweep.
func (c *Node) commitReceipt(ctx context.Context, group uint64, d replica.ReceiptDoc) bool {
	cmd, err := NewCommand(replica.MethodReceipt, service.Call{}, d, time.Now(), seed())
	var data []byte
	if err == nil {
		data, err = cmd.Encode()
	}
	var out replica.Outcome
	if err == nil {
		out, err = c.propose(ctx, group, data)
	}
	if err == nil {
		err = out.Err
	}
	if err != nil {
		c.log.Debug("custody: a receipt was not committed; the next sweep tries again", "group", group, "content", d.Content, "epoch", d.Epoch, "err", err)
	}
	return err == nil
}

// custodyOf is the custody of content in group: the voters whose receipt
// is at the group's current epoch, and the others.
func (c *Node) custodyOf(ctx context.Context, group uint64, content string) (epoch uint64, holders, missing []uint64, err error) {
	var voters []uint64
	if err := c.do(ctx, func(n *node.MultiRaft) {
		for _, st := range n.Status() {
			if st.Group == group {
				voters = st.Voters
			}
		}
	}); err != nil {
		return 0, nil, nil, err
	}
	epoch = c.sm.PlacementEpoch(group)
	rs, err := c.sm.Receipts(group, content)
	if err != nil {
		return 0, nil, nil, err
	}
	holders, missing = []uint64{}, []uint64{}
	for _, v := range voters {
		if e, ok := rs[v]; ok && e == epoch {
			holders = append(holders, v)
		} else {
			missing = append(missing, v)
		}
	}
	slices.Sort(holders)
	slices.Sort(missing)
	return epoch, holders, missing, nil
}

// withCustody adds to a claim's document each of its artifacts' custody
// (its "custody" member).
func (c *Node) withCustody(ctx context.Context, call service.Call, shown service.ClaimShown) (service.ClaimShown, error) {
	group := c.sm.GroupOf(call.Tenant, call.Session)
	custody := []service.ArtifactCustody{}
	for _, a := range shown.Claim.Artifacts {
		epoch, holders, missing, err := c.custodyOf(ctx, group, a.Content)
		if err != nil {
			return shown, err
		}
		custody = append(custody, service.ArtifactCustody{Artifact: a.Artifact, Content: a.Content, Group: group, Epoch: epoch, Holders: holders, Missing: missing})
	}
	b, err := json.Marshal(custody)
	if err != nil {
		return shown, fmt.Errorf("custody document: %w", err)
	}
	doc := bytes.TrimRight(shown.JSON, " \n")
	if len(doc) == 0 || doc[len(doc)-1] != '}' {
		return shown, errors.New("cluster: a claim's document is not an object")
	}
	out := append(append(append(slices.Clone(doc[:len(doc)-1]), `,"custody":`...), b...), "}\n"...)
	shown.JSON, shown.Custody = out, custody
	return shown, nil
}

// policyNote says, in a CustodyPending refusal under a policy other than
// all, how many receipts it requires.
func policyNote(policy string, voters int) string {
	if policy == replica.CustodyAll {
		return ""
	}
	return fmt.Sprintf(" (custody %s: %d of the %d voters)", policy, replica.CustodyRequired(policy, voters), voters)
}

// custodyPending refuses the beginning of an evaluation of the target of
// cmd until the voters of its session's group holding a receipt for its
// bytes at the group's current epoch are as many as the cluster's custody
// policy requires (every voter by default; more than half under
// "majority"). It runs once read-consistent.
func (c *Node) custodyPending(ctx context.Context, call service.Call, cmd claim.Command) error {
	t, ok := ledgerservice.TargetOf(cmd)
	if !ok {
		return nil
	}
	group := c.sm.GroupOf(call.Tenant, call.Session)
	var content string
	l, err := c.sm.Open(ctx, call.Tenant, call.Session, false)
	if err != nil {
		return nil // no session: the claim core refuses it itself
	}
	now := call.Now
	if now.IsZero() {
		now = time.Now().UTC()
	}
	l.Read(func(st *ledger.State) {
		if v, known := st.Claims.Claim(t.Claim, now); known {
			if a, ok := v.TargetToVerify(t.Check, t.Artifact, t.OnlyIfNew); ok {
				content = a.Content
			}
		}
	})
	if content == "" {
		return nil
	}
	epoch, holders, missing, err := c.custodyOf(ctx, group, content)
	if err != nil || len(missing) == 0 {
		return err
	}
	policy := c.sm.Policy().CustodyPolicy()
	if replica.CustodyWhole(policy, len(holders)+len(missing), len(holders)) {
		return nil
	}
	c.metrics.pendingRefused.Add(1)
	names := make([]string, len(missing))
	list := []byte{'['}
	for i, m := range missing {
		names[i] = fmt.Sprint(m)
		if i > 0 {
			list = append(list, ',')
		}
		list = fmt.Append(list, m)
	}
	list = append(list, ']')
	return rest.NewRetryable(service.CodeCustodyPending,
		fmt.Sprintf("custody of artifact %s (content %s) is not whole at placement epoch %d of group %d: no receipt yet from node(s) %s%s; nothing was proposed, send it again",
			t.Artifact, content, epoch, group, strings.Join(names, ", "), policyNote(policy, len(holders)+len(missing))),
		api.M("group", api.U(group)), api.M("epoch", api.U(epoch)), api.M("missing", list))
}
