package verb

import (
	"net/http"

	"tally/api"
	"tally/service"
)

// The expectation family's verbs.
const (
	ExpectRaise       = "expect.raise"
	ExpectList        = "expect.list"
	ExpectShow        = "expect.show"
	ExpectWithdraw    = "expect.withdraw"
	ExpectSupersede   = "expect.supersede"
	ExpectFact        = "expect.fact"
	ExpectTaskOutcome = "expect.task.outcome"
	ExpectTask        = "expect.task"
	ExpectLapses      = "expect.lapses"
	ExpectLapse       = "expect.lapse"
)

// TaskRef names an origin task (the tasks route's {task}).
type TaskRef struct {
	TaskID string `json:"taskId"`
}

func expectVerbs() []Verb {
	e := SessionPath + "/expectations"
	const fam, tool, reader = "expect", "tally_expect", "tally_expect_read"
	return []Verb{
		write(Verb{Name: ExpectRaise, Family: fam, Summary: "Raise an expectation as the authenticated identity", Effect: Write, Party: "by",
			HTTP: HTTP{Method: "POST", Path: e, Status: http.StatusCreated, Body: "ExpectRaise"}, A2A: "raise",
			MCP: MCP{Tool: tool, Action: "raise"}, CLI: "expect raise", Command: service.MethodRaiseExpectation},
			service.Service.RaiseExpectation),
		read(Verb{Name: ExpectShow, Family: fam, Summary: "One expectation: state, projected, current and actual times, lapses, lineage", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: e + "/{id}", Members: []string{"expectationId"}}, MCP: MCP{Tool: reader, Action: "show"}, CLI: "expect show"},
			query(func(d api.ExpectationRef) string { return d.ExpectationID }), service.Service.Expectation),
		read(Verb{Name: ExpectList, Family: fam, Summary: "List expectations (state, kind, subject=TYPE:ID, task, context)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: e}, MCP: MCP{Tool: reader, Action: "list"}, CLI: "expect ls"},
			query(api.ExpectQuery.Filter), service.Service.ListExpectations),
		writeOn(Verb{Name: ExpectSupersede, Family: fam, Summary: "Extend an expectation: terms not given are inherited (past the lineage bound: person role only)", Effect: Write,
			HTTP: HTTP{Method: "POST", Path: e + "/{id}/supersede", Status: http.StatusCreated, Body: "ExpectRaise"},
			MCP:  MCP{Tool: tool, Action: "supersede"}, CLI: "expect supersede", Command: service.MethodSupersedeExpectation},
			service.Service.SupersedeExpectation),
		write(Verb{Name: ExpectFact, Family: fam, Summary: "Record an observed fact; expectations with its key are satisfied", Effect: Write,
			HTTP: HTTP{Method: "POST", Path: SessionPath + "/facts", Status: http.StatusCreated, Body: "ExpectFact"}, A2A: "fact", A2ARank: 1,
			MCP: MCP{Tool: tool, Action: "fact"}, CLI: "fact", Command: service.MethodRecordFact},
			service.Service.RecordFact),
		writeOn(Verb{Name: ExpectWithdraw, Family: fam, Summary: "Withdraw an open expectation (its raiser or a person)", Effect: Destructive,
			HTTP: HTTP{Method: "POST", Path: e + "/{id}/withdraw", Body: "ExpectWithdraw"}, A2A: "withdraw", A2ARank: 2,
			MCP: MCP{Tool: tool, Action: "withdraw"}, CLI: "expect withdraw", Command: service.MethodWithdrawExpectation},
			service.Service.WithdrawExpectation),
		writeOn(Verb{Name: ExpectTaskOutcome, Family: fam, Summary: "Record an origin task's outcome (cancelled or failed withdraws its expectations)", Effect: Write,
			HTTP: HTTP{Method: "POST", Path: SessionPath + "/tasks/{task}/outcome", Body: "ExpectTaskOutcome"}, A2A: "outcome", A2ARank: 3,
			CLI: "task outcome", Command: service.MethodRecordTaskOutcome},
			service.Service.RecordTaskOutcome),
		read(Verb{Name: ExpectTask, Family: fam, Summary: "An origin task: its outcome once recorded and the expectations raised on it", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: SessionPath + "/tasks/{task}", Members: []string{"taskId"}}},
			query(func(d TaskRef) string { return d.TaskID }), service.Service.TaskOrigin),
		read(Verb{Name: ExpectLapses, Family: fam, Summary: "Recorded lapses in log order (since=RFC 3339, expectation=ID)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: SessionPath + "/lapses"}, MCP: MCP{Tool: reader, Action: "lapses"}, CLI: "lapses"},
			func(q api.LapsesQuery, _ service.Call) (service.LapseFilter, error) { return service.LapsesOf(q) }, service.Service.Lapses),
		write(Verb{Name: ExpectLapse, Family: fam, Summary: "Commit a lapse (timekeeper role only)", Effect: Write,
			HTTP: HTTP{Method: "POST", Path: SessionPath + "/lapses", Status: http.StatusCreated, Body: "ExpectLapse"}, Command: service.MethodCommitLapse},
			service.Service.CommitLapse),
	}
}
