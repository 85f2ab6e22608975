package sim

// Evidence custody in the simulator (Options.Custody). Custodians take
// claims with a check through their whole life, and publish each claim's
// artifact as a node takes an upload: its bytes stored in the content
// store of the node asked (artifact.Store, on the node's own directory)
// and the publish proposed naming that node as the holder of a verified
// copy (replica.Upload.Holders), never the bytes. Every node then runs a
// custody sweep as a node does (cluster/custody.go): for the contents its
// groups' records name, a copy that is missing or does not verify is
// fetched from a holder, and a receipt it made for it withdrawn; a copy
// that verifies gets a receipt (replica.MethodReceipt) at the group's
// placement epoch, from a voter. The fetch is a stream on the simulated
// network: its request and its bytes can be lost, cut short or corrupted
// on the way, its holder down or holding a damaged copy, its fetcher
// crashed meanwhile; the fetcher stores only bytes whose whole digest and
// size verify (artifact.Store.PutVerified). On some seeds the faults
// corrupt stored copies, which each node's scrubber finds. A check begins
// only once custody is whole under the run's policy (replica.CustodyWhole),
// read at the node asked after a ReadIndex, as the node's CustodyPending
// does.
//
// Checks: no node proposes a receipt for a copy whose bytes do not hash
// to its content (read from its file, not through the store); at the end
// every receipt a replica holds is of a node whose copy is whole; no check
// began while the receipts at the group's current epoch fell short of the
// policy; every content the groups' records name ends held, whole, by
// every replica of its group and receipted by every voter at the final
// epoch; every claim published has begun its check.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"go.etcd.io/raft/v3"

	"tally/artifact"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/digest"
	"tally/service"
	"tally/store"
)

// CustodyStats count the custody work of a run (Options.Custody).
type CustodyStats struct {
	// Uploads stored at the node asked; Fetches that stored a verified
	// copy; FetchesFailed (holder down or damaged, request lost);
	// FetchesCut, streams cut short or corrupted on the way, whose bytes
	// the fetcher refused; Receipts and Withdrawn committed.
	Uploads, Fetches, FetchesFailed, FetchesCut, Receipts, Withdrawn int
	// Corrupted copies on disk, and Found by a scrub or a fetch from them.
	Corrupted, Found int
	// Pending begins refused for custody not whole, and Begun.
	Pending, Begun int
}

// Custody timing, virtual.
const (
	sweepEvery = 250 * time.Millisecond
	scrubEvery = time.Second
	custodians = 2
)

// custodyWorld is the custody state of a run.
type custodyWorld struct {
	claims []*custClaim
	// nodes is each node's sweep state, which a crash loses.
	nodes map[uint64]*custNode
}

// custNode is a node's sweep state, as custodyState is a node's: the
// contents whose copy was found damaged or missing, and those being
// fetched.
type custNode struct {
	epoch    int // the node's run this state is of
	suspect  map[string]bool
	fetching map[string]bool
}

func (w *World) startCustody() {
	w.cust = &custodyWorld{nodes: map[uint64]*custNode{}}
	for i := range custodians {
		w.after(time.Duration(100+w.rng.IntN(300))*time.Millisecond, func() { w.custodianNext(i) })
	}
	for _, sn := range w.nodes {
		w.scheduleCustody(sn, int64(w.rng.IntN(int(sweepEvery))))
	}
	if w.opt.Corrupt {
		w.after(400*time.Millisecond, w.corruptStep)
	}
}

// custodyRestarted schedules a restarted node's sweep and scrub.
func (w *World) custodyRestarted(sn *simNode) {
	if w.cust != nil {
		w.scheduleCustody(sn, int64(sweepEvery))
	}
}

// custNodeOf is sn's sweep state in its current run.
func (w *World) custNodeOf(sn *simNode) *custNode {
	cn := w.cust.nodes[sn.id]
	if cn == nil || cn.epoch != sn.epoch {
		cn = &custNode{epoch: sn.epoch, suspect: map[string]bool{}, fetching: map[string]bool{}}
		w.cust.nodes[sn.id] = cn
	}
	return cn
}

