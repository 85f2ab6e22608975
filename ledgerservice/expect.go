package ledgerservice

import (
	"context"
	"encoding/json"
	"strconv"

	"tally/api"
	"tally/expect"
	"tally/ledger"
	"tally/refuse"
	"tally/service"
)

// The expectation family on the local ledger. Each write decodes its
// command from the api document, runs it through the idempotent write,
// and renders its response document under the session lock, as the write
// is folded; the typed result is read from what the render saw, or, for a
// replayed request, from the recorded document.

// expectMember encodes one member of an expectation document with
// encoding/json, as every expectation document always has.
func expectMember(name string, v any) api.Member {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	return api.M(name, b)
}

// onPath is what a request id is bound to for a document about what a
// route's path names (the expectation withdrawn, the task).
type onPath struct {
	Path string `json:"path"`
	Doc  any    `json:"doc"`
}

func firstSeq(res []ledger.Result) uint64 {
	if len(res) == 0 {
		return 0
	}
	return res[0].Seq
}

// expectWrite runs cmd as c's actor (a person when c.Person) through
// execute; render fills *out as it renders, and a replay's result is read
// from its recorded document instead.
func expectWrite[T any, P interface {
	*T
	SetDoc(service.Doc)
}](ctx context.Context, s *Local, c service.Call, method string, doc any, cmd expect.Command, render func(*ledger.State, []ledger.Result) []byte, out *T) (T, error) {
	d, _, err := s.execute(ctx, c, write{method: method, doc: doc, cmd: ledger.Command{Expect: cmd, Human: c.Person}, render: render})
	if err != nil {
		var zero T
		return zero, err
	}
	if d.Replayed {
		return service.ReadExpectDoc[T, P](method, d)
	}
	P(out).SetDoc(d)
	return *out, nil
}

// renderExpectation renders {"seq","expectation"} for the expectation id
// and keeps what it rendered in w.
func renderExpectation(id string, w *service.ExpectationWritten) func(*ledger.State, []ledger.Result) []byte {
	return func(st *ledger.State, res []ledger.Result) []byte {
		w.Seq = firstSeq(res)
		w.Expectation, _ = st.Expects.Expectation(id)
		return ExpectationDoc(w.Seq, &w.Expectation)
	}
}

// ExpectationDoc is the document of an expectation write: its first
// record's sequence and the expectation as the write left it.
func ExpectationDoc(seq uint64, v *expect.View) []byte {
	return api.Doc(api.M("seq", api.U(seq)), expectMember("expectation", v))
}

var _ service.Expectations = (*Local)(nil)

// RaiseExpectation raises d as c.Actor.
func (s *Local) RaiseExpectation(ctx context.Context, c service.Call, d api.ExpectRaise) (service.ExpectationWritten, error) {
	var w service.ExpectationWritten
	named := s.withExpectationID(d)
	r, err := named.Raise()
	if err != nil {
		return w, err
	}
	return expectWrite(ctx, s, c, service.MethodRaiseExpectation, d, expect.RaiseCommand{Raise: r}, renderExpectation(r.ExpectationID, &w), &w)
}

// SupersedeExpectation extends old with d.
func (s *Local) SupersedeExpectation(ctx context.Context, c service.Call, old string, d api.ExpectRaise) (service.ExpectationWritten, error) {
	var w service.ExpectationWritten
	if d.Supersedes != "" && d.Supersedes != old {
		return w, refuse.Invalidf("supersedes", "names "+strconv.Quote(d.Supersedes)+" but the path names "+strconv.Quote(old))
	}
	d.Supersedes = old
	named := s.withExpectationID(d)
	cmd, err := named.Supersede()
	if err != nil {
		return w, err
	}
	return expectWrite(ctx, s, c, service.MethodSupersedeExpectation, d, cmd, renderExpectation(cmd.Raise.ExpectationID, &w), &w)
}

// withExpectationID is d naming the expectation it raises: its own id, or
// one minted by Config.MintExpectationID. The request id stays bound
// to d as sent, so a retry that names no id either is answered as the
// first.
func (s *Local) withExpectationID(d api.ExpectRaise) api.ExpectRaise {
	if d.ExpectationID == "" && s.mintExpectationID != nil {
		d.ExpectationID = s.mintExpectationID()
	}
	return d
}

// WithdrawExpectation withdraws id.
func (s *Local) WithdrawExpectation(ctx context.Context, c service.Call, id string, d api.ExpectWithdraw) (service.ExpectationWritten, error) {
	var w service.ExpectationWritten
	return expectWrite(ctx, s, c, service.MethodWithdrawExpectation, onPath{id, d}, d.Command(id), renderExpectation(id, &w), &w)
}

// CommitLapse commits a lapse as the timekeeper.
func (s *Local) CommitLapse(ctx context.Context, c service.Call, d api.ExpectLapse) (service.ExpectationWritten, error) {
	var w service.ExpectationWritten
	cmd, err := d.Command()
	if err != nil {
		return w, err
	}
	return expectWrite(ctx, s, c, service.MethodCommitLapse, d, cmd, renderExpectation(d.ExpectationID, &w), &w)
}

