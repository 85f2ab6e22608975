package ledgerservice

import (
	"context"
	"fmt"

	"tally/api"
	"tally/ledger"
	"tally/promise"
	"tally/refuse"
	"tally/service"
)

var _ service.Promises = (*Local)(nil)

// DeclarePromise declares d as c.Actor. A declaration without an
// antecedent or a request id (the commonest write) is answered from its
// own record, outside the session lock: its view at the time of the write
// depends on nothing else in the state, so the committer does not spend
// its serial time rendering it.
func (s *Local) DeclarePromise(ctx context.Context, c service.Call, d api.PromiseDeclare) (service.PromiseWritten, error) {
	cmd, err := d.Command(s.now())
	if err != nil {
		return service.PromiseWritten{}, err
	}
	if cmd.On == "" && c.RequestID == "" {
		_, res, err := s.execute(ctx, c, write{method: service.MethodDeclarePromise, doc: d, cmd: ledger.Command{Promise: cmd}})
		if err != nil || c.NoAnswer {
			return service.PromiseWritten{}, err
		}
		return s.renderDeclared(res), nil
	}
	var out service.PromiseWritten
	return s.promiseWrite(ctx, c, write{method: service.MethodDeclarePromise, doc: d, cmd: ledger.Command{Promise: cmd}, render: s.answer(c, s.renderPromise(cmd.ID, &out))}, &out)
}

// AmendPromise moves a deadline.
func (s *Local) AmendPromise(ctx context.Context, c service.Call, d api.PromiseAmend) (service.PromiseWritten, error) {
	cmd, err := d.Command(s.now())
	if err != nil {
		return service.PromiseWritten{}, err
	}
	var out service.PromiseWritten
	return s.promiseWrite(ctx, c, write{method: service.MethodAmendPromise, doc: d, cmd: ledger.Command{Promise: cmd}, render: s.answer(c, s.renderPromise(d.ID, &out))}, &out)
}

// ResolvePromise satisfies, cancels or releases.
func (s *Local) ResolvePromise(ctx context.Context, c service.Call, d api.PromiseResolve) (service.PromiseWritten, error) {
	var out service.PromiseWritten
	return s.promiseWrite(ctx, c, write{method: service.MethodResolvePromise, doc: d, cmd: ledger.Command{Promise: d.Command()}, render: s.answer(c, s.renderPromise(d.ID, &out))}, &out)
}

// AssessPromise records a judgment. One the observer already recorded
// (the same judgment, note and meta) appends nothing: the answer is the
// recorded one, with a warning saying so (promise.State.RecordedAssessment).
func (s *Local) AssessPromise(ctx context.Context, c service.Call, d api.PromiseAssess) (service.PromiseWritten, error) {
	var out service.PromiseWritten
	res, err := s.promiseWrite(ctx, c, write{method: service.MethodAssessPromise, doc: d, cmd: ledger.Command{Promise: d.Command()}, render: s.answer(c, s.renderPromise(d.ID, &out))}, &out)
	if err != nil || len(res.Doc.JSON) > 0 || (c.NoAnswer && c.RequestID == "") {
		return res, err
	}
	return s.recordedAssessment(ctx, c, d)
}

// recordedAssessment answers an assessment that appended nothing with the
// one it repeats: its sequence and the promise as it stands.
func (s *Local) recordedAssessment(ctx context.Context, c service.Call, d api.PromiseAssess) (service.PromiseWritten, error) {
	p, err := promise.Prepare(promise.DefaultLimits(), c.Actor, s.now(), d.Command())
	if err != nil {
		return service.PromiseWritten{}, err
	}
	// The session the write just ran in, as it left it (no refresh: on a
	// cluster replica the log is written only by applying).
	l, err := s.sessions.Open(ctx, c.Tenant, c.Session, false)
	if err != nil {
		return service.PromiseWritten{}, err
	}
	var out service.PromiseWritten
	found := false
	l.Read(func(st *ledger.State) {
		a, ok := st.Promises.RecordedAssessment(&p.Event)
		q, known := st.Promises.Get(d.ID)
		if !ok || !known {
			return
		}
		v := st.Promises.View(q, s.now())
		warn := []string{promise.RecordedWarning(d.ID, a)}
		out = service.PromiseWritten{Doc: service.Doc{JSON: api.PromiseWrite(a.Seq, &v, warn)}, Seq: a.Seq, Promise: v, Warnings: warn}
		found = true
	})
	if !found {
		return service.PromiseWritten{}, fmt.Errorf("assess %s: nothing was appended and no identical assessment is recorded", d.ID)
	}
	return out, nil
}