func objects(sn *simNode) (*artifact.Store, error) {
	return artifact.OpenStore(store.ObjectsDir(sn.dir))
}

// scheduleCustody runs the node's custody sweep every sweepEvery, and its
// scrub every scrubEvery, while it is up.
func (w *World) scheduleCustody(sn *simNode, delay int64) {
	epoch := sn.epoch
	w.at(w.now+delay, func() {
		if !sn.up || sn.epoch != epoch {
			return
		}
		if w.now%int64(scrubEvery) < int64(sweepEvery) {
			w.scrub(sn)
		}
		w.sweep(sn)
		w.scheduleCustody(sn, int64(sweepEvery))
	})
}

// scrub re-reads every stored copy; a damaged one is suspect.
func (w *World) scrub(sn *simNode) {
	objs, err := objects(sn)
	if err != nil {
		w.fail("node %d: content store: %v", sn.id, err)
		return
	}
	list, err := objs.Objects()
	if err != nil {
		w.fail("node %d: list its objects: %v", sn.id, err)
		return
	}
	cn := w.custNodeOf(sn)
	for _, o := range list {
		if err := objs.Verify(context.Background(), o.Content); err != nil && !cn.suspect[o.Content.String()] {
			cn.suspect[o.Content.String()] = true
			w.stats.Custody.Found++
			w.mix(40, sn.id)
		}
	}
}

// sweep is the node's custody sweep (cluster.Node.custodySweep).
func (w *World) sweep(sn *simNode) {
	objs, err := objects(sn)
	if err != nil {
		w.fail("node %d: content store: %v", sn.id, err)
		return
	}
	cn := w.custNodeOf(sn)
	sts := sn.n.Status()
	for i, g := range w.groups {
		st := sts[i]
		voter := slices.Contains(st.Voters, sn.id)
		if g == node.MetaGroup || !voter && !slices.Contains(st.Learners, sn.id) {
			continue
		}
		contents, err := sn.sm.Contents(g)
		if err != nil {
			w.fail("node %d: group %d's contents: %v", sn.id, g, err)
			return
		}
		epoch := sn.sm.PlacementEpoch(g)
		for _, content := range contents {
			rs, err := sn.sm.Receipts(g, content)
			if err != nil {
				w.fail("node %d: receipts of %s: %v", sn.id, content, err)
				return
			}
			mine, held := rs[sn.id]
			if held && mine == epoch && !cn.suspect[content] || cn.fetching[content] {
				continue
			}
			d, err := digest.ParseContentDigest(content)
			if err != nil {
				w.fail("node %d: group %d names content %q", sn.id, g, content)
				return
			}
			if err := objs.Verify(context.Background(), d); err != nil && !w.opt.receiptUnverified {
				cn.suspect[content] = true
				if held {
					w.proposeReceipt(sn, g, replica.ReceiptDoc{Content: content, Node: sn.id, Epoch: mine, Withdrawn: true})
				}
				w.fetchContent(sn, st, content)
				continue
			}
			delete(cn.suspect, content)
			if voter && !(held && mine == epoch) {
				w.proposeReceipt(sn, g, replica.ReceiptDoc{Content: content, Node: sn.id, Epoch: epoch})
			}
		}
	}
}

// intact reports whether the node's file of content hashes to it, read
// directly, not through the store.
func intact(sn *simNode, content string) bool {
	d, err := digest.ParseContentDigest(content)
	if err != nil {
		return false
	}
	b, err := os.ReadFile(artifact.ObjectPath(store.ObjectsDir(sn.dir), d))
	return err == nil && digest.HashContent(b) == d
}

// proposeReceipt proposes a receipt (or its withdrawal) of sn's as the
// node does; a refusal (a stale epoch) or a loss is the next sweep's.
func (w *World) proposeReceipt(sn *simNode, g uint64, d replica.ReceiptDoc) {
	if !d.Withdrawn && !intact(sn, d.Content) {
		w.fail("node %d proposes a custody receipt of content %s at epoch %d, and its copy does not verify", sn.id, d.Content, d.Epoch)
		return
	}
	data, err := w.command(replica.MethodReceipt, service.Call{}, d, nil)
	if err != nil {
		w.fail("node %d: receipt: %v", sn.id, err)
		return
	}
	sm := sn.sm
	w.mix(41, sn.id, d.Epoch)
	sn.n.Propose(g, data, func(r node.ProposeResult) {
		if r.Err != nil {
			return
		}
		if out, ok := sm.Take(g, r.Index); ok && out.Err == nil {
			if d.Withdrawn {
				w.stats.Custody.Withdrawn++
			} else {
				w.stats.Custody.Receipts++
			}
		}
	})
}

