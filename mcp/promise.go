package mcp

import (
	"context"

	"tally/api"
	"tally/promise"
	"tally/service"
)

func promiseTools() []tool {
	return []tool{
		write("tally_promise_declare", "Declare a promise",
			"Declare a promise you (the caller) owe `to` until a deadline (RFC 3339 or a duration such as 2h). Refused when the id is taken or `on` names no promise.",
			appends, service.Service.DeclarePromise),
		write("tally_promise_amend", "Move a promise's deadline",
			"Move an open promise's deadline. Only the debtor may amend; a resolved promise cannot be.",
			appends, service.Service.AmendPromise).needs("id", "until"),
		write("tally_promise_resolve", "Resolve a promise",
			"End a promise for good: as satisfied (with evidence) or cancelled (with a reason) by the debtor, or released by the creditor. Refused for anyone else, or once resolved.",
			destructive, service.Service.ResolvePromise).needs("id", "as"),
		write("tally_promise_assess", "Assess a promise",
			"Record your judgment of a promise (violated by default) beside it; it never changes the promise's state. Refused when the id names no promise.",
			appends, service.Service.AssessPromise).needs("id"),
		read("tally_promise_show", "Show a promise",
			"One promise with its state, deadlines (horizons) and assessments. Refused (not_found) when the id names no promise.",
			plain(func(d *api.PromiseRef) string { return d.ID }), service.Service.Promise),
		read("tally_promise_list", "List promises",
			"Promises by state (open, overdue, all), debtor and creditor, in declaration order.",
			plain((*api.PromiseQuery).Filter), service.Service.ListPromises),
		read("tally_promise_owed", "What a seat owes",
			"The open promises a seat owes (default: you), as tally_promise_list answers them; each with overdue and its deadline.",
			plain(func(d *api.OwedQuery) api.OwedQuery { return *d }),
			func(svc service.Service, ctx context.Context, c service.Call, q api.OwedQuery) (service.PromiseList, error) {
				return svc.ListPromises(ctx, c, q.Filter(c.Actor))
			}),
		read("tally_promise_graph", "The promise graph",
			"Every promise of the session in any state: its antecedent (on) is its edge, by and to say who owes whom.",
			plain(func(*api.SessionQuery) promise.Filter { return promise.Filter{State: "all"} }), service.Service.ListPromises),
	}
}
