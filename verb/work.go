package verb

import (
	"tally/api"
	"tally/service"
)

// The work verbs: what a seat can take now.
const WorkReady = "work.ready"

func workVerbs() []Verb {
	return []Verb{
		read(Verb{Name: WorkReady, Family: "work", Summary: "What a seat (seat, default the authenticated identity) can take now: pool claims whose dependencies hold and promises it owes that wait on no antecedent, by priority then deadline, each with the command that takes it (now)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: SessionPath + "/ready"}, MCP: MCP{Tool: "tally_ready"}, CLI: "ready"},
			query(func(q api.ReadyQuery) string { return q.Seat }), service.Service.Ready),
	}
}
