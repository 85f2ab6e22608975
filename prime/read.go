package prime

import (
	"context"
	"sort"
	"time"

	"tally/api"
	"tally/claim"
	"tally/expect"
	"tally/promise"
	"tally/rest"
	"tally/service"
)

// What prime reads through the Service: the seat's promises, claims and
// expectations.

// Data is what prime reads from the ledger.
type Data struct {
	Owes       []promise.View // open promises the seat owes
	OwedLate   []promise.View // overdue promises owed to the seat by others
	Claims     []claim.View   // open or unanswered failed claims it takes part in, at most ClaimsMax
	ClaimsMore int            // open claims that were not examined
	FailedMore int            // failed claims that were not examined
	Expects    []expect.View  // open expectations (all raisers; filtered later)
}

// failures are the terminal states in which a claim failed: its claimant
// answers each with a successor claim (or lets it go).
var failures = []claim.Status{
	claim.PostFailed, claim.ReceiptFailed, claim.TestamentGenerationFailed,
	claim.ValidationIncomplete, claim.ValidationFailed, claim.ValidationErrored,
	claim.Expired, claim.DependencyFailed, claim.Deadlocked,
}

// Read reads what prime shows through svc, in c's session at c.Now: what
// the seat owes, what is owed to it late, the open claims it takes part in
// and the failed ones not yet answered by a successor (the most pressing
// ClaimsMax of them, whole) and the open expectations. A session without
// a log reads as empty.
func Read(ctx context.Context, svc service.Service, c service.Call, seat string) (Data, error) {
	var d Data
	d, err := read(ctx, svc, c, seat)
	if err != nil && rest.Refuse(err).Code == string(service.CodeNoSuchSession) {
		return Data{}, nil
	}
	return d, err
}

func read(ctx context.Context, svc service.Service, c service.Call, seat string) (Data, error) {
	var d Data
	owes, err := svc.ListPromises(ctx, c, api.OwedQuery{}.Filter(seat))
	if err != nil {
		return d, err
	}
	late, err := svc.ListPromises(ctx, c, promise.Filter{State: "overdue", To: seat})
	if err != nil {
		return d, err
	}
	d.Owes, d.OwedLate = owes.Promises, late.Promises
	open, err := svc.ListClaims(ctx, c, claim.Filter{Open: true, Participant: seat})
	if err != nil {
		return d, err
	}
	failed, err := svc.ListClaims(ctx, c, claim.Filter{States: failures, Participant: seat})
	if err != nil {
		return d, err
	}
	list := open.Claims
	sortClaimSummaries(list)
	for i, s := range list {
		if i == ClaimsMax {
			d.ClaimsMore = len(list) - i
			break
		}
		shown, err := svc.Claim(ctx, c, s.Claim)
		if err != nil {
			return d, err
		}
		d.Claims = append(d.Claims, shown.Claim)
	}
	// A failed claim matters to its claimant and respondent only, until a
	// successor answers it: the newest are examined, a bounded number.
	examined := 0
	for i := len(failed.Claims) - 1; i >= 0; i-- {
		s := failed.Claims[i]
		if s.Claimant != seat && s.Respondent != seat {
			continue
		}
		if examined == FailedMax {
			d.FailedMore++
			continue
		}
		examined++
		shown, err := svc.Claim(ctx, c, s.Claim)
		if err != nil {
			return d, err
		}
		if len(shown.Claim.Successors) == 0 {
			d.Claims = append(d.Claims, shown.Claim)
		}
	}
	expects, err := svc.ListExpectations(ctx, c, expect.Filter{State: "open"})
	if err != nil {
		return d, err
	}
	d.Expects = expects.Expectations
	return d, nil
}

// sortClaimSummaries puts the claims most pressing first: overdue, then by
// deadline (none last), then in creation order.
func sortClaimSummaries(list []claim.Summary) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.Overdue != b.Overdue {
			return a.Overdue
		}
		if (a.Deadline == "") != (b.Deadline == "") {
			return a.Deadline != ""
		}
		if a.Deadline != b.Deadline {
			ta, _ := time.Parse(time.RFC3339Nano, a.Deadline)
			tb, _ := time.Parse(time.RFC3339Nano, b.Deadline)
			if !ta.Equal(tb) {
				return ta.Before(tb)
			}
		}
		return a.CreatedSeq < b.CreatedSeq
	})
}
