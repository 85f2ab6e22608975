package api

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/instant"
	"tally/promise"
	"tally/refuse"
)

// The read documents: what a read verb selects by. Each is the query of
// its REST route (DecodeQuery on the server, EncodeQuery in the client, by
// the same parameter table) and the arguments of its MCP tool (its JSON
// members, decoded strictly). The instant a read is asked at (now) is the
// Call's, not a document's: every read route and tool takes it alike.

// Query is a read document: its query parameters, each a member.
type Query interface {
	params() []param
}

// param is one query parameter of a read document: get is what a client
// sends (none when unset), set reads what a request gave (at least one
// value), refusing it naming the parameter.
type param struct {
	name string
	get  func() []string
	set  func(vs []string) error
}

// DecodeQuery reads v into q, refusing a malformed parameter by its name.
// Parameters q does not name are left to others (now is the Call's).
func DecodeQuery(v url.Values, q Query) error {
	for _, p := range q.params() {
		if vs := v[p.name]; len(vs) > 0 {
			if err := p.set(vs); err != nil {
				return err
			}
		}
	}
	return nil
}

// EncodeQuery is q as query parameters: those set, as DecodeQuery reads
// them back.
func EncodeQuery(q Query) url.Values {
	v := url.Values{}
	for _, p := range q.params() {
		if vs := p.get(); len(vs) > 0 {
			v[p.name] = vs
		}
	}
	return v
}

// text is a parameter read as its first value, sent when not empty.
func text(name string, s *string) param {
	return param{name: name,
		get: func() []string {
			if *s == "" {
				return nil
			}
			return []string{*s}
		},
		set: func(vs []string) error { *s = vs[0]; return nil }}
}

// texts is a repeated parameter, each value one member of the list.
func texts(name string, s *[]string) param {
	return param{name: name,
		get: func() []string { return *s },
		set: func(vs []string) error { *s = vs; return nil }}
}

// flag is a parameter true or false, sent only when true; an empty value
// is unset.
func flag(name string, b *bool) param {
	return param{name: name,
		get: func() []string {
			if !*b {
				return nil
			}
			return []string{"true"}
		},
		set: func(vs []string) error {
			if vs[0] == "" {
				return nil
			}
			x, err := strconv.ParseBool(vs[0])
			if err != nil {
				return refuse.Invalidf(name, "must be true or false")
			}
			*b = x
			return nil
		}}
}

// PromiseQuery selects promises: GET …/promises, tally_promise_list.
type PromiseQuery struct {
	State string `json:"state,omitempty" jsonschema:"open (the default), overdue or all"`
	By    string `json:"by,omitempty" jsonschema:"the debtor"`
	To    string `json:"to,omitempty" jsonschema:"the creditor"`
	// Task (the A2A task a promise was declared in) is a query parameter
	// only: tally_promise_list does not take it.
	Task string `json:"-"`
}

func (q *PromiseQuery) params() []param {
	return []param{text("state", &q.State), text("by", &q.By), text("to", &q.To), text("task", &q.Task)}
}

// Filter is the promise core's selection q names.
func (q PromiseQuery) Filter() promise.Filter {
	return promise.Filter{State: q.State, By: q.By, To: q.To, Task: q.Task}
}

// PromiseQueryOf is the document that selects what f does.
func PromiseQueryOf(f promise.Filter) PromiseQuery {
	return PromiseQuery{State: f.State, By: f.By, To: f.To, Task: f.Task}
}

// PromiseRef names one promise: GET …/promises/{id}, tally_promise_show.
type PromiseRef struct {
	ID string `json:"id"`
}

// OwedQuery names the seat whose open promises a read lists: tally owed
// --as, tally_promise_owed.
type OwedQuery struct {
	Seat string `json:"seat,omitempty" jsonschema:"the seat (default: the caller)"`
}

// Filter is the open promises the seat owes, the caller's when q names
// none.
func (q OwedQuery) Filter(caller string) promise.Filter {
	seat := q.Seat
	if seat == "" {
		seat = caller
	}
	return promise.Filter{State: promise.FilterOpen, By: seat}
}

// SessionQuery is the document of a read of the whole session (a graph,
// verify): no member, the Call says which session.
type SessionQuery struct{}

// ClaimQuery selects claims: GET …/claims, tally_claim_list.
type ClaimQuery struct {
	State       []string `json:"state,omitempty" jsonschema:"any of these states"`
	Open        bool     `json:"open,omitempty" jsonschema:"only claims not yet terminal"`
	Overdue     bool     `json:"overdue,omitempty" jsonschema:"only open claims past their deadline"`
	Claimant    string   `json:"claimant,omitempty"`
	Respondent  string   `json:"respondent,omitempty"`
	Participant string   `json:"participant,omitempty" jsonschema:"claimant, respondent, receipt holder or an evaluator"`
}

func (q *ClaimQuery) params() []param {
	return []param{texts("state", &q.State), flag("open", &q.Open), flag("overdue", &q.Overdue),
		text("claimant", &q.Claimant), text("respondent", &q.Respondent), text("participant", &q.Participant)}
}