// fetchContent fetches content of group st from its holders in turn (the
// records' holders, the nodes with a receipt, the voters, every other
// node last), as
// cluster.Node.fetch does, over the simulated network.
func (w *World) fetchContent(sn *simNode, st node.GroupStatus, content string) {
	cn := w.custNodeOf(sn)
	size, named, _, err := sn.sm.ContentHolders(st.Group, content)
	if err != nil {
		w.fail("node %d: holders of %s: %v", sn.id, content, err)
		return
	}
	if len(named) == 0 {
		size = -1
	}
	from := slices.Clone(named)
	rs, _ := sn.sm.Receipts(st.Group, content)
	others := make([]uint64, 0, len(w.nodes))
	for _, o := range w.nodes {
		others = append(others, o.id)
	}
	for _, id := range append(append(slices.Sorted(maps.Keys(rs)), st.Voters...), others...) {
		if !slices.Contains(from, id) {
			from = append(from, id)
		}
	}
	from = slices.DeleteFunc(from, func(id uint64) bool { return id == sn.id || int(id) > len(w.nodes) })
	cn.fetching[content] = true
	w.fetchFrom(sn, cn, content, size, from)
}

// fetchFrom asks from[0] for content; on a failure, the next.
func (w *World) fetchFrom(sn *simNode, cn *custNode, content string, size int64, from []uint64) {
	if len(from) == 0 {
		delete(cn.fetching, content) // the next sweep tries again
		return
	}
	epoch := sn.epoch
	mine := func() bool { return sn.up && sn.epoch == epoch }
	next := func() {
		if mine() {
			w.stats.Custody.FetchesFailed++
			w.fetchFrom(sn, cn, content, size, from[1:])
		}
	}
	h := w.nodes[from[0]-1]
	out := transport{w: w, from: sn.id}
	if !out.reaches(h.id) {
		w.after(20*time.Millisecond, next) // the request lost: the fetcher's wait ends
		return
	}
	w.after(time.Duration(1+w.rng.IntN(15))*time.Millisecond, func() {
		if !h.up {
			w.after(20*time.Millisecond, next)
			return
		}
		body, ok := w.serveContent(h, content)
		if !ok || size >= 0 && int64(len(body)) != size {
			w.after(time.Duration(1+w.rng.IntN(15))*time.Millisecond, next)
			return
		}
		back := transport{w: w, from: h.id}
		cut := !back.reaches(sn.id)
		switch r := w.rng.IntN(100); {
		case cut || r < 5: // cut short on the way
			body = body[:w.rng.IntN(len(body))]
			cut = true
		case r < 10: // corrupted on the way
			body = slices.Clone(body)
			body[w.rng.IntN(len(body))] ^= 0x20
			cut = true
		}
		delay := time.Duration(1+w.rng.IntN(15)+len(body)>>16) * time.Millisecond
		w.after(delay, func() {
			if !mine() {
				return // the fetcher crashed meanwhile: its fetch went with it
			}
			w.storeFetched(sn, cn, content, int64(len(body)), size, body, cut, next)
		})
	})
}

// serveContent is a holder's answer to a fetch (cluster.Node.OpContent):
// its copy read and hashed as it streams; a damaged copy is cut and found.
func (w *World) serveContent(h *simNode, content string) ([]byte, bool) {
	d, err := digest.ParseContentDigest(content)
	if err != nil {
		return nil, false
	}
	objs, err := objects(h)
	if err != nil {
		return nil, false
	}
	rc, _, err := objs.OpenChecked(d)
	if err != nil {
		return nil, false
	}
	defer rc.Close()
	body, err := io.ReadAll(rc)
	if artifact.IsDamaged(err) {
		if cn := w.custNodeOf(h); !cn.suspect[content] {
			cn.suspect[content] = true
			w.stats.Custody.Found++
		}
	}
	return body, err == nil
}