// RecordFact records d as observed by c.Actor.
func (s *Local) RecordFact(ctx context.Context, c service.Call, d api.ExpectFact) (service.FactRecorded, error) {
	var f service.FactRecorded
	cmd, err := d.Command(api.ParseInstant)
	if err != nil {
		return f, err
	}
	l, err := s.sessions.Open(ctx, c.Tenant, c.Session, true)
	if err != nil {
		return f, err
	}
	if err := l.Refresh(); err != nil {
		return f, err
	}
	// The expectations the fact satisfies are those open with its key
	// just before it.
	var open []string
	l.Read(func(st *ledger.State) {
		for _, v := range st.Expects.List(expect.Filter{State: "open"}) {
			if v.SatisfiedBy.FactKey == d.FactKey {
				open = append(open, v.ExpectationID)
			}
		}
	})
	render := func(st *ledger.State, res []ledger.Result) []byte {
		f.Seq = firstSeq(res)
		f.Satisfied = []string{}
		for _, id := range open {
			if v, ok := st.Expects.Expectation(id); ok && v.State == "satisfied" {
				f.Satisfied = append(f.Satisfied, id)
			}
		}
		if len(res) > 0 {
			if ev, err := expect.Decode(res[0].Line); err == nil && ev.Fact != nil {
				f.Fact = service.Fact{FactKey: ev.Fact.FactKey, Subject: ev.Fact.Subject, At: ev.Fact.At, By: ev.Fact.By}
			}
		}
		return api.Doc(api.M("seq", api.U(f.Seq)), expectMember("fact", f.Fact), expectMember("satisfied", f.Satisfied))
	}
	return expectWrite(ctx, s, c, service.MethodRecordFact, d, cmd, render, &f)
}

// RecordTaskOutcome records task's outcome.
func (s *Local) RecordTaskOutcome(ctx context.Context, c service.Call, task string, d api.ExpectTaskOutcome) (service.TaskOutcomeRecorded, error) {
	var o service.TaskOutcomeRecorded
	render := func(_ *ledger.State, res []ledger.Result) []byte {
		o.Seq, o.Task, o.Withdrawn = firstSeq(res), service.TaskOutcome{TaskID: task, Outcome: d.Outcome}, []string{}
		for _, x := range res {
			if x.Type != expect.TypeWithdraw {
				continue
			}
			if ev, err := expect.Decode(x.Line); err == nil && ev.Withdraw != nil {
				o.Withdrawn = append(o.Withdrawn, ev.Withdraw.ExpectationID)
			}
		}
		return api.Doc(api.M("seq", api.U(o.Seq)), expectMember("task", o.Task), expectMember("withdrawn", o.Withdrawn))
	}
	return expectWrite(ctx, s, c, service.MethodRecordTaskOutcome, onPath{task, d}, d.Command(task), render, &o)
}

func (s *Local) Expectation(ctx context.Context, c service.Call, id string) (service.ExpectationShown, error) {
	var v service.ExpectationShown
	l, err := s.read(ctx, c)
	if err != nil {
		return v, err
	}
	var ok bool
	if v.Expectation, ok = l.Expectation(id); !ok {
		return v, refuse.NotFoundf("expectationId", "names no expectation in this ledger: "+id)
	}
	v.Expectation.DuePassed = v.Expectation.PastDue(s.at(c))
	v.JSON = api.Doc(expectMember("expectation", &v.Expectation))
	return v, nil
}

func (s *Local) ListExpectations(ctx context.Context, c service.Call, f expect.Filter) (service.ExpectationList, error) {
	var vs service.ExpectationList
	l, err := s.read(ctx, c)
	if err != nil {
		return vs, err
	}
	if f.State != "" {
		if _, ok := expect.ParseLife(f.State); !ok {
			return vs, refuse.Invalidf("state", "must be open, satisfied, withdrawn or superseded")
		}
	}
	vs.Expectations = l.Expectations(f)
	now := s.at(c)
	for i := range vs.Expectations {
		vs.Expectations[i].DuePassed = vs.Expectations[i].PastDue(now)
	}
	vs.JSON = api.Doc(expectMember("expectations", vs.Expectations))
	return vs, nil
}

func (s *Local) Lapses(ctx context.Context, c service.Call, f service.LapseFilter) (service.LapseList, error) {
	var ls service.LapseList
	l, err := s.read(ctx, c)
	if err != nil {
		return ls, err
	}
	ls.Lapses = []expect.LapseView{}
	for _, x := range l.Lapses(f.Since) {
		if f.ExpectationID == "" || x.ExpectationID == f.ExpectationID {
			ls.Lapses = append(ls.Lapses, x)
		}
	}
	ls.JSON = api.Doc(expectMember("lapses", ls.Lapses))
	return ls, nil
}

func (s *Local) TaskOrigin(ctx context.Context, c service.Call, task string) (service.TaskOriginShown, error) {
	var o service.TaskOriginShown
	l, err := s.read(ctx, c)
	if err != nil {
		return o, err
	}
	var ended bool
	o.Task.TaskID = task
	l.Read(func(st *ledger.State) {
		var out expect.Outcome
		out, ended = st.Expects.TaskOutcome(task)
		o.Task.Outcome = string(out)
		o.Task.Expectations = st.Expects.List(expect.Filter{TaskID: task})
	})
	if !ended && len(o.Task.Expectations) == 0 {
		return service.TaskOriginShown{}, refuse.NotFoundf("taskId", "is no origin of expectations in this ledger: "+task)
	}
	o.JSON = api.Doc(expectMember("task", &o.Task))
	return o, nil
}
