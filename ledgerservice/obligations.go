package ledgerservice

import (
	"context"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/ledger"
	"tally/promise"
	"tally/service"
	"tally/store"
)

// Obligations folds nothing afresh: it reads the session's state as it
// stands, at c.Now.
func (s *Local) Obligations(ctx context.Context, c service.Call, q service.ObligationQuery) (service.ObligationTable, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return service.ObligationTable{}, err
	}
	t := service.ObligationTable{Now: s.at(c)}
	l.ReadAt(func(st *ledger.State, p store.Position) {
		t.Seq = p.Seq
		t.Rows = consoleRows(st, t.Now, q)
		if q.Family == "" || q.Family == "expectation" {
			t.Lapses = map[string]int{}
			for _, x := range st.Expects.List(expect.Filter{}) {
				for _, lp := range x.Lapses {
					t.Lapses[string(lp.Lapse)]++
				}
			}
		}
	})
	return t, nil
}

// maxSuccessorChain bounds the walk along an expectation's successors.
const maxSuccessorChain = 64

// answeredExpectation is the successor that answered expectation x: the
// first satisfied expectation along the ones superseding it, or "".
func answeredExpectation(st *expect.State, x *expect.View) string {
	next := x.SupersededBy
	for i := 0; next != "" && i < maxSuccessorChain; i++ {
		y, ok := st.Expectation(next)
		if !ok {
			return ""
		}
		if y.State == "satisfied" {
			return y.ExpectationID
		}
		next = y.SupersededBy
	}
	return ""
}

// settle marks a row that ended, and takes off the attention list a row
// answered by a successor or dismissed.
func settle(o *service.Obligation, st *ledger.State, ended bool, at time.Time, answeredBy string) {
	if ended {
		o.Ended = true
		if !at.IsZero() {
			o.EndedAt = &at
		}
	}
	if o.Attention == "" {
		return // only a row needing attention is answered or dismissed: no lookup per row of a large table
	}
	o.AnsweredBy = answeredBy
	_, o.Dismissed = st.Expects.Fact(service.DismissKey(o.Family, o.ID))
	if o.AnsweredBy != "" || o.Dismissed {
		o.Attention = ""
	}
}

// claimFailed reports a claim that ended without its work being accepted
// and without its claimant withdrawing it.
func claimFailed(st claim.Status) bool {
	switch st {
	case claim.Satisfied, claim.Cancelled, claim.Revoked, claim.Superseded:
		return false
	}
	return st.Terminal()
}

// consoleRows builds the rows of the session at now that f may select, in
// log order: a family f leaves out is not built, and a debtor or creditor
// filter narrows the promises and claims before their views are made.
func consoleRows(st *ledger.State, now time.Time, f service.ObligationQuery) []service.Obligation {
	var rows []service.Obligation
	want := func(family string) bool { return f.Family == "" || f.Family == family }
	var promises []promise.View
	if want("promise") {
		promises = st.Promises.Select(promise.Filter{State: "all", By: f.By, To: f.To}, now)
	}
	for _, v := range promises {
		o := service.Obligation{Family: "promise", ID: v.ID, Text: v.Promise, State: string(v.State), By: v.By, To: v.To, Seq: v.Seq}
		if !v.Until.IsZero() {
			u := v.Until
			o.Due = &u
		}
		if v.Overdue {
			o.Attention = "overdue"
		}
		settle(&o, st, !v.State.Open(), v.ResolvedAt, "")
		rows = append(rows, o)
	}
	var claims []claim.Summary
	if want("claim") {
		claims = st.Claims.List(claim.Filter{Respondent: f.By, Claimant: f.To}, now)
	}
	for _, c := range claims {
		o := service.Obligation{Family: "claim", ID: c.Claim, Text: c.Work, State: string(c.State), By: c.Respondent, To: c.Claimant, Seq: c.CreatedSeq}
		if t, err := time.Parse(time.RFC3339Nano, c.Deadline); err == nil {
			o.Due = &t
		}
		switch {
		case claimFailed(c.State):
			o.Attention = "failed"
		case c.Overdue:
			o.Attention = "overdue"
		}
		at, ended := st.Claims.Ended(c.Claim)
		answered := ""
		if o.Attention == "failed" {
			answered = st.Claims.AnsweredBy(c.Claim)
		}
		settle(&o, st, ended, at, answered)
		rows = append(rows, o)
	}
	var expects []expect.View
	if want("expectation") {
		expects = st.Expects.List(expect.Filter{})
	}
	for _, x := range expects {
		text := x.Expects
		if text == "" {
			text = x.Kind
		}
		due := x.CurrentDue
		o := service.Obligation{Family: "expectation", ID: x.ExpectationID, Text: text, State: x.State, By: x.By,
			To: x.Subject.Type + ":" + x.Subject.ID, Due: &due}
		if len(x.Lapses) > 0 {
			o.Attention = "lapsed"
		}
		var at time.Time
		switch {
		case x.ActualAt != nil && x.State == "satisfied":
			at = *x.ActualAt
		case x.Withdrawn != nil:
			at = x.Withdrawn.At
		}
		answered := ""
		if o.Attention != "" && x.State == "superseded" {
			answered = answeredExpectation(st.Expects, &x)
		}
		settle(&o, st, x.State != "open", at, answered)
		rows = append(rows, o)
	}
	return rows
}