// storeFetched stores fetched bytes, verified whole; bytes cut or
// corrupted on the way must be refused.
func (w *World) storeFetched(sn *simNode, cn *custNode, content string, got, size int64, body []byte, cut bool, next func()) {
	objs, err := objects(sn)
	if err != nil {
		w.fail("node %d: content store: %v", sn.id, err)
		return
	}
	d, _ := digest.ParseContentDigest(content)
	if size < 0 {
		size = got // a record from before holders: the length the holder sent
	}
	err = objs.PutVerified(context.Background(), bytes.NewReader(body), d, size)
	w.mix(42, sn.id, uint64(got))
	switch {
	case cut && err == nil:
		w.fail("node %d stored content %s from %d bytes cut or corrupted on the way", sn.id, content, got)
	case cut:
		w.stats.Custody.FetchesCut++
		next()
	case err != nil:
		w.fail("node %d: store a whole copy of %s: %v", sn.id, content, err)
	default:
		w.stats.Custody.Fetches++
		delete(cn.fetching, content)
	}
}

// corruptStep, during the faults, flips a byte of a copy some node holds
// while another node holds it whole: rot of every copy at once is a loss
// no custody repairs.
func (w *World) corruptStep() {
	if w.now >= int64(w.opt.Chaos) || w.err != nil {
		return
	}
	sn := w.nodes[w.rng.IntN(len(w.nodes))]
	if objs, err := objects(sn); err == nil {
		list, err := objs.Objects()
		list = slices.DeleteFunc(list, func(o artifact.Object) bool {
			return !slices.ContainsFunc(w.nodes, func(other *simNode) bool { return other != sn && intact(other, o.Content.String()) })
		})
		if err == nil && len(list) > 0 {
			o := list[w.rng.IntN(len(list))]
			path := objs.Path(o.Content)
			if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
				b[w.rng.IntN(len(b))] ^= 0x01
				if err := os.WriteFile(path, b, 0o644); err != nil {
					w.fail("corrupt node %d's copy: %v", sn.id, err)
					return
				}
				w.stats.Custody.Corrupted++
				w.mix(43, sn.id)
			}
		}
	}
	w.after(time.Duration(300+w.rng.IntN(700))*time.Millisecond, w.corruptStep)
}

// checkCustody, at the end: every content a group's records name is held
// whole by every replica of the group and receipted by each voter at the
// group's epoch; every receipt a replica holds is of a whole copy; every
// claim published has begun its check.
func (w *World) checkCustody(members map[uint64][]*simNode) error {
	for i, g := range w.groups {
		if g == node.MetaGroup {
			continue
		}
		reps := members[g]
		var voters []uint64
		for _, sn := range reps {
			if st := sn.n.Status()[i]; st.State == raft.StateLeader {
				voters = st.Voters
			}
		}
		for _, sn := range reps {
			contents, err := sn.sm.Contents(g)
			if err != nil {
				return err
			}
			epoch := sn.sm.PlacementEpoch(g)
			for _, content := range contents {
				if !intact(sn, content) {
					return fmt.Errorf("node %d holds no whole copy of content %s of group %d", sn.id, content, g)
				}
				rs, err := sn.sm.Receipts(g, content)
				if err != nil {
					return err
				}
				for _, v := range voters {
					if rs[v] != epoch {
						return fmt.Errorf("node %d: content %s of group %d has no receipt from voter %d at epoch %d (receipts %v)", sn.id, content, g, v, epoch, rs)
					}
				}
				for _, id := range slices.Sorted(maps.Keys(rs)) {
					if int(id) <= len(w.nodes) && !intact(w.nodes[id-1], content) {
						return fmt.Errorf("node %d holds node %d's receipt of content %s, whose copy there is not whole", sn.id, id, content)
					}
				}
			}
		}
	}
	for _, cl := range w.cust.claims {
		if cl.step > custPublish && cl.step != custDone {
			return fmt.Errorf("claim %s, published, stopped at step %d: custody never whole?", cl.id, cl.step)
		}
	}
	return nil
}
