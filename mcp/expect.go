package mcp

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"

	"tally/api"
	"tally/service"
)

// expectationID is the id argument of the verbs REST addresses by path.
var expectationID = extra{name: "expectationId", schema: &jsonschema.Schema{Type: "string", Description: "the expectation"}}

func expectTools() []tool {
	return []tool{
		write("tally_expect_raise", "Raise an expectation",
			"State what you expect of the world by when (dueAt), on a subject, for the timekeeper to check; basis says why (observed, contract, declared). Refused without subject, dueAt or basis.",
			appends, service.Service.RaiseExpectation).needs("subject", "dueAt", "basis"),
		write("tally_expect_supersede", "Extend an expectation",
			"Raise the extension of an open expectation (supersedes): the terms left out are inherited. Only its raiser may, within the lineage bound.",
			appends, func(svc service.Service, ctx context.Context, c service.Call, d api.ExpectRaise) (service.ExpectationWritten, error) {
				return svc.SupersedeExpectation(ctx, c, d.Supersedes, d)
			}).needs("supersedes"),
		write("tally_expect_fact", "Record a fact",
			"Record an observed fact by key on a subject; an open expectation whose satisfiedBy.factKey matches exactly is satisfied.",
			appends, service.Service.RecordFact).needs("factKey", "subject"),
		writeAt("tally_expect_withdraw", "Withdraw an expectation",
			"Withdraw an open expectation, for good. Only its raiser, the timekeeper or a person may.",
			destructive, expectationID, service.Service.WithdrawExpectation).needs(),
		read("tally_expect_show", "Show an expectation",
			"One expectation with its state, due time and lapses. Refused (not_found) for an unknown id.",
			plain(func(d *api.ExpectationRef) string { return d.ExpectationID }), service.Service.Expectation),
		read("tally_expect_list", "List expectations",
			"Expectations by state, kind, subject and origin, in the order raised.",
			plain((*api.ExpectQuery).Filter), service.Service.ListExpectations),
		read("tally_expect_lapses", "Recorded lapses",
			"The lapses the timekeeper recorded (overdue, skipped, stalled), since a time or of one expectation.",
			func(q *api.LapsesQuery) (service.LapseFilter, error) { return service.LapsesOf(*q) }, service.Service.Lapses),
	}
}