// promiseWrite executes w, whose render or direct fills out; a replay's
// result is read from its recorded document.
func (s *Local) promiseWrite(ctx context.Context, c service.Call, w write, out *service.PromiseWritten) (service.PromiseWritten, error) {
	doc, _, err := s.execute(ctx, c, w)
	if err != nil {
		return service.PromiseWritten{}, err
	}
	if doc.Replayed {
		return service.ReadPromiseWritten(doc)
	}
	out.Doc = doc
	return *out, nil
}

// answer is render, unless c's caller takes no answer and no request id
// records one (service.Call.NoAnswer): then nil, and the write renders
// nothing under the session lock.
func (s *Local) answer(c service.Call, render func(*ledger.State, []ledger.Result) []byte) func(*ledger.State, []ledger.Result) []byte {
	if c.NoAnswer && c.RequestID == "" {
		return nil
	}
	return render
}

// renderPromise makes a write's response, filling out: the record's
// sequence and the promise as it stands, at the time of the write.
func (s *Local) renderPromise(id string, out *service.PromiseWritten) func(st *ledger.State, res []ledger.Result) []byte {
	return func(st *ledger.State, res []ledger.Result) []byte {
		p, ok := st.Promises.Get(id)
		if !ok && len(res) > 0 {
			p, ok = st.Promises.Get(res[0].Event.ID)
		}
		if !ok || len(res) == 0 {
			return api.Doc()
		}
		v := st.Promises.View(p, s.now())
		*out = service.PromiseWritten{Seq: res[0].Seq, Promise: v, Warnings: res[0].Warnings}
		return api.PromiseWrite(res[0].Seq, &v, res[0].Warnings)
	}
}

// renderDeclared is the answer to a declaration without an antecedent,
// made from its own record (an empty document for any other write).
func (s *Local) renderDeclared(res []ledger.Result) service.PromiseWritten {
	if len(res) != 1 || res[0].Event.Type != promise.TypePromise || res[0].Event.On != "" {
		return service.PromiseWritten{Doc: service.Doc{JSON: api.Doc()}}
	}
	st := promise.NewState()
	st.Apply(promise.Meta{Seq: res[0].Seq}, &res[0].Event)
	p, ok := st.Get(res[0].Event.ID)
	if !ok {
		return service.PromiseWritten{Doc: service.Doc{JSON: api.Doc()}}
	}
	v := st.View(p, s.now())
	return service.PromiseWritten{Doc: service.Doc{JSON: api.PromiseWrite(res[0].Seq, &v, res[0].Warnings)}, Seq: res[0].Seq, Promise: v, Warnings: res[0].Warnings}
}

// Promise is one promise at c.Now.
func (s *Local) Promise(ctx context.Context, c service.Call, id string) (service.PromiseShown, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return service.PromiseShown{}, err
	}
	now := s.at(c)
	v, ok := l.Promise(id, now)
	if !ok {
		return service.PromiseShown{}, refuse.NotFoundf("promise", "no promise with id "+id)
	}
	return service.PromiseShown{Doc: service.Doc{JSON: api.PromiseShow(now, &v)}, Now: now, Promise: v}, nil
}

// ListPromises is the promises f selects at c.Now; its state defaults to
// open.
func (s *Local) ListPromises(ctx context.Context, c service.Call, f promise.Filter) (service.PromiseList, error) {
	if f.State == "" {
		f.State = "open"
	}
	if f.State != "open" && f.State != "overdue" && f.State != "all" {
		return service.PromiseList{}, refuse.Invalidf("state", "must be open, overdue or all")
	}
	l, err := s.read(ctx, c)
	if err != nil {
		return service.PromiseList{}, err
	}
	now := s.at(c)
	vs := l.Promises(f, now)
	if c.ViewsOnly {
		return service.PromiseList{Now: now, Promises: vs}, nil
	}
	return service.PromiseList{Doc: service.Doc{JSON: api.PromiseList(now, "promises", vs)}, Now: now, Promises: vs}, nil
}
