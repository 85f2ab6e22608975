package a2atask

import (
	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Card is what an agent card of a tally session says beyond the mapping:
// where the session's agent is and what its server offers.
type Card struct {
	URIs URIs
	// Base is the server's URL (scheme://host[:port]), Tenant and Session
	// the session whose agent the card is.
	Base, Tenant, Session string
	// Root is the server's own card (its default session's), which says
	// where every other session's agent is.
	Root bool
	// LapseDelivery: the server's timekeeper sends lapses to the agents that
	// raised the expectations.
	LapseDelivery bool
}

// AgentCard is the card: the session's two interfaces (JSON-RPC and
// HTTP+JSON), each family's extension with the key its records ride under,
// its actions and how its tasks map, and the bearer scheme.
func (c Card) AgentCard() *a2a.AgentCard {
	u := c.URIs.WithDefaults()
	sess := c.Base + "/v1/tenants/" + c.Tenant + "/sessions/" + c.Session
	events := sess + "/events"
	ext := func(uri string, f Family, desc string, aliases []string, extra map[string]any) a2a.AgentExtension {
		params := map[string]any{
			"family":      string(f),
			"keepsTime":   true,
			"metadataKey": RecordKey(uri, f),
			"events":      events,
		}
		if len(aliases) > 0 {
			params["aliases"] = aliases
		}
		for k, v := range extra {
			params[k] = v
		}
		return a2a.AgentExtension{URI: uri, Description: desc, Required: false, Params: params}
	}
	jsonrpc := a2a.NewAgentInterface(sess+"/a2a", a2a.TransportProtocolJSONRPC)
	rest := a2a.NewAgentInterface(sess+"/a2a/rest", a2a.TransportProtocolHTTPJSON)
	desc := "tally: a durable, hash-chained ledger of obligations between agents. " +
		"Activate a family's extension in the A2A-Extensions header and carry its record in message metadata under the extension URI."
	if c.Root {
		desc += " This card is the agent of session " + c.Tenant + "/" + c.Session + ". Every tally session is an agent of its own: " +
			c.Base + "/v1/tenants/{tenant}/sessions/{session}/a2a, with its card at …/a2a/.well-known/agent-card.json."
	}
	return &a2a.AgentCard{
		Name:                "tally",
		Description:         desc,
		Version:             "1",
		SupportedInterfaces: []*a2a.AgentInterface{jsonrpc, rest},
		Capabilities: a2a.AgentCapabilities{Extensions: []a2a.AgentExtension{
			ext(u.Promise, FamilyPromise, "Promises: declare, amend, resolve (satisfied, cancelled, released) and assess. Tasks map satisfied → COMPLETED, cancelled → REJECTED, released → CANCELED; overdue and violated stay in the record.",
				[]string{PinkiPromiseURI}, map[string]any{
					"actions":       PromiseActions().Names(),
					"assessmentsAt": events,
				}),
			ext(u.Claim, FamilyClaim, "Claims of work with acceptance requirements (proof of work): create, post, cancel, revoke, supersede, take or adopt the receipt, progress, close/post/receive testaments, begin/report checks, publish and receive artifacts. "+
				"The record's \"action\" picks the verb (default create); its other members are the HTTP JSON API's body for that verb, \"claim\" defaulting to the message's taskId. The caller's token is the acting identity: the creator is the claimant. "+
				"artifact.publish takes the bytes as the message's one file part with raw bytes, and so may check.report its evidence (published in the verdict's own write); reading bytes back is the HTTP JSON API's (GET …/claims/{claim}/artifacts/{artifact}). "+
				"A claim is a task with the claim's id: Generated, Posted → SUBMITTED; Received … Validating → WORKING; Satisfied → COMPLETED with each slot's witness and the received testament as artifacts; "+
				"ReceiptFailed or a refused response → REJECTED; Cancelled, Revoked, Superseded → CANCELED; PostFailed, TestamentGenerationFailed, Validation{Incomplete,Failed,Errored}, Expired, DependencyFailed, Deadlocked → FAILED with the reason; overdue stays in the record. CancelTask cancels as the claimant.",
				nil, map[string]any{
					"actions":      ClaimActions().Names(),
					"artifactURLs": sess + "/claims/{claim}/artifacts/{artifact}",
				}),
			ext(u.Expect, FamilyExpect, "Expectations, facts and lapses; the server's watcher keeps time. Raise with the draft's expectation document (origin: the message's task and context; replyTo: where lapses go), record facts, withdraw, or report an origin task's outcome. Each lapse goes back to the raising agent as a new message in the origin context, referencing the origin task, its messageId the lapse id. CancelTask on an origin task withdraws its expectations.",
				[]string{ExpectationsDraftURI}, map[string]any{
					"actions":       ExpectActions().Names(),
					"lapseDelivery": c.LapseDelivery,
				}),
		}},
		DefaultInputModes:  []string{"application/json", "text/plain"},
		DefaultOutputModes: []string{"application/json", "text/plain"},
		Skills: []a2a.AgentSkill{{
			ID: "promise", Name: "Promise ledger", Tags: []string{"promise", "obligation", "ledger"},
			Description: "Record a promise between agents and track it to satisfaction, cancellation or release.",
		}, {
			ID: "claim", Name: "Proof-of-work ledger", Tags: []string{"claim", "proof-of-work", "acceptance", "ledger"},
			Description: "Issue a claim of work with required outputs and checks; the ledger derives acceptance from receipts, testaments and verdicts bound to exact artifacts.",
		}},
		SecuritySchemes:      a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "a tally token: its participant is the caller's identity"}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"bearer": a2a.SecuritySchemeScopes{}}},
	}
}
