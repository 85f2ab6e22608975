package mcp

import (
	"context"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"tally/api"
	"tally/instant"
	"tally/service"
)

// expectationID is the id argument of the verbs REST addresses by path.
var expectationID = extra{name: "expectationId", schema: &jsonschema.Schema{Type: "string"}}

func expectTools(now func() time.Time) []tool {
	// A raise's dueAt and horizon are read as the CLI reads them: an
	// instant, or a duration from now, this server's now (as a client's
	// clock, which the document keeps beside what was asked).
	relative := func(d api.ExpectRaise) api.ExpectRaise {
		d.RelativeTo = now().UTC()
		return d
	}
	return []tool{
		group("tally_expect", "Expectations",
			"What you expect by when, and the facts that satisfy it.", expectArgs(),
			write("raise", "", "Expect a fact by dueAt.",
				func(svc service.Service, ctx context.Context, c service.Call, d api.ExpectRaise) (service.ExpectationWritten, error) {
					return svc.RaiseExpectation(ctx, c, relative(d))
				}),
			write("supersede", "", "Extend yours, inheriting.",
				func(svc service.Service, ctx context.Context, c service.Call, d api.ExpectRaise) (service.ExpectationWritten, error) {
					return svc.SupersedeExpectation(ctx, c, d.Supersedes, relative(d))
				}),
			act("fact", "Record a fact; it satisfies its key's expectations."),
			writeAt("withdraw", "", "Raiser or a person: end it for good.",
				expectationID, service.Service.WithdrawExpectation),
		),
		group("tally_expect_read", "Read expectations",
			"Expectations as of now.", expectReadArgs(),
			act("show", "One expectation."),
			act("list", "By state, kind, subject, origin."),
			read("lapses", "", "Recorded lapses (overdue, skipped, stalled).",
				plain(func(q *api.LapsesQuery) api.LapsesQuery { return *q }),
				func(svc service.Service, ctx context.Context, c service.Call, q api.LapsesQuery) (service.LapseList, error) {
					if q.Since != "" {
						at := c.Now
						if at.IsZero() {
							at = now()
						}
						since, err := instant.Since("since", q.Since, at)
						if err != nil {
							return service.LapseList{}, err
						}
						q.Since = instant.Format(since)
					}
					f, err := service.LapsesOf(q)
					if err != nil {
						return service.LapseList{}, err
					}
					return svc.Lapses(ctx, c, f)
				}),
		),
	}
}
