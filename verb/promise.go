package verb

import (
	"net/http"

	"tally/api"
	"tally/promise"
	"tally/service"
)

// The promise family's verbs.
const (
	PromiseDeclare = "promise.declare"
	PromiseList    = "promise.list"
	PromiseShow    = "promise.show"
	PromiseAmend   = "promise.amend"
	PromiseResolve = "promise.resolve"
	PromiseAssess  = "promise.assess"
	// PromiseOwed and PromiseGraph are views of promise.list: no route
	// of their own (a client asks promise.list), a CLI verb and an MCP
	// action each.
	PromiseOwed  = "promise.owed"
	PromiseGraph = "promise.graph"
)

// SessionPath is the path every session's verbs are under.
const SessionPath = "/v1/tenants/{tenant}/sessions/{session}"

func promiseVerbs() []Verb {
	p := SessionPath + "/promises"
	return []Verb{
		write(Verb{Name: PromiseDeclare, Family: "promise", Summary: "Declare a promise as the authenticated debtor", Effect: Write, Party: "by",
			HTTP: HTTP{Method: "POST", Path: p, Status: http.StatusCreated, Body: "Declare"}, A2A: "declare",
			MCP: MCP{Tool: "tally_promise", Action: "declare"}, CLI: "promise", Command: service.MethodDeclarePromise},
			service.Service.DeclarePromise),
		read(Verb{Name: PromiseShow, Family: "promise", Summary: "One promise with its horizons and assessments (now)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: p + "/{id}", Members: []string{"id"}}, MCP: MCP{Tool: "tally_promise_read", Action: "show"}, CLI: "show"},
			query(func(d api.PromiseRef) string { return d.ID }), service.Service.Promise),
		read(Verb{Name: PromiseList, Family: "promise", Summary: "List promises (state=open|overdue|all, by, to, now)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: p}, MCP: MCP{Tool: "tally_promise_read", Action: "list"}, CLI: "ls"},
			query(api.PromiseQuery.Filter), service.Service.ListPromises),
		write(Verb{Name: PromiseAmend, Family: "promise", Summary: "Move the deadline (debtor only)", Effect: Write,
			HTTP: HTTP{Method: "POST", Path: p + "/{id}/amend", Body: "Amend", Members: []string{"id"}}, A2A: "amend", A2ARank: 1,
			MCP: MCP{Tool: "tally_promise", Action: "amend"}, CLI: "amend", Command: service.MethodAmendPromise},
			service.Service.AmendPromise),
		write(Verb{Name: PromiseAssess, Family: "promise", Summary: "Record the authenticated observer's judgment", Effect: Write, Party: "observer",
			HTTP: HTTP{Method: "POST", Path: p + "/{id}/assess", Body: "Assess", Members: []string{"id"}}, A2A: "assess", A2ARank: 3,
			MCP: MCP{Tool: "tally_promise", Action: "assess"}, CLI: "assess", Command: service.MethodAssessPromise},
			service.Service.AssessPromise),
		write(Verb{Name: PromiseResolve, Family: "promise", Summary: "Satisfy, cancel (debtor) or release (creditor)", Effect: Destructive,
			HTTP: HTTP{Method: "POST", Path: p + "/{id}/resolve", Body: "Resolve", Members: []string{"id"}}, A2A: "resolve", A2ARank: 2,
			MCP: MCP{Tool: "tally_promise", Action: "resolve"}, CLI: "resolve", Command: service.MethodResolvePromise},
			service.Service.ResolvePromise),
		read(Verb{Name: PromiseOwed, Family: "promise", Summary: "A seat's open promises (default: the caller's)", Effect: Read,
			MCP: MCP{Tool: "tally_promise_read", Action: "owed"}, CLI: "owed"},
			func(q api.OwedQuery, c service.Call) (promise.Filter, error) { return q.Filter(c.Actor), nil }, service.Service.ListPromises),
		read(Verb{Name: PromiseGraph, Family: "promise", Summary: "Every promise; on is its edge", Effect: Read,
			MCP: MCP{Tool: "tally_promise_read", Action: "graph"}, CLI: "graph"},
			query(func(api.SessionQuery) promise.Filter { return promise.Filter{State: promise.FilterAll} }), service.Service.ListPromises),
	}
}
