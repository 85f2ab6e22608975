package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"tally/api"
	"tally/cluster"
	"tally/cluster/model"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/promise"
	"tally/refuse"
	"tally/service"
)

// A client declares promises, resolves the ones it declared, and lists a
// session's promises; now and then it raises an expectation, records the
// fact that satisfies one, or takes a claim a step (family.go). One
// operation at a time; a write is retried, under its request id, through
// any node until it is answered.
type client struct {
	id      int
	req     uint64 // its last write's request number
	n       int    // ops started
	busy    bool
	attempt int // never reset, so a late answer to an earlier op is ignored
	op      model.LedgerOp
	write   *write // the current operation's command, unless it is a read
	call    int64
	open    map[string][]owned // by session: its promises acknowledged and not resolved
	expects []*simExpect       // its expectations raised
	claim   *simClaim          // its claim in progress
}

// write is what every attempt of a write sends: the Service method, its
// api document and the call, with the request id. A write of the other
// families has done, which takes its outcome (an error is a violation);
// a promise write has none.
type write struct {
	method  string
	doc     any
	call    service.Call
	payload []byte // the bytes a Stage command carries
	done    func(replica.Outcome) error
}

// owned is a promise a client declared: its text and the id it was given.
type owned struct{ text, id string }

// ackedWrite is an acknowledged write: its record's place in its session.
type ackedWrite struct {
	session   string
	requestID string
	seq       uint64
}

// until is every promise's deadline, far past the run, so no promise is
// overdue and what a read sees depends on the writes alone.
const until = "2027-01-01T00:00:00Z"

func sessionName(i int) string { return fmt.Sprintf("s%d", i) }

func (w *World) clientStep(c *client) {
	if c.busy {
		return
	}
	c.busy = true
	c.n++
	c.call = w.now
	if c.write = w.nextFamilyOp(c); c.write != nil {
		c.op = model.LedgerOp{}
		w.attempt(c)
		return
	}
	session := sessionName(w.rng.IntN(w.opt.Sessions))
	if w.placer != nil && w.waitsForPlacer(session) {
		session = sessionName(1 + w.rng.IntN(w.opt.Sessions-1))
	}
	c.op, c.write = w.nextOp(c, session)
	w.attempt(c)
}

// nextOp picks a client's next operation in a session: a read three times
// in ten, else a resolution of one of its open promises there (when it
// has one) three times in seven, else a declaration.
func (w *World) nextOp(c *client, session string) (model.LedgerOp, *write) {
	r := w.rng.IntN(10)
	if r < 3 {
		return model.LedgerOp{Kind: model.List, Session: session}, nil
	}
	c.req++
	call := service.Call{Tenant: tenant, Session: session, Actor: fmt.Sprintf("agent-%d", c.id), RequestID: fmt.Sprintf("c%d-%d", c.id, c.req)}
	if open := c.open[session]; r < 6 && len(open) > 0 {
		p := open[w.rng.IntN(len(open))]
		doc := api.PromiseResolve{ID: p.id, As: promise.AsSatisfied, Evidence: []string{"sim:" + p.text}}
		return model.LedgerOp{Kind: model.Resolve, Session: session, Text: p.text}, &write{method: service.MethodResolvePromise, doc: doc, call: call}
	}
	text := fmt.Sprintf("c%d-%d", c.id, c.n)
	doc := api.PromiseDeclare{Promise: text, To: "creditor", Until: until}
	return model.LedgerOp{Kind: model.Declare, Session: session, Text: text}, &write{method: service.MethodDeclarePromise, doc: doc, call: call}
}

// attempt sends the client's current operation to some live node; on an
// error or no answer it retries elsewhere, a write under the same request
// id.
func (w *World) attempt(c *client) {
	if w.err != nil {
		return
	}
	c.attempt++
	a := c.attempt
	live := func() bool { return c.attempt == a && c.busy }
	w.through(live, func() { w.attempt(c) }, func(sn *simNode, retry func()) {
		if c.write == nil {
			w.read(c, sn, live, retry)
			return
		}
		w.propose(c, sn, live, retry)
	})
}

// through sends one attempt (send) through some live node, handing it the
// retry: while the attempt is live, again runs after a short pause when no
// node is up, when send retries, or when no answer came in 1.5 s (the node
// may crash and never answer).
func (w *World) through(live func() bool, again func(), send func(sn *simNode, retry func())) {
	retry := func() {
		if live() {
			w.after(time.Duration(20+w.rng.IntN(80))*time.Millisecond, func() {
				if live() {
					again()
				}
			})
		}
	}
	ups := w.upNodes()
	if len(ups) == 0 {
		retry()
		return
	}
	sn := ups[w.rng.IntN(len(ups))]
	w.after(1500*time.Millisecond, retry)
	send(sn, retry)
}

// propose sends the client's write through sn as a node sends one: the
// command cluster.NewCommand makes, stamped with the virtual instant and
// seeded from the run's generator, proposed to the group the replica
// routes the session to; the answer is what applying it at sn returned.
// proposeOutcome proposes data to group g through sn and hands took the
// outcome of applying it at sn; a proposal that failed, or that met the
// session moved away (sn has not applied the placement yet), is retried;
// nothing is done once live says the attempt is over.
func (w *World) proposeOutcome(sn *simNode, g uint64, data []byte, live func() bool, retry func(), took func(replica.Outcome)) {
	sm := sn.sm
	sn.n.Propose(g, data, func(r node.ProposeResult) {
		if !live() {
			return
		}
		if r.Err != nil {
			retry()
			return
		}
		out, ok := sm.Take(g, r.Index)
		if !ok {
			w.fail("node %d has no outcome for entry %d of group %d", sn.id, r.Index, g)
			return
		}
		if moved(out.Err) {
			w.stats.Moved++
			retry()
			return
		}
		took(out)
	})
}

