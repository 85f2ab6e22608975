package mcp

import "slices"

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
			act("declare", "Promise something to a seat by a deadline."),
			act("amend", "Move your open promise's deadline."),
			act("assess", "Judge a promise violated; its state stays."),
			act("resolve", "End it for good, as resolution says.").renamed("resolution", "as"),
		),
		group("tally_promise_read", "Read promises",
			"Promises as of now.", slices.Concat(promiseArgs(), reads),
			act("show", "One promise, its deadlines and assessments."),
			act("list", "By state and party."),
			act("owed", "A seat's open promises."),
			act("graph", "Every promise; on is its edge."),
		),
	}
}