// Filter is the claim core's selection q names.
func (q ClaimQuery) Filter() claim.Filter {
	f := claim.Filter{Open: q.Open, Overdue: q.Overdue, Claimant: q.Claimant, Respondent: q.Respondent, Participant: q.Participant}
	for _, st := range q.State {
		f.States = append(f.States, claim.Status(st))
	}
	return f
}

// ClaimQueryOf is the document that selects what f does.
func ClaimQueryOf(f claim.Filter) ClaimQuery {
	q := ClaimQuery{Open: f.Open, Overdue: f.Overdue, Claimant: f.Claimant, Respondent: f.Respondent, Participant: f.Participant}
	for _, st := range f.States {
		q.State = append(q.State, string(st))
	}
	return q
}

// ExpectQuery selects expectations: GET …/expectations (subject as
// TYPE:ID, task, context), tally_expect_list.
type ExpectQuery struct {
	State     string          `json:"state,omitempty" jsonschema:"open, satisfied, withdrawn or superseded"`
	Kind      string          `json:"kind,omitempty"`
	Subject   *expect.Subject `json:"subject,omitempty"`
	TaskID    string          `json:"taskId,omitempty" jsonschema:"the origin task"`
	ContextID string          `json:"contextId,omitempty" jsonschema:"the origin context"`
}

func (q *ExpectQuery) params() []param {
	subject := param{name: "subject",
		get: func() []string {
			if q.Subject == nil || *q.Subject == (expect.Subject{}) {
				return nil
			}
			return []string{q.Subject.String()}
		},
		set: func(vs []string) error {
			if vs[0] == "" {
				return nil
			}
			t, id, ok := strings.Cut(vs[0], ":")
			if !ok || t == "" || id == "" {
				return refuse.Invalidf("subject", "must be TYPE:ID")
			}
			q.Subject = &expect.Subject{Type: t, ID: id}
			return nil
		}}
	return []param{text("state", &q.State), text("kind", &q.Kind), subject, text("task", &q.TaskID), text("context", &q.ContextID)}
}

// Filter is the expect core's selection q names.
func (q ExpectQuery) Filter() expect.Filter {
	f := expect.Filter{State: q.State, Kind: q.Kind, TaskID: q.TaskID, ContextID: q.ContextID}
	if q.Subject != nil {
		f.Subject = *q.Subject
	}
	return f
}

// ExpectQueryOf is the document that selects what f does.
func ExpectQueryOf(f expect.Filter) ExpectQuery {
	q := ExpectQuery{State: f.State, Kind: f.Kind, TaskID: f.TaskID, ContextID: f.ContextID}
	if f.Subject != (expect.Subject{}) {
		s := f.Subject
		q.Subject = &s
	}
	return q
}

// ExpectationRef names one expectation: GET …/expectations/{id},
// tally_expect_show.
type ExpectationRef struct {
	ExpectationID string `json:"expectationId"`
}

// LapsesQuery selects recorded lapses: GET …/lapses (since, expectation),
// tally_expect_lapses.
type LapsesQuery struct {
	Since         string `json:"since,omitempty" jsonschema:"RFC 3339: lapses noticed at or after"`
	ExpectationID string `json:"expectationId,omitempty"`
}

func (q *LapsesQuery) params() []param {
	return []param{text("since", &q.Since), text("expectation", &q.ExpectationID)}
}

// Noticed is the instant Since names (zero when none), refused by name
// when it is not RFC 3339.
func (q LapsesQuery) Noticed() (time.Time, error) {
	if q.Since == "" {
		return time.Time{}, nil
	}
	return instant.Parse("since", q.Since)
}

// LapsesQueryOf is the document of lapses noticed at or after since (none
// when zero), of one expectation when named.
func LapsesQueryOf(since time.Time, expectation string) LapsesQuery {
	q := LapsesQuery{ExpectationID: expectation}
	if !since.IsZero() {
		q.Since = instant.Format(since)
	}
	return q
}

// ExportQuery is an export's arguments: GET …/export, tally export
// --format, tally_ledger_export.
type ExportQuery struct {
	Format string `json:"format,omitempty" jsonschema:"jsonl (the verified log, the default), json (the promises' states) or pinki (pinki's own lines)"`
}

func (q *ExportQuery) params() []param {
	return []param{text("format", &q.Format)}
}

// ArtifactQuery selects the artifacts a listing lists: of one claim
// (Claim), one artifact of it (Artifact, which needs Claim), or all; with
// Verify each stored copy re-hashed. GET …/artifacts, tally artifact ls
// and verify.
type ArtifactQuery struct {
	Claim    string `json:"claim,omitempty"`
	Artifact string `json:"artifact,omitempty"`
	Verify   bool   `json:"verify,omitempty"`
}

func (q *ArtifactQuery) params() []param {
	return []param{text("claim", &q.Claim), text("artifact", &q.Artifact), flag("verify", &q.Verify)}
}

// QueryNames are the parameters q takes, in its table's order.
func QueryNames(q Query) []string {
	var names []string
	for _, p := range q.params() {
		names = append(names, p.name)
	}
	return names
}

// ReadyQuery selects a ready list: GET …/ready, tally_ready.
type ReadyQuery struct {
	Seat string `json:"seat,omitempty" jsonschema:"default: you"`
}

func (q *ReadyQuery) params() []param { return []param{text("seat", &q.Seat)} }
