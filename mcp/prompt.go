package mcp

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/api"
	"tally/claim"
	"tally/instant"
	"tally/promise"
)

// promptResume is the prompt a host offers when a session of a seat
// starts: what the seat owes, overdue first, what is owed to it late and
// the open claims it is a party to, each with the id and the tool to act.
const promptResume = "resume_seat"

// promptItemsMax bounds the promises the prompt lists in each part; the
// rest are counted, with the tool that lists them.
const promptItemsMax = 50

func (s *Server) addPrompts() {
	s.mcp.AddPrompt(&sdk.Prompt{Name: promptResume, Title: "Resume this seat",
		Description: "What the seat owes (overdue first), what is owed to it late and the open claims it is a party to, with the ids and the tools to act.",
		Arguments: []*sdk.PromptArgument{
			{Name: "seat", Description: "the seat (default: the identity this server acts as)"},
			{Name: argSession, Description: "TENANT/SESSION, or SESSION in the caller's tenant (default: the server's)"},
		}}, s.resume)
}

func (s *Server) resume(ctx context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
	who, err := s.cfg.Identify(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	seat := req.Params.Arguments["seat"]
	if seat == "" {
		seat = who.Actor
	}
	if seat == "" {
		return nil, fmt.Errorf("seat: required: this server acts as no identity")
	}
	ctx, c, release, err := s.readCall(ctx, who, req.Params.Arguments[argSession])
	if err != nil {
		return nil, err
	}
	defer release()
	tenant, session, now := c.Tenant, c.Session, c.Now
	owes, err := s.cfg.Service.ListPromises(ctx, c, api.OwedQuery{}.Filter(seat))
	if err != nil && !noSession(err) {
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(errorDocument(err))))
	}
	late, err := s.cfg.Service.ListPromises(ctx, c, promise.Filter{State: "overdue", To: seat})
	if err != nil && !noSession(err) {
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(errorDocument(err))))
	}
	claims, err := s.cfg.Service.ListClaims(ctx, c, claim.Filter{Open: true, Participant: seat})
	if err != nil && !noSession(err) {
		return nil, fmt.Errorf("%s", strings.TrimSpace(string(errorDocument(err))))
	}
	text := resumeText(seat, tenant+"/"+session, now, owes.Promises, late.Promises, claims.Claims)
	return &sdk.GetPromptResult{Description: "Resume " + seat,
		Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: text}}}}, nil
}

// resumeText lists what seat owes, overdue first (most overdue first), then
// by deadline, then what is owed to it late, oldest first, then the open
// claims it is a party to, overdue first, in creation order.
func resumeText(seat, where string, now time.Time, owes, late []promise.View, claims []claim.Summary) string {
	sort.SliceStable(owes, func(i, j int) bool {
		if owes[i].Overdue != owes[j].Overdue {
			return owes[i].Overdue
		}
		return owes[i].Until.Before(owes[j].Until)
	})
	sort.SliceStable(late, func(i, j int) bool { return late[i].Until.Before(late[j].Until) })
	var b strings.Builder
	fmt.Fprintf(&b, "You are resuming the seat %s in session %s, as of %s. The ledger holds what it agreed to; act on it with the tally tools.\n", seat, where, instant.Format(now))
	overdue := 0
	for _, v := range owes {
		if v.Overdue {
			overdue++
		}
	}
	fmt.Fprintf(&b, "\n## What %s owes: %d open, %d overdue\n", seat, len(owes), overdue)
	for i, v := range owes {
		if i == promptItemsMax {
			fmt.Fprintf(&b, "… and %d more: tally_promise_read {\"action\":\"list\",\"by\":%q}\n", len(owes)-i, seat)
			break
		}
		when := "due " + instant.Format(v.Until)
		switch {
		case v.State == promise.Conditional:
			when = "conditional on " + v.On
		case v.Overdue:
			when = "OVERDUE since " + instant.Format(v.Until)
		}
		fmt.Fprintf(&b, "- id %s, to %s, %s: %s\n", v.ID, v.To, when, v.Promise)
	}
	if len(owes) > 0 {
		b.WriteString("Act: tally_promise {\"action\":\"resolve\",\"id\":ID,\"resolution\":\"satisfied\",\"evidence\":[REF]} when done, {\"action\":\"resolve\",\"id\":ID,\"resolution\":\"cancelled\",\"reason\":TEXT} when it will not be; {\"action\":\"amend\",\"id\":ID,\"until\":WHEN} to move a deadline.\n")
	}
	fmt.Fprintf(&b, "\n## Owed to %s, late: %d\n", seat, len(late))
	for i, v := range late {
		if i == promptItemsMax {
			fmt.Fprintf(&b, "… and %d more: tally_promise_read {\"action\":\"list\",\"state\":\"overdue\",\"to\":%q}\n", len(late)-i, seat)
			break
		}
		fmt.Fprintf(&b, "- id %s, by %s, overdue since %s: %s\n", v.ID, v.By, instant.Format(v.Until), v.Promise)
	}
	if len(late) > 0 {
		b.WriteString("Act: tally_promise {\"action\":\"resolve\",\"id\":ID,\"resolution\":\"released\"} to let one go; {\"action\":\"assess\",\"id\":ID,\"note\":TEXT} to record it as violated.\n")
	}
	sort.SliceStable(claims, func(i, j int) bool { return claims[i].Overdue && !claims[j].Overdue })
	fmt.Fprintf(&b, "\n## Open claims %s is a party to: %d\n", seat, len(claims))
	for i, c := range claims {
		if i == promptItemsMax {
			fmt.Fprintf(&b, "… and %d more: tally_claim_read {\"action\":\"list\",\"open\":true,\"participant\":%q}\n", len(claims)-i, seat)
			break
		}
		var roles []string
		for _, r := range []struct{ who, role string }{{c.Claimant, "claimant"}, {c.Respondent, "respondent"}, {c.Holder, "receipt holder"}} {
			if r.who == seat {
				roles = append(roles, r.role)
			}
		}
		if len(roles) == 0 {
			roles = append(roles, "evaluator")
		}
		due := ""
		if c.Deadline != "" {
			due = ", due " + c.Deadline
			if c.Overdue {
				due = ", OVERDUE since " + c.Deadline
			}
		}
		fmt.Fprintf(&b, "- claim %s (%s), %s as %s%s: %s\n", c.Claim, c.State, seat, strings.Join(roles, " and "), due, c.Work)
	}
	if len(claims) > 0 {
		b.WriteString("Act: tally_claim_read {\"action\":\"show\",\"claim\":ID} says what each waits for (why) and whose step it is.\n")
	}
	return b.String()
}
