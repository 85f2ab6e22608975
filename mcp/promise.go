package mcp

import (
	"context"
	"slices"

	"tally/api"
	"tally/promise"
	"tally/service"
)

func promiseTools() []tool {
	// The two tools' "state" differ: a judgment, and a selection.
	writes := []arg{{"state", "your judgment (default violated)", promiseAssessments(), nil}}
	reads := []arg{
		{"id", "promise id", nil, []string{"show"}},
		{"state", "which (default open)", promiseSelections(), nil},
		{"by", "only this debtor's", nil, nil},
		{"to", "only to this creditor", nil, nil},
		{"seat", "whose (default: you)", nil, nil},
	}
	return []tool{
		group("tally_promise", "Promises",
			"Promises you owe, and your judgment of any.", slices.Concat(promiseArgs(), writes),
			write("declare", "", "Promise something to a seat by a deadline.",
				service.Service.DeclarePromise),
			write("amend", "", "Move your open promise's deadline.",
				service.Service.AmendPromise),
			write("assess", "", "Judge a promise violated; its state stays.",
				service.Service.AssessPromise),
			write("resolve", "", "End it for good, as resolution says.",
				service.Service.ResolvePromise).renamed("resolution", "as"),
		),
		group("tally_promise_read", "Read promises",
			"Promises as of now.", slices.Concat(promiseArgs(), reads),
			read("show", "", "One promise, its deadlines and assessments.",
				plain(func(d *api.PromiseRef) string { return d.ID }), service.Service.Promise),
			read("list", "", "By state and party.",
				plain((*api.PromiseQuery).Filter), service.Service.ListPromises),
			read("owed", "", "A seat's open promises.",
				plain(func(d *api.OwedQuery) api.OwedQuery { return *d }),
				func(svc service.Service, ctx context.Context, c service.Call, q api.OwedQuery) (service.PromiseList, error) {
					return svc.ListPromises(ctx, c, q.Filter(c.Actor))
				}),
			read("graph", "", "Every promise; on is its edge.",
				plain(func(*api.SessionQuery) promise.Filter { return promise.Filter{State: promise.FilterAll} }), service.Service.ListPromises),
		),
	}
}
