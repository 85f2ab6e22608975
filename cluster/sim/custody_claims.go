package sim

// The custodians of a custody run (custody.go): each takes claims with a
// check through their whole life, publishing each claim's artifact beside
// the log through the node asked, and begins the check only once custody
// is whole under the run's policy, as a node's CustodyPending admits it.

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"tally/api"
	"tally/claim"
	"tally/cluster"
	"tally/cluster/replica"
	"tally/digest"
	"tally/service"
	"tally/store"
)

// custClaim is a custodian's claim: created, posted, received, its
// artifact published beside the log, its testament closed, posted and
// received, then its check begun.
type custClaim struct {
	id, session          string
	claimant, respondent string
	step                 int
	bytes                []byte
	content              string
	digest               string // the artifact's, as the claim records it
	req                  int
	attempt              int
}

// Custodian steps.
const (
	custCreate = iota
	custPost
	custReceipt
	custPublish
	custClose
	custTestamentPost
	custTestamentReceive
	custBegin
	custDone
)

// custodianNext starts custodian i's next claim while claims are taken.
func (w *World) custodianNext(i int) {
	if w.err != nil || !w.famOpen() {
		return
	}
	n := len(w.cust.claims)
	cl := &custClaim{id: fmt.Sprintf("u%d-%d", i, n), session: famSessionName(w.rng.IntN(famSessions)),
		claimant: fmt.Sprintf("keeper-%d", i), respondent: fmt.Sprintf("maker-%d", i)}
	cl.bytes = fmt.Appendf(nil, "--- a/%s\n+++ b/%s\n%s\n", cl.id, cl.id, bytes.Repeat([]byte("+y"), 64+w.rng.IntN(2048)))
	cl.content = digest.HashContent(cl.bytes).String()
	w.cust.claims = append(w.cust.claims, cl)
	w.custodianStep(i, cl)
}

// custodianStep sends the claim's current step through some live node,
// retried under its request id until answered.
func (w *World) custodianStep(i int, cl *custClaim) {
	if w.err != nil {
		return
	}
	if cl.step == custDone {
		w.after(time.Duration(50+w.rng.IntN(200))*time.Millisecond, func() { w.custodianNext(i) })
		return
	}
	cl.attempt++
	a := cl.attempt
	live := func() bool { return cl.attempt == a }
	w.through(live, func() { w.custodianStep(i, cl) }, func(sn *simNode, retry func()) {
		if cl.step == custBegin && !w.opt.beginWithoutCustody {
			w.custodyGate(cl, sn, live, retry, func() { w.custodianSend(i, cl, sn, live, retry) })
			return
		}
		w.custodianSend(i, cl, sn, live, retry)
	})
}

// custodyGate admits a check's beginning through sn as the node's
// CustodyPending does: after a ReadIndex in the claim's group, custody of
// the target read from sn's replica at its group's epoch, against the
// voters sn knows.
func (w *World) custodyGate(cl *custClaim, sn *simNode, live func() bool, retry, admit func()) {
	g := sn.sm.GroupOf(tenant, cl.session)
	w.readIndexed(sn, g, live, retry, func() {
		voters, holders := w.custodyAt(sn, g, cl.content)
		if !replica.CustodyWhole(w.opt.CustodyPolicy, len(voters), len(holders)) {
			w.stats.Custody.Pending++
			retry()
			return
		}
		admit()
	})
}

// custodyAt is the voters of g as sn knows them, and those of them with a
// receipt of content at g's current epoch in sn's replica.
func (w *World) custodyAt(sn *simNode, g uint64, content string) (voters, holders []uint64) {
	voters = sn.n.Status()[slices.Index(w.groups, g)].Voters
	rs, err := sn.sm.Receipts(g, content)
	if err != nil {
		w.fail("node %d: receipts: %v", sn.id, err)
		return voters, nil
	}
	epoch := sn.sm.PlacementEpoch(g)
	for _, v := range voters {
		if e, ok := rs[v]; ok && e == epoch {
			holders = append(holders, v)
		}
	}
	return voters, holders
}

