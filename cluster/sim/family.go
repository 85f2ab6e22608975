package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"tally/api"
	"tally/claim"
	"tally/cluster"
	"tally/cluster/replica"
	"tally/digest"
	"tally/expect"
	"tally/refuse"
	"tally/service"
	"tally/store"
)

// The other families' writes go to sessions of their own (x0, x1), so the
// promise sessions stay what cluster/model's Ledger describes and their
// history is checked by porcupine; these are checked by the state every
// replica ends with (checkFamilies).

// famSessions is how many sessions the expectations and claims share: x0
// routes to the second data group, x1 to the first, so both groups' leaders
// sweep.
const famSessions = 2

func famSessionName(i int) string { return fmt.Sprintf("x%d", i) }

// How an expectation's fact comes: soon after it is raised (in time,
// unless the faults hold it past its due), well after its due, or never.
const (
	factOnTime = iota
	factLate
	factNever
)

// simExpect is an expectation a client raised.
type simExpect struct {
	id, session string
	due         int64 // virtual
	plan        int
	raised      bool  // acknowledged
	factSent    bool  // its fact's write started
	factAcked   int64 // when its fact was acknowledged; 0 if it was not
}

// Claim steps, in order: create, post, receipt; for a claim with a
// check, its respondent's artifact: its bytes staged (one Stage command,
// as a node stages a small upload) and published; then done.
const (
	claimCreate = iota
	claimPost
	claimReceipt
	claimStage
	claimPublish
	claimDone
)

// simClaim is a claim a client issued.
type simClaim struct {
	id, session string
	claimant    string
	respondent  string
	checks      int   // 0 or 1
	deadline    int64 // virtual, 0 if none
	step        int   // the next step
	refused     bool  // a step was refused (its deadline had passed)
	upload      replica.Upload
	artifact    []byte // its artifact's bytes, once staged
}

// famOpen reports whether expectations may still be raised and claims
// issued: not after 3.5 s, so their dues and deadlines pass while the
// clients still run, and the timekeeper commits their lapses and expiries
// before the end.
func (w *World) famOpen() bool { return w.now < int64(w.opt.Chaos)+int64(w.opt.Quiesce)/8 }

// nextFamilyOp is a client's operation of the other families, if it takes
// one: the fact of an expectation of its when due, else (Options.Families)
// an expectation raised or its claim's next step. nil means a promise
// operation.
func (w *World) nextFamilyOp(c *client) *write {
	for _, x := range c.expects {
		if !x.raised || x.factSent || x.plan == factNever {
			continue
		}
		if x.plan == factOnTime || w.now >= x.due+int64(300*time.Millisecond) {
			return w.recordFact(c, x)
		}
	}
	r := w.rng.IntN(100)
	switch {
	case r < w.opt.Families/2 && w.famOpen():
		return w.raise(c)
	case r < w.opt.Families && (c.claim != nil || w.famOpen()):
		return w.claimStep(c)
	}
	return nil
}

// famCall is a call of a client's write in a family session.
func (c *client) famCall(session, actor string) service.Call {
	c.req++
	return service.Call{Tenant: tenant, Session: session, Actor: actor, RequestID: fmt.Sprintf("c%d-%d", c.id, c.req)}
}

// raise raises an expectation due some 0.8–2.5 s from now, with a plan for
// its fact.
func (w *World) raise(c *client) *write {
	x := &simExpect{
		id:      fmt.Sprintf("e%d-%d", c.id, c.n),
		session: famSessionName(w.rng.IntN(famSessions)),
		due:     w.now + int64(800+w.rng.IntN(1700))*int64(time.Millisecond),
		plan:    []int{factOnTime, factOnTime, factLate, factNever}[w.rng.IntN(4)],
	}
	w.expects = append(w.expects, x)
	doc := api.ExpectRaise{ExpectationID: x.id, Kind: "sim", Subject: &expect.Subject{Type: "task", ID: x.id},
		SatisfiedBy: &api.FactKeyRef{FactKey: "done:" + x.id}, DueAt: w.instant(x.due), Basis: string(expect.BasisDeclared)}
	call := c.famCall(x.session, fmt.Sprintf("agent-%d", c.id))
	return &write{method: service.MethodRaiseExpectation, doc: doc, call: call, done: func(out replica.Outcome) error {
		ew, ok := out.Value.(service.ExpectationWritten)
		if out.Err != nil || !ok || ew.Expectation.ExpectationID != x.id {
			return fmt.Errorf("raise %s: %v (%T)", x.id, out.Err, out.Value)
		}
		x.raised = true
		c.expects = append(c.expects, x)
		w.stats.Expectations++
		w.ack(call, ew.Seq)
		return nil
	}}
}

