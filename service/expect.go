package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"tally/api"
	"tally/expect"
)

// Expectations is the expectation family: raise, fact, supersede,
// withdraw, task outcomes, lapses and their reads. A write's document is
// the one REST takes as its body (times RFC 3339, durations ISO 8601); who
// raised, observed or withdrew is c.Actor, and c.Person lets the actor
// extend past the lineage bound and withdraw others' expectations.
type Expectations interface {
	// RaiseExpectation raises d as c.Actor (an id minted when d names
	// none); d.Supersedes must be empty (extend with SupersedeExpectation).
	RaiseExpectation(ctx context.Context, c Call, d api.ExpectRaise) (ExpectationWritten, error)
	// SupersedeExpectation raises d as the extension of old: the terms d
	// leaves out are inherited from old (the expect core's rule); a
	// d.Supersedes given must name old.
	SupersedeExpectation(ctx context.Context, c Call, old string, d api.ExpectRaise) (ExpectationWritten, error)
	// RecordFact records d as observed by c.Actor; the open expectations
	// with its key are satisfied.
	RecordFact(ctx context.Context, c Call, d api.ExpectFact) (FactRecorded, error)
	// WithdrawExpectation withdraws the open expectation id (its raiser,
	// the timekeeper or a person).
	WithdrawExpectation(ctx context.Context, c Call, id string, d api.ExpectWithdraw) (ExpectationWritten, error)
	// RecordTaskOutcome records origin task task's outcome; cancelled and
	// failed withdraw its open expectations.
	RecordTaskOutcome(ctx context.Context, c Call, task string, d api.ExpectTaskOutcome) (TaskOutcomeRecorded, error)
	// CommitLapse commits a lapse as the timekeeper (only it may); one
	// already recorded appends nothing and answers an empty document (the
	// zero result), as the REST route always has.
	CommitLapse(ctx context.Context, c Call, d api.ExpectLapse) (ExpectationWritten, error)
	// Expectation is one expectation; a missing one is a NotFound refusal.
	Expectation(ctx context.Context, c Call, id string) (ExpectationShown, error)
	// ListExpectations is the expectations f selects, in raise order.
	ListExpectations(ctx context.Context, c Call, f expect.Filter) (ExpectationList, error)
	// Lapses is the recorded lapses f selects, in log order.
	Lapses(ctx context.Context, c Call, f LapseFilter) (LapseList, error)
	// TaskOrigin is origin task task: its outcome once recorded and the
	// expectations raised on it; a task with neither is a NotFound
	// refusal.
	TaskOrigin(ctx context.Context, c Call, task string) (TaskOriginShown, error)
}

// ExpectationWritten is the outcome of a raise, an extension, a withdrawal
// or a lapse: the first record's sequence and the expectation as the write
// left it.
type ExpectationWritten struct {
	Doc
	Seq         uint64      `json:"seq"`
	Expectation expect.View `json:"expectation"`
}

// Fact is a fact as it was recorded.
type Fact struct {
	FactKey string         `json:"factKey"`
	Subject expect.Subject `json:"subject"`
	At      time.Time      `json:"at"`
	By      string         `json:"by"`
}

// FactRecorded is a fact's outcome: the fact and the expectations it
// satisfied, in raise order.
type FactRecorded struct {
	Doc
	Seq       uint64   `json:"seq"`
	Fact      Fact     `json:"fact"`
	Satisfied []string `json:"satisfied"`
}

// TaskOutcome is an origin task's recorded outcome. (Its members are in
// the order the document has always had them: outcome first.)
type TaskOutcome struct {
	Outcome string `json:"outcome"`
	TaskID  string `json:"taskId"`
}

// TaskOutcomeRecorded is a task outcome's result: the task and the
// expectations the outcome withdrew.
type TaskOutcomeRecorded struct {
	Doc
	Seq       uint64      `json:"seq"`
	Task      TaskOutcome `json:"task"`
	Withdrawn []string    `json:"withdrawn"`
}

// TaskOrigin is a task as the origin of expectations: its outcome, empty
// until one is recorded, and the expectations raised on it, in raise order.
type TaskOrigin struct {
	TaskID       string        `json:"taskId"`
	Outcome      string        `json:"outcome,omitempty"`
	Expectations []expect.View `json:"expectations"`
}

