package timekeeper

import (
	"fmt"
	"time"

	"tally/duequeue"
	"tally/service"
)

// Recipient says who a ladder rung notifies. Stored in notices: do not rename.
type Recipient string

const (
	Debtor   Recipient = "debtor"
	Creditor Recipient = "creditor"
)

// Rung is one step of a promise's escalation ladder: a notice to To, After
// the promise's deadline.
type Rung struct {
	After time.Duration
	To    Recipient
}

// Ladder builds the escalation ladder: the debtor at the deadline, the
// debtor again after each of reminders, then the creditor after escalate
// (zero: at the last reminder).
func Ladder(reminders []time.Duration, escalate time.Duration) []Rung {
	rungs := []Rung{{0, Debtor}}
	last := time.Duration(0)
	for _, d := range reminders {
		rungs = append(rungs, Rung{d, Debtor})
		last = max(last, d)
	}
	if escalate <= 0 {
		escalate = last
	}
	return append(rungs, Rung{escalate, Creditor})
}

// NoticeKey is the journal and idempotency key of a promise notice: the
// promise, its horizon (1 for the declared deadline, n+1 after n amends)
// and the rung.
func NoticeKey(promiseID string, horizon, rung int) string {
	return fmt.Sprintf("ntc:%s:h%d:r%d", promiseID, horizon, rung)
}

// step is where one promise stands on its ladder.
type step struct {
	horizon  int       // len(Horizons) when tracked
	deadline time.Time // the deadline of that horizon
	next     int       // the first rung not yet delivered
}

// ladders tracks every owed, unresolved promise's next rung in a deadline
// index, so finding the due notices costs O(k log n) and nothing when none is
// due. It is a cache of the ledger and the journal: track rebuilds a
// promise's entry from both.
//
// Invariant: idx holds id exactly when at holds id, due at
// at[id].deadline + rungs[at[id].next].After.
type ladders struct {
	rungs []Rung
	idx   *duequeue.Index[string]
	at    map[string]step
	// waiting maps an antecedent id to the conditional promises that wait on
	// it, so the antecedent's records re-track them.
	waiting map[string]map[string]struct{}
}

func newLadders(rungs []Rung) *ladders {
	return &ladders{
		rungs:   rungs,
		idx:     duequeue.New(func(a, b string) bool { return a < b }),
		at:      map[string]step{},
		waiting: map[string]map[string]struct{}{},
	}
}

// trackMax bounds the promises one track call visits through waiting lists.
const trackMax = 1 << 20

// promiseOf reads a promise as the session holds it; false when it holds
// none of that id.
type promiseOf func(id string) (service.PromiseTime, bool)

// track re-reads promise id through get and sent, and re-tracks the
// promises waiting on it whose standing may follow it.
func (ls *ladders) track(get promiseOf, sent func(string) bool, id string) {
	work := []string{id}
	seen := map[string]bool{}
	for n := 0; len(work) > 0 && n < trackMax; n++ {
		cur := work[len(work)-1]
		work = work[:len(work)-1]
		if seen[cur] {
			continue
		}
		seen[cur] = true
		ls.trackOne(get, sent, cur)
		for dep := range ls.waiting[cur] {
			work = append(work, dep)
		}
	}
}

// waiters is id and every promise waiting on it, transitively, as the
// ladders know them now: what track(id) may read.
func (ls *ladders) waiters(id string, into map[string]struct{}) {
	work := []string{id}
	for n := 0; len(work) > 0 && n < trackMax; n++ {
		cur := work[len(work)-1]
		work = work[:len(work)-1]
		if _, seen := into[cur]; seen {
			continue
		}
		into[cur] = struct{}{}
		for dep := range ls.waiting[cur] {
			work = append(work, dep)
		}
	}
}

func (ls *ladders) trackOne(get promiseOf, sent func(string) bool, id string) {
	p, ok := get(id)
	if !ok {
		ls.drop(id)
		return
	}
	if p.On != "" {
		// Remove it from any waiting list; re-added below while conditional.
		if w := ls.waiting[p.On]; w != nil {
			delete(w, id)
			if len(w) == 0 {
				delete(ls.waiting, p.On)
			}
		}
	}
	switch p.Standing {
	case service.StandingOwed:
	case service.StandingConditional:
		ls.drop(id)
		w := ls.waiting[p.On]
		if w == nil {
			w = map[string]struct{}{}
			ls.waiting[p.On] = w
		}
		w[id] = struct{}{}
		return
	default: // resolved or expired: notices stop
		ls.drop(id)
		return
	}
	s := step{horizon: p.Horizon, deadline: p.Deadline}
	for s.next < len(ls.rungs) && sent(NoticeKey(id, s.horizon, s.next)) {
		s.next++
	}
	if s.next == len(ls.rungs) {
		ls.drop(id)
		return
	}
	ls.at[id] = s
	ls.idx.Set(id, s.deadline.Add(ls.rungs[s.next].After))
}

func (ls *ladders) drop(id string) {
	delete(ls.at, id)
	ls.idx.Delete(id)
}

// due returns up to max promises with a rung due strictly before now.
func (ls *ladders) due(now time.Time, max int) []string {
	var ids []string
	ls.idx.Due(now.Add(-time.Nanosecond), func(id string, _ time.Time) bool {
		ids = append(ids, id)
		return len(ids) < max
	})
	return ids
}

// pendingNotice is one rung owed now.
type pendingNotice struct {
	key     string
	promise string
	horizon int
	rung    int
	dueAt   time.Time
}

// owed returns the rungs of id due strictly before now and not yet sent, in
// ladder order. A timekeeper that was down sends every rung it missed, each
// once, stamped with the instant it fell due.
func (ls *ladders) owed(id string, now time.Time, sent func(string) bool) []pendingNotice {
	s, ok := ls.at[id]
	if !ok {
		return nil
	}
	var out []pendingNotice
	for r := s.next; r < len(ls.rungs); r++ {
		due := s.deadline.Add(ls.rungs[r].After)
		if !due.Before(now) {
			break
		}
		key := NoticeKey(id, s.horizon, r)
		if sent(key) {
			continue
		}
		out = append(out, pendingNotice{key: key, promise: id, horizon: s.horizon, rung: r, dueAt: due})
	}
	return out
}