// recordFact records the fact that satisfies x.
func (w *World) recordFact(c *client, x *simExpect) *write {
	x.factSent = true
	doc := api.ExpectFact{FactKey: "done:" + x.id, Subject: &expect.Subject{Type: "task", ID: x.id}}
	call := c.famCall(x.session, "feed")
	return &write{method: service.MethodRecordFact, doc: doc, call: call, done: func(out replica.Outcome) error {
		f, ok := out.Value.(service.FactRecorded)
		if out.Err != nil || !ok {
			return fmt.Errorf("fact of %s: %v (%T)", x.id, out.Err, out.Value)
		}
		x.factAcked = w.now
		w.stats.Facts++
		w.ack(call, f.Seq)
		return nil
	}}
}

// oneCheck is the slot of a claim with a check: a review by its
// claimant.
func oneCheck(evaluator string) []claim.SlotSpec {
	return []claim.SlotSpec{{Name: "change", Mode: claim.Required, Checks: []claim.CheckSpec{{ID: "review",
		Validator: claim.Validator{Name: "review", Version: "1"}, Evaluator: evaluator, Mode: claim.Required,
		Phases: []claim.Phase{claim.Quality}, Attempts: 1}}}}
}

// claimStep is the next step of the client's claim, or a new claim: with
// no check or one, and one time in three a deadline 0.3–1.5 s away, which
// may pass before its last step (then refused) or after it; the
// timekeeper expires it either way.
func (w *World) claimStep(c *client) *write {
	if c.claim == nil {
		cl := &simClaim{id: fmt.Sprintf("k%d-%d", c.id, c.n), session: famSessionName(w.rng.IntN(famSessions)),
			claimant: fmt.Sprintf("agent-%d", c.id), respondent: fmt.Sprintf("worker-%d", c.id), checks: w.rng.IntN(2)}
		if w.rng.IntN(3) == 0 {
			cl.deadline = w.now + int64(300+w.rng.IntN(1200))*int64(time.Millisecond)
		}
		c.claim = cl
		w.claims = append(w.claims, cl)
	}
	cl := c.claim
	var method, actor string
	var doc any
	switch cl.step {
	case claimCreate:
		d := api.ClaimCreate{Claim: cl.id, Respondent: cl.respondent, Work: "w", NoChecks: cl.checks == 0}
		if cl.deadline != 0 {
			d.Deadline = w.instant(cl.deadline)
		}
		if cl.checks == 1 {
			d.Slots = oneCheck(cl.claimant)
		}
		method, actor, doc = service.MethodCreateClaim, cl.claimant, d
	case claimPost:
		method, actor, doc = service.MethodPostClaim, cl.claimant, api.ClaimPost{Claim: cl.id}
	case claimReceipt:
		method, actor, doc = service.MethodAcquireReceipt, cl.respondent, api.ClaimReceipt{Claim: cl.id}
	case claimStage:
		return w.stage(c, cl)
	default:
		method, actor = service.MethodPublishArtifact, cl.respondent
		doc = cluster.WithUpload[api.ClaimPublish]{Doc: api.ClaimPublish{Claim: cl.id, Artifact: "patch", Slot: "change", Generation: 1, Kind: "patch"}, Upload: cl.upload}
	}
	call := c.famCall(cl.session, actor)
	return &write{method: method, doc: doc, call: call, done: func(out replica.Outcome) error {
		if _, ok := refuse.As(out.Err); ok && cl.deadline != 0 && w.now >= cl.deadline {
			// Its deadline passed first: the claim ended there.
			cl.refused = true
			c.claim = nil
			w.stats.ClaimsRefused++
			return nil
		}
		cw, ok := out.Value.(service.ClaimWritten)
		if out.Err != nil || !ok || len(cw.Records) == 0 {
			return fmt.Errorf("%s %s: %v (%T)", method, cl.id, out.Err, out.Value)
		}
		env, err := store.ParseEnvelope(cw.Records[0].Line)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, cl.id, err)
		}
		if cl.step == claimCreate {
			w.stats.Claims++
		}
		cl.step++
		if cl.step == claimStage && cl.checks == 0 {
			cl.step = claimDone
		}
		if cl.step == claimDone {
			c.claim = nil
		}
		if method == service.MethodPublishArtifact {
			w.stats.Artifacts++
		}
		w.ack(call, env.Seq)
		return nil
	}}
}

