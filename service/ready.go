package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"tally/api"
	"tally/claim"
	"tally/instant"
	"tally/promise"
	"tally/sessionname"
)

// Work is what a seat can take now.
type Work interface {
	// Ready lists, at c.Now, what seat (c.Actor when empty) can take now:
	// the posted claims nobody has taken that it may take (posted to a
	// pool it sits in, or naming it as respondent) whose DependsOn targets
	// are Satisfied and Awaits targets terminal, and the promises it owes
	// that wait on no antecedent; ordered by priority, then deadline (none
	// last), then the log's order, each with the command that takes it.
	Ready(ctx context.Context, c Call, seat string) (ReadyList, error)
}

// ReadyItem is one row of a ready list.
type ReadyItem struct {
	Kind     string   `json:"kind"` // claim | promise
	ID       string   `json:"id"`
	Priority int      `json:"priority"`           // 0 (highest) to 4
	Deadline string   `json:"deadline,omitempty"` // a claim's deadline, a promise's until
	Overdue  bool     `json:"overdue"`
	Text     string   `json:"text"` // a claim's work, a promise's text
	From     string   `json:"from"` // the claimant, the creditor
	Pooled   bool     `json:"pooled,omitempty"`
	Pool     []string `json:"pool,omitempty"`
	// Take is the command that takes it, as words, without the identity
	// or the session; Command is it as one shell line that runs verbatim
	// anywhere: with --session when it is not the default, and --as.
	Take    []string `json:"take"`
	Command string   `json:"command"`

	seq uint64 // the log's order, the last key
}

// ReadyList is a seat's ready list at Now.
type ReadyList struct {
	Doc
	Now   time.Time
	Seat  string
	Items []ReadyItem
}

// ReadyItems orders what seat can take (takeable claims and the promises
// it owes, owed and unresolved) by priority, then deadline, then the log's
// order, and gives each the command that takes it in session
// tenant/session. A pure function of its arguments.
func ReadyItems(tenant, session, seat string, claims []claim.Takeable, promises []promise.View, now time.Time) []ReadyItem {
	items := make([]ReadyItem, 0, len(claims)+len(promises))
	var keys []time.Time
	for _, c := range claims {
		it := ReadyItem{Kind: "claim", ID: c.Claim, Priority: c.Priority, Deadline: c.Deadline, Text: c.Work, From: c.Claimant,
			Pooled: c.Pooled, Pool: c.Pool, Take: []string{"tally", "receipt", "acquire", c.Claim}, seq: c.CreatedSeq}
		d := c.Due
		it.Overdue = !d.IsZero() && now.After(d)
		items, keys = append(items, it), append(keys, d)
	}
	for _, p := range promises {
		if p.By != seat || p.State != promise.Owed {
			continue
		}
		prio, _ := promise.MetaPriority(p.Meta)
		it := ReadyItem{Kind: "promise", ID: p.ID, Priority: prio, Deadline: instant.Format(p.Until), Overdue: p.Overdue,
			Text: p.Promise, From: p.To, Take: []string{"tally", "resolve", p.ID, "--satisfied", "--evidence", "REF"}, seq: p.Seq}
		items, keys = append(items, it), append(keys, p.Until)
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		x, y := &items[a], &items[b]
		if c := cmp.Compare(x.Priority, y.Priority); c != 0 {
			return c
		}
		dx, dy := keys[a], keys[b]
		switch {
		case dx.IsZero() != dy.IsZero():
			if dx.IsZero() {
				return 1
			}
			return -1
		case !dx.Equal(dy):
			return dx.Compare(dy)
		}
		return cmp.Compare(x.seq, y.seq)
	})
	out := make([]ReadyItem, len(items))
	for i, j := range idx {
		out[i] = items[j]
		out[i].Command = ShellCommand(out[i].Take, tenant, session, seat)
	}
	return out
}

// ShellCommand is words as one shell line that runs verbatim in any shell
// and directory that reaches the ledger: --session when tenant/session is
// not the default, and --as seat when seat is given.
func ShellCommand(words []string, tenant, session, seat string) string {
	out := make([]string, 0, len(words)+4)
	for _, w := range words {
		out = append(out, ShellWord(w))
	}
	if tenant != sessionname.DefaultTenant || session != sessionname.DefaultSession {
		out = append(out, "--session", ShellWord(tenant+"/"+session))
	}
	if seat != "" {
		out = append(out, "--as", ShellWord(seat))
	}
	return strings.Join(out, " ")
}

// ShellWord quotes s for a POSIX shell when it needs it.
func ShellWord(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// ReadyDoc is the ready list's document:
// {"now":…,"seat":…,"items":[…]}.
func ReadyDoc(now time.Time, seat string, items []ReadyItem) ([]byte, error) {
	if items == nil {
		items = []ReadyItem{}
	}
	b, err := json.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("ready: %w", err)
	}
	return api.Doc(api.M("now", api.S(instant.Format(now))), api.M("seat", api.S(seat)), api.M("items", b)), nil
}

// ReadReadyList reads a ready list's document.
func ReadReadyList(d Doc) (ReadyList, error) {
	var m struct {
		Now   time.Time   `json:"now"`
		Seat  string      `json:"seat"`
		Items []ReadyItem `json:"items"`
	}
	if err := json.Unmarshal(d.JSON, &m); err != nil {
		return ReadyList{}, fmt.Errorf("ready document: %w", err)
	}
	return ReadyList{Doc: d, Now: m.Now.UTC(), Seat: m.Seat, Items: m.Items}, nil
}