// TaskOriginShown is one origin task.
type TaskOriginShown struct {
	Doc
	Task TaskOrigin `json:"task"`
}

// ExpectationShown is one expectation.
type ExpectationShown struct {
	Doc
	Expectation expect.View `json:"expectation"`
}

// ExpectationList is the expectations a filter selected.
type ExpectationList struct {
	Doc
	Expectations []expect.View `json:"expectations"`
}

// LapseFilter selects recorded lapses; zero fields match everything.
type LapseFilter struct {
	Since         time.Time // noticed at or after
	ExpectationID string
}

// LapsesOf is the selection the read document q names, refused naming
// since when it is not a time.
func LapsesOf(q api.LapsesQuery) (LapseFilter, error) {
	t, err := q.Noticed()
	return LapseFilter{Since: t, ExpectationID: q.ExpectationID}, err
}

// Query is the read document that selects what f does.
func (f LapseFilter) Query() api.LapsesQuery {
	return api.LapsesQueryOf(f.Since, f.ExpectationID)
}

// LapseList is the lapses a filter selected.
type LapseList struct {
	Doc
	Lapses []expect.LapseView `json:"lapses"`
}

// The expectation methods' names, what a request id is bound to with the
// document.
const (
	MethodRaiseExpectation     = "RaiseExpectation"
	MethodSupersedeExpectation = "SupersedeExpectation"
	MethodRecordFact           = "RecordFact"
	MethodWithdrawExpectation  = "WithdrawExpectation"
	MethodRecordTaskOutcome    = "RecordTaskOutcome"
	MethodCommitLapse          = "CommitLapse"
)

// ReadExpectDoc reads an expectation response document (a replayed one,
// or a server's answer) into its result, whose members carry the
// document's names.
func ReadExpectDoc[T any, P interface {
	*T
	SetDoc(Doc)
}](what string, doc Doc) (T, error) {
	var out T
	if len(bytes.TrimSpace(doc.JSON)) == 0 {
		// A write that appended nothing and rendered nothing (a lapse
		// recorded already) answers an empty document: the zero result.
		P(&out).SetDoc(doc)
		return out, nil
	}
	if err := json.Unmarshal(doc.JSON, &out); err != nil {
		return out, fmt.Errorf("%s response: %w", what, err)
	}
	P(&out).SetDoc(doc)
	return out, nil
}

// SetDoc sets the document a result embeds (ReadExpectDoc's, and an
// implementation's rendering a result it made).
func (d *Doc) SetDoc(doc Doc) { *d = doc }

// ReadExpectationWritten reads the response of a raise, an extension, a
// withdrawal or a lapse.
func ReadExpectationWritten(doc Doc) (ExpectationWritten, error) {
	return ReadExpectDoc[ExpectationWritten]("expectation write", doc)
}

// ReadFactRecorded reads the response of a fact.
func ReadFactRecorded(doc Doc) (FactRecorded, error) { return ReadExpectDoc[FactRecorded]("fact", doc) }

// ReadTaskOutcomeRecorded reads the response of a task outcome.
func ReadTaskOutcomeRecorded(doc Doc) (TaskOutcomeRecorded, error) {
	return ReadExpectDoc[TaskOutcomeRecorded]("task outcome", doc)
}

// ReadExpectationShown reads the document of one expectation.
func ReadExpectationShown(doc Doc) (ExpectationShown, error) {
	return ReadExpectDoc[ExpectationShown]("expectation", doc)
}

// ReadExpectationList reads the document of a list of expectations.
func ReadExpectationList(doc Doc) (ExpectationList, error) {
	return ReadExpectDoc[ExpectationList]("expectations", doc)
}

// ReadTaskOriginShown reads the document of an origin task.
func ReadTaskOriginShown(doc Doc) (TaskOriginShown, error) {
	return ReadExpectDoc[TaskOriginShown]("task origin", doc)
}

// ReadLapseList reads the document of a list of lapses.
func ReadLapseList(doc Doc) (LapseList, error) { return ReadExpectDoc[LapseList]("lapses", doc) }