// stage stages the bytes of the claim's artifact, a few hundred bytes, as
// a node stages a small upload: one Stage command carrying them, under an
// upload id of the proposer's instant and a nonce; the publish names its
// size and content digest.
func (w *World) stage(c *client, cl *simClaim) *write {
	cl.artifact = fmt.Appendf(nil, "--- a/%s\n+++ b/%s\n%s\n", cl.id, cl.id, bytes.Repeat([]byte("+x"), 64+w.rng.IntN(256)))
	h := digest.NewContentHasher()
	h.Write(cl.artifact)
	cl.upload = replica.Upload{ID: replica.NewUploadID(w.clock.Now(), w.rng.Uint64()), Size: int64(len(cl.artifact)), Content: digest.ContentSum(h).String()}
	call := service.Call{Tenant: tenant, Session: cl.session}
	return &write{method: replica.MethodStage, doc: replica.StageDoc{Upload: cl.upload.ID}, call: call, payload: cl.artifact, done: func(out replica.Outcome) error {
		if out.Err != nil {
			return fmt.Errorf("stage %s's artifact: %v", cl.id, out.Err)
		}
		cl.step = claimPublish
		return nil
	}}
}

// ack records an acknowledged write of the other families, for checkAcked.
func (w *World) ack(call service.Call, seq uint64) {
	w.stats.Writes++
	w.acked = append(w.acked, ackedWrite{session: call.Session, requestID: call.RequestID, seq: seq})
}

// instant is a virtual instant as the api documents write one.
func (w *World) instant(at int64) string {
	return time.Unix(0, epoch+at).UTC().Format(time.RFC3339Nano)
}

// famLine is what checkFamilies reads of a log line.
type famLine struct {
	Type  string `json:"type"`
	Claim string `json:"claim"`
}

// checkFamilies requires, of the expectations and claims, on every
// replica of their session's group: each lapse held once, under the id
// its expectation, kind and due time make (expect.LapseID); no lapse of an
// expectation whose fact was acknowledged before its due; exactly one
// overdue lapse of one never satisfied, and at most one of any other; each
// claim created there, in the state its acknowledged steps left it, or,
// once its deadline passed, Expired by exactly one deadline fact; a claim
// whose creation was refused absent.
func (w *World) checkFamilies(members map[uint64][]*simNode, groups map[string]uint64, logs map[string][]byte) error {
	// What falls due by end has had two of the timekeeper's looks since.
	end := int64(w.opt.Chaos + w.opt.Quiesce - 2*keepEvery)
	for i := range famSessions {
		s := famSessionName(i)
		deadlines := map[string]int{}
		for _, line := range lines(logs[s]) {
			var l famLine
			if err := json.Unmarshal(line, &l); err != nil {
				return fmt.Errorf("session %s: %w", s, err)
			}
			if l.Type == claim.TypeDeadline {
				deadlines[l.Claim]++
			}
		}
		for k, sn := range members[groups[s]] {
			lapses, err := w.lapses(sn, s)
			if err != nil {
				return fmt.Errorf("node %d: session %s: %w", sn.id, s, err)
			}
			if k == 0 {
				w.stats.Lapses += len(lapses)
			}
			ids, of := map[string]bool{}, map[string]int{}
			for _, l := range lapses {
				if ids[l.LapseID] {
					return fmt.Errorf("node %d: session %s holds lapse %s twice", sn.id, s, l.LapseID)
				}
				ids[l.LapseID] = true
				of[l.ExpectationID]++
				if want := expect.LapseID(l.ExpectationID, l.Lapse, l.DueAt); l.LapseID != want {
					return fmt.Errorf("node %d: session %s: lapse %s of %s is not %s", sn.id, s, l.LapseID, l.ExpectationID, want)
				}
			}
			for _, x := range w.expects {
				if x.session != s || !x.raised {
					continue
				}
				n := of[x.id]
				switch {
				case x.factAcked != 0 && x.factAcked < x.due && n != 0:
					return fmt.Errorf("node %d: %s lapsed though its fact was acknowledged at %v, before its due %v", sn.id, x.id, time.Duration(x.factAcked), time.Duration(x.due))
				case x.plan == factNever && x.due < end && n != 1:
					return fmt.Errorf("node %d: %s, never satisfied, due at %v, lapsed %d times", sn.id, x.id, time.Duration(x.due), n)
				case n > 1:
					return fmt.Errorf("node %d: %s lapsed %d times", sn.id, x.id, n)
				}
			}
			for _, cl := range w.claims {
				if cl.session != s {
					continue
				}
				if err := w.checkClaim(sn, cl, end, deadlines[cl.id]); err != nil {
					return fmt.Errorf("node %d: claim %s: %w", sn.id, cl.id, err)
				}
				if k == 0 && deadlines[cl.id] > 0 {
					w.stats.Expired++
				}
			}
		}
	}
	return nil
}