func (w *World) propose(c *client, sn *simNode, live func() bool, retry func()) {
	cw, sm := c.write, sn.sm
	data, err := w.command(cw.method, cw.call, cw.doc, cw.payload)
	if err != nil {
		w.fail("client %d: %v", c.id, err)
		return
	}
	g := sm.GroupOf(cw.call.Tenant, cw.call.Session)
	if !w.placedHere(g, sn.id) {
		retry()
		return
	}
	w.proposeOutcome(sn, g, data, live, retry, func(out replica.Outcome) {
		if cw.done != nil {
			if err := cw.done(out); err != nil {
				w.fail("client %d at node %d: %v", c.id, sn.id, err)
				return
			}
			w.finish(c, 0, 0)
			return
		}
		pw, ok := out.Value.(service.PromiseWritten)
		if out.Err != nil || !ok {
			w.fail("%s %s (request %s) at node %d: %v (%T)", cw.method, c.op.Text, cw.call.RequestID, sn.id, out.Err, out.Value)
			return
		}
		w.written(c, pw)
	})
}

// command is the entry a node proposes for a write at the virtual
// instant: cluster.NewCommand's, its ids seeded from the run's generator,
// with the bytes a Stage command carries.
func (w *World) command(method string, call service.Call, doc any, payload []byte) ([]byte, error) {
	cmd, err := cluster.NewCommand(method, call, doc, w.clock.Now(), w.rng.Uint64())
	if err != nil {
		return nil, err
	}
	cmd.Payload = payload
	return cmd.Encode()
}

// written completes a client's acknowledged write.
func (w *World) written(c *client, pw service.PromiseWritten) {
	s := c.op.Session
	if pw.Promise.Promise != c.op.Text {
		w.fail("request %s was answered with promise %q, not %q", c.write.call.RequestID, pw.Promise.Promise, c.op.Text)
		return
	}
	w.stats.Writes++
	w.acked = append(w.acked, ackedWrite{session: s, requestID: c.write.call.RequestID, seq: pw.Seq})
	switch c.op.Kind {
	case model.Declare:
		c.open[s] = append(c.open[s], owned{text: c.op.Text, id: pw.Promise.ID})
	case model.Resolve:
		c.open[s] = slices.DeleteFunc(c.open[s], func(p owned) bool { return p.text == c.op.Text })
	}
	w.complete(c, model.LedgerOut{Seq: pw.Seq})
}

// read is a linearizable read as a node serves one: ReadIndex in the
// session's group, then the replica's Service lists the session's
// promises.
func (w *World) read(c *client, sn *simNode, live func() bool, retry func()) {
	session, sm := c.op.Session, sn.sm
	g := sm.GroupOf(tenant, session)
	if !w.placedHere(g, sn.id) {
		retry()
		return
	}
	w.readIndexed(sn, g, live, retry, func() {
		if _, fenced := sm.FencedTo(g, tenant, session); fenced {
			w.stats.Moved++ // this node has not applied the placement yet
			retry()
			return
		}
		if _, moving := sm.MovingTo(g, tenant, session); moving {
			w.readMoving(c, sn, g, live, retry)
			return
		}
		ps, err := w.listPromises(sm, session)
		if err != nil {
			w.fail("client %d: list %s at node %d: %v", c.id, session, sn.id, err)
			return
		}
		w.stats.Reads++
		w.complete(c, model.LedgerOut{Promises: ps})
	})
}

// readIndexed confirms through sn that its replica of group g is current
// (ReadIndex) and then calls read; a read that could not be confirmed is
// retried; nothing is done once live says the attempt is over.
func (w *World) readIndexed(sn *simNode, g uint64, live func() bool, retry, read func()) {
	sn.n.ReadIndex(g, func(r node.ReadResult) {
		if !live() {
			return
		}
		if r.Err != nil {
			retry()
			return
		}
		read()
	})
}

// listPromises is every promise of the session on a replica, as its
// Service lists them at the virtual instant, in declaration order.
func (w *World) listPromises(sm *replica.SM, session string) ([]model.Promise, error) {
	call := service.Call{Tenant: tenant, Session: session, Actor: "reader", Now: w.clock.Now()}
	list, err := sm.Service().ListPromises(context.Background(), call, promise.Filter{State: "all"})
	if r, ok := refuse.As(err); ok && r.Code == service.CodeNoSuchSession {
		return nil, nil // no write has reached the session here yet
	}
	if err != nil {
		return nil, err
	}
	out := make([]model.Promise, 0, len(list.Promises))
	for _, v := range list.Promises {
		out = append(out, model.Promise{Text: v.Promise, Seq: v.Seq, Resolved: v.State == promise.Satisfied})
	}
	slices.SortFunc(out, func(a, b model.Promise) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// complete ends a promise operation: it joins the history porcupine
// checks.
func (w *World) complete(c *client, out model.LedgerOut) {
	w.history = append(w.history, porcupine.Operation{ClientId: c.id, Input: c.op, Call: c.call, Output: out, Return: w.now})
	w.finish(c, out.Seq, uint64(len(out.Promises)))
}

// finish ends a client's operation and schedules its next.
func (w *World) finish(c *client, seq, n uint64) {
	w.stats.Ops++
	w.mix(9, uint64(c.id), seq, n)
	c.busy = false
	if w.now < int64(w.opt.Chaos)+int64(w.opt.Quiesce)/2 {
		pause := w.opt.Pause[0] + time.Duration(w.rng.IntN(int((w.opt.Pause[1]-w.opt.Pause[0])/time.Millisecond)))*time.Millisecond
		w.after(pause, func() { w.clientStep(c) })
	}
}