// custodianSend proposes the claim's current step through sn.
func (w *World) custodianSend(i int, cl *custClaim, sn *simNode, live func() bool, retry func()) {
	g := sn.sm.GroupOf(tenant, cl.session)
	if !w.placedHere(g, sn.id) {
		retry()
		return
	}
	call := service.Call{Tenant: tenant, Session: cl.session, RequestID: fmt.Sprintf("cu%d-%s-%d", i, cl.id, cl.step)}
	var method string
	var doc any
	switch cl.step {
	case custCreate:
		call.Actor, method = cl.claimant, service.MethodCreateClaim
		doc = api.ClaimCreate{Claim: cl.id, Respondent: cl.respondent, Work: "w", Slots: oneCheck(cl.claimant)}
	case custPost:
		call.Actor, method, doc = cl.claimant, service.MethodPostClaim, api.ClaimPost{Claim: cl.id}
	case custReceipt:
		call.Actor, method, doc = cl.respondent, service.MethodAcquireReceipt, api.ClaimReceipt{Claim: cl.id}
	case custPublish:
		// The bytes go to the node asked, which stores and verifies them
		// and names itself their holder.
		objs, err := objects(sn)
		if err != nil {
			w.fail("node %d: content store: %v", sn.id, err)
			return
		}
		d, size, err := objs.Put(context.Background(), bytes.NewReader(cl.bytes))
		if err != nil || d.String() != cl.content {
			w.fail("node %d: store an upload: %v (%s)", sn.id, err, d)
			return
		}
		w.stats.Custody.Uploads++
		up := replica.Upload{ID: replica.NewUploadID(w.clock.Now(), w.rng.Uint64()), Size: size, Content: cl.content, Holders: []uint64{sn.id}}
		call.Actor, method = cl.respondent, service.MethodPublishArtifact
		doc = cluster.WithUpload[api.ClaimPublish]{Doc: api.ClaimPublish{Claim: cl.id, Artifact: "patch", Slot: "change", Generation: 1, Kind: "patch"}, Upload: up}
	case custClose:
		call.Actor, method = cl.respondent, service.MethodCloseTestament
		doc = api.ClaimTestament{Claim: cl.id, Testament: "T1", Generation: 1, Outcome: "complete", Summary: "s",
			Bindings: []claim.Binding{{Slot: "change", Artifact: "patch", Digest: cl.digest}}}
	case custTestamentPost:
		call.Actor, method, doc = cl.respondent, service.MethodPostTestament, api.ClaimTestamentRef{Claim: cl.id, Testament: "T1"}
	case custTestamentReceive:
		call.Actor, method, doc = cl.claimant, service.MethodReceiveTestament, api.ClaimTestamentRef{Claim: cl.id, Testament: "T1"}
	case custBegin:
		call.Actor, method, doc = cl.claimant, service.MethodBeginCheck, api.ClaimBegin{Claim: cl.id, Check: "review", Artifact: "patch"}
		w.checkBegin(cl, sn, g)
		if w.err != nil {
			return
		}
	}
	data, err := w.command(method, call, doc, nil)
	if err != nil {
		w.fail("custodian %d: %v", i, err)
		return
	}
	w.proposeOutcome(sn, g, data, live, retry, func(out replica.Outcome) {
		cw, ok := out.Value.(service.ClaimWritten)
		if out.Err != nil || !ok || len(cw.Records) == 0 {
			w.fail("custodian %d: %s %s at node %d: %v (%T)", i, method, cl.id, sn.id, out.Err, out.Value)
			return
		}
		env, err := store.ParseEnvelope(cw.Records[0].Line)
		if err != nil {
			w.fail("custodian %d: %s %s: %v", i, method, cl.id, err)
			return
		}
		if cl.step == custPublish {
			for _, a := range cw.Claim.Artifacts {
				if a.Artifact == "patch" {
					cl.digest = a.Digest
				}
			}
		}
		if cl.step == custBegin {
			w.stats.Custody.Begun++
		}
		cl.attempt++ // answered: later answers to this step are ignored
		cl.step++
		w.ack(call, env.Seq)
		w.custodianStep(i, cl)
	})
}

// checkBegin: a check begins through sn only while the receipts at its
// group's current epoch, in sn's replica, meet the run's policy: counted
// here on their own, not by replica.CustodyWhole, which the gate uses.
func (w *World) checkBegin(cl *custClaim, sn *simNode, g uint64) {
	voters, holders := w.custodyAt(sn, g, cl.content)
	need := len(voters)
	if w.opt.CustodyPolicy == replica.CustodyMajority {
		need = len(voters)/2 + 1
	}
	if len(voters) == 0 || len(holders) < need {
		w.fail("the check of claim %s began through node %d with receipts of content %s from nodes %v of voters %v at epoch %d (policy %q)",
			cl.id, sn.id, cl.content, holders, voters, sn.sm.PlacementEpoch(g), w.opt.CustodyPolicy)
	}
}