// checkClaim checks one claim on a replica; deadlines is how many
// deadline facts its session's log holds of it.
func (w *World) checkClaim(sn *simNode, cl *simClaim, end int64, deadlines int) error {
	call := service.Call{Tenant: tenant, Session: cl.session, Actor: "reader", Now: w.clock.Now()}
	v, err := sn.sm.Service().Claim(context.Background(), call, cl.id)
	if cl.step == claimCreate {
		if cl.refused && err == nil {
			return fmt.Errorf("its creation was refused, yet it is %s", v.Claim.State)
		}
		return nil // never created, or the client stopped before
	}
	if err != nil {
		return err
	}
	switch {
	case deadlines > 1:
		return fmt.Errorf("%d deadline facts", deadlines)
	case cl.deadline != 0 && cl.deadline < end && (v.Claim.State != claim.Expired || deadlines != 1):
		return fmt.Errorf("its deadline %v passed, yet it is %s with %d deadline facts", time.Duration(cl.deadline), v.Claim.State, deadlines)
	case cl.deadline == 0 && v.Claim.State != claimStates[cl.step]:
		return fmt.Errorf("it is %s after step %d", v.Claim.State, cl.step)
	}
	if cl.checks == 0 || cl.step != claimDone {
		return nil
	}
	a, err := sn.sm.Service().Artifact(context.Background(), call, cl.id, "patch")
	if err != nil {
		return fmt.Errorf("its artifact: %w", err)
	}
	defer a.Body.Close()
	b, err := io.ReadAll(a.Body)
	if err != nil || !bytes.Equal(b, cl.artifact) || a.Content.String() != cl.upload.Content {
		return fmt.Errorf("its artifact holds %d bytes (%s), published %d (%s): %v", len(b), a.Content, len(cl.artifact), cl.upload.Content, err)
	}
	return nil
}

// claimStates is the state a claim with no deadline is in after each
// step: a staged or published artifact leaves it Received.
var claimStates = []claim.Status{claimPost: claim.Generated, claimReceipt: claim.Posted, claimStage: claim.Received,
	claimPublish: claim.Received, claimDone: claim.Received}

// lapses is every lapse of the session on a replica.
func (w *World) lapses(sn *simNode, session string) ([]expect.LapseView, error) {
	call := service.Call{Tenant: tenant, Session: session, Actor: "reader", Now: w.clock.Now()}
	ls, err := sn.sm.Service().Lapses(context.Background(), call, service.LapseFilter{})
	if r, ok := refuse.As(err); ok && r.Code == service.CodeNoSuchSession {
		return nil, nil
	}
	return ls.Lapses, err
}
