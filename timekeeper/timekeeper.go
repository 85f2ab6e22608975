// Package timekeeper is tally's timekeeper: the process that lets the passage of
// time produce recorded, attributable facts without any agent holding a
// clock. One Sweep, in this order:
//
//  1. folds what other processes appended (ledger.Refresh);
//  2. commits, as the timekeeper, every expectation withdrawal and lapse
//     due (ledger.Sweep, decided under the log's lock, so concurrent or
//     restarted timekeepers never record one twice);
//  3. commits the deadline fact of every claim whose deadline passed
//     (ledger.SweepClaims: Expired, or Deadlocked for a wait-cycle's victim);
//  4. for promises appends nothing to the ledger: it walks each overdue
//     promise's escalation ladder (debtor at the deadline, the debtor again
//     at each reminder, then the creditor) and sends the notices due;
//  5. delivers the notices and every lapse not yet delivered to the sinks
//     (stdout JSON lines, a command, a webhook), recording each delivery in
//     the journal beside the ledger, under the journal's file lock.
//
// Deliveries are at-least-once: a timekeeper killed between a delivery and its
// journal line sends it again on restart; the ledger's records are
// exactly-once.
package timekeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"tally/expect"
	"tally/instant"
	"tally/refuse"
	"tally/service"
)

// SchemaVersion is carried by every notice document.
const SchemaVersion = 1

// Notice kinds, as written in "kind". Stored in journals: do not rename.
const (
	KindLapse  = "lapse"
	KindNotice = "promise.notice"
)

// Config tunes a timekeeper. Start from DefaultConfig.
type Config struct {
	// Reminders are the debtor's reminders after a promise's deadline;
	// Escalate is when the creditor is told (zero: at the last reminder).
	Reminders []time.Duration
	Escalate  time.Duration
	// SweepMax bounds the records one ledger.Sweep commits; SweepRounds
	// bounds the ledger.Sweep calls of one Sweep.
	SweepMax    int
	SweepRounds int
	// ClaimMax bounds the claim deadline facts one Sweep commits.
	ClaimMax int
	// DeliverMax bounds the deliveries one Sweep attempts; the rest wait
	// for the next sweep.
	DeliverMax int
	// Sinks receive every notice; empty means nothing is delivered (the
	// CLI passes stdout by default).
	Sinks []Sink
	// DeliverOnly makes a timekeeper that commits nothing: another writer
	// commits the ledger's lapses and deadline facts (a cluster group's
	// leader proposes them through raft, since a replica's log is written
	// only by applying), and this one delivers what the log holds.
	DeliverOnly bool
	// Now is the timekeeper's clock; nil means the ledger's.
	Now func() time.Time
	// Clock is the process's own clock when Now is an instant a caller
	// gave (tally watch --now): Now may not run ahead of it by more than
	// FutureSkewMax (CheckNow). nil: Now is the process's clock (a server,
	// a cluster node), with nothing to check it against.
	Clock  func() time.Time
	Logger *slog.Logger
}

// FutureSkewMax is how far a sweep's instant may run ahead of the process's
// clock: a timekeeper records what has happened, so a lapse or a deadline
// fact committed at a future instant would be a false record that the
// append-only log keeps for good. It allows for clocks a little apart
// between machines, and no more.
const FutureSkewMax = 5 * time.Second

// CheckNow refuses a sweep at now when it is later than clock by more than
// FutureSkewMax, naming the field now and the rule.
func CheckNow(now, clock time.Time) error {
	if !now.After(clock.Add(FutureSkewMax)) {
		return nil
	}
	return refuse.Invalidf("now", fmt.Sprintf("%s is later than this process's clock (%s) by more than %v: the timekeeper records only what has happened (a dry run shows what it would record)",
		instant.Format(now), clock.UTC().Truncate(time.Second).Format(time.RFC3339), FutureSkewMax))
}

// DefaultConfig returns the timekeeper's defaults: reminders at +15m and +30m,
// the creditor told at +30m.
func DefaultConfig() Config {
	return Config{
		Reminders: []time.Duration{15 * time.Minute, 30 * time.Minute},
		SweepMax:  10_000, SweepRounds: 100, ClaimMax: 10_000, DeliverMax: 100_000,
		Logger: slog.Default(),
	}
}

// Validate reports a configuration that cannot work, quoting the value.
func (c Config) Validate() error {
	for _, d := range c.Reminders {
		if d <= 0 {
			return fmt.Errorf("watch config: reminder %v must be positive", d)
		}
	}
	switch {
	case c.Escalate < 0:
		return fmt.Errorf("watch config: Escalate %v must not be negative", c.Escalate)
	case c.SweepMax < 1 || c.SweepRounds < 1 || c.ClaimMax < 1 || c.DeliverMax < 1:
		return fmt.Errorf("watch config: SweepMax %d, SweepRounds %d, ClaimMax %d and DeliverMax %d must be at least 1",
			c.SweepMax, c.SweepRounds, c.ClaimMax, c.DeliverMax)
	case c.Logger == nil:
		return errors.New("watch config: Logger is nil")
	}
	return nil
}

// Report says what one Sweep did.
type Report struct {
	At          time.Time `json:"at"`
	Withdrawals int       `json:"withdrawals"` // expectations withdrawn (origin task ended badly)
	Lapses      int       `json:"lapses"`      // lapse records committed by this timekeeper
	ClaimFacts  int       `json:"claimFacts"`  // claim deadline and deadlock facts committed
	Delivered   int       `json:"delivered"`   // notices and lapses delivered and journaled
	Failed      int       `json:"failed"`      // deliveries that failed (retried next sweep)
	Waiting     int       `json:"waiting"`     // deliveries left for the next sweep
}

// Timekeeper sweeps one session, through the Service (service.Timekeeping):
// it reads no ledger itself. It is not safe for concurrent use; run one
// Timekeeper per process (several processes may watch one session).
type Timekeeper struct {
	cfg     Config
	svc     service.Timekeeping
	call    service.Call
	j       *Journal
	ladders *ladders
	cursor  service.Cursor // how far the log was read for lapses and promise changes
	outbox  []delivery     // lapses seen in the log, not yet delivered
}

// delivery is one document to deliver under its key.
type delivery struct {
	key     string
	kind    string
	dueAt   time.Time
	doc     []byte
	promise string // set for promise notices
	notice  Notice // what a NoticeSink receives
}

// New opens the journal of call's session (service.Timekeeping.JournalDir)
// and reads the session once: every lapse not yet delivered, and every
// promise's place on its ladder. call names the session; its Now is
// ignored (the sweep's instant is Config.Now, else the Service's clock).
func New(ctx context.Context, svc service.Timekeeping, call service.Call, cfg Config) (*Timekeeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	call.Now = time.Time{}
	dir, err := svc.JournalDir(ctx, call)
	if err != nil {
		return nil, err
	}
	j, err := OpenJournal(dir)
	if err != nil {
		return nil, err
	}
	w := &Timekeeper{cfg: cfg, svc: svc, call: call, j: j, ladders: newLadders(Ladder(cfg.Reminders, cfg.Escalate))}
	tl, err := svc.Timeline(ctx, call, service.Cursor{})
	if err != nil {
		j.Close()
		return nil, err
	}
	w.restart(tl)
	return w, nil
}

// restart rebuilds the outbox and the ladders from a timeline read from
// the start.
func (w *Timekeeper) restart(tl service.Timeline) {
	w.cursor, w.outbox = tl.To, nil
	w.ladders = newLadders(w.ladders.rungs)
	for _, lv := range tl.Lapses {
		if !w.j.Sent(lv.Lapse.LapseID) {
			w.outbox = append(w.outbox, lapseDelivery(lv))
		}
	}
	get := func(id string) (service.PromiseTime, bool) { p, ok := tl.Promises[id]; return p, ok }
	for id := range tl.Promises {
		w.ladders.trackOne(get, w.j.Sent, id)
	}
}

// Close releases the journal.
func (w *Timekeeper) Close() error { return w.j.Close() }

// Journal is the timekeeper's delivery journal.
func (w *Timekeeper) Journal() *Journal { return w.j }

// Sweep runs one sweep at the session's clock. A sweep whose instant runs
// ahead of the process's clock (CheckNow) records and delivers nothing.
func (w *Timekeeper) Sweep(ctx context.Context) (Report, error) {
	due, err := w.due(ctx)
	now := due.At
	rep := Report{At: now}
	if err != nil {
		return rep, err
	}
	if w.cfg.Clock != nil {
		if err := CheckNow(now, w.cfg.Clock()); err != nil {
			return rep, err
		}
	}
	if !w.cfg.DeliverOnly {
		if err := w.commit(ctx, due, &rep); err != nil {
			return rep, err
		}
	}
	// 3. Read what the log gained (ours and other processes'): lapses to
	// deliver and promises whose ladder may have changed.
	times, err := w.follow(ctx)
	if err != nil {
		return rep, err
	}
	// 4. Promises: the notices due, from the ladder index.
	for id := range times.touched {
		w.ladders.track(times.get, w.j.Sent, id)
	}
	dueIDs := w.ladders.due(now, w.cfg.DeliverMax)
	if err := times.fetch(ctx, dueIDs); err != nil {
		return rep, err
	}
	var notices []delivery
	for _, id := range dueIDs {
		p, ok := times.get(id)
		if !ok {
			continue
		}
		for _, n := range w.ladders.owed(id, now, w.j.Sent) {
			notices = append(notices, noticeDelivery(w.ladders.rungs, p, n, now))
		}
	}
	// 5. Deliver.
	if err := w.deliver(ctx, notices, times, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// due asks what the session owes at Config.Now, else at the Service's
// clock, which is then the sweep's instant.
func (w *Timekeeper) due(ctx context.Context) (service.Due, error) {
	call := w.call
	if w.cfg.Now != nil {
		call.Now = w.cfg.Now()
	}
	due, err := w.svc.Due(ctx, call)
	if due.At.IsZero() {
		due.At = call.Now
	}
	return due, err
}

// now is the instant a journal line is stamped with.
func (w *Timekeeper) now() time.Time {
	if w.cfg.Now != nil {
		return w.cfg.Now()
	}
	return time.Now()
}

// commit records, as the timekeeper, what is due: steps 1 and 2.
func (w *Timekeeper) commit(ctx context.Context, due service.Due, rep *Report) error {
	// 1. Expectations: withdrawals and lapses, exactly once in the ledger.
	for round := 0; round < w.cfg.SweepRounds && due.Expectations; round++ {
		sw, err := w.svc.Sweep(ctx, w.call, service.SweepExpectations, w.cfg.SweepMax)
		rep.Lapses += sw.Lapses
		rep.Withdrawals += sw.Withdrawals
		if err != nil {
			return err
		}
		if sw.Count() < w.cfg.SweepMax {
			break
		}
		if due, err = w.due(ctx); err != nil {
			return err
		}
	}
	// 2. Claims: deadline facts.
	sw, err := w.svc.Sweep(ctx, w.call, service.SweepClaims, w.cfg.ClaimMax)
	rep.ClaimFacts = sw.ClaimFacts
	return err
}

// promiseTimes are the promises one sweep read: those whose records it
// followed (touched), and what it fetched besides, each once.
type promiseTimes struct {
	w       *Timekeeper
	touched map[string]struct{}
	have    map[string]service.PromiseTime
	missing map[string]bool // fetched and not held
}

func (t *promiseTimes) get(id string) (service.PromiseTime, bool) {
	p, ok := t.have[id]
	return p, ok
}

// fetch reads, in one call, those of ids not read yet.
func (t *promiseTimes) fetch(ctx context.Context, ids []string) error {
	var want []string
	for _, id := range ids {
		if _, ok := t.have[id]; !ok && !t.missing[id] {
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	got, err := t.w.svc.PromiseTimes(ctx, t.w.call, want)
	if err != nil {
		return err
	}
	for _, id := range want {
		if p, ok := got[id]; ok {
			t.have[id] = p
		} else {
			t.missing[id] = true
		}
	}
	return nil
}

// follow reads the log from the cursor: lapse records join the outbox;
// promise records name the promises to re-track, which are read with the
// promises waiting on them. A timeline read from the start (the log was
// replaced under the cursor) rebuilds the outbox and the ladders.
func (w *Timekeeper) follow(ctx context.Context) (*promiseTimes, error) {
	tl, err := w.svc.Timeline(ctx, w.call, w.cursor)
	if err != nil {
		return nil, err
	}
	times := &promiseTimes{w: w, touched: map[string]struct{}{}, have: map[string]service.PromiseTime{}, missing: map[string]bool{}}
	if tl.Reset {
		w.restart(tl)
		maps.Copy(times.have, tl.Promises)
		return times, nil
	}
	w.cursor = tl.To
	for _, lv := range tl.Lapses {
		if !w.j.Sent(lv.Lapse.LapseID) {
			w.outbox = append(w.outbox, lapseDelivery(lv))
		}
	}
	maps.Copy(times.have, tl.Promises)
	need := map[string]struct{}{}
	for id := range tl.Promises {
		times.touched[id] = struct{}{}
		w.ladders.waiters(id, need)
	}
	if err := times.fetch(ctx, slices.Collect(maps.Keys(need))); err != nil {
		return nil, err
	}
	return times, nil
}

// deliver sends the outbox's lapses and the notices under the journal's
// lock, journaling each delivered key. Nothing is locked when there is
// nothing to send.
func (w *Timekeeper) deliver(ctx context.Context, notices []delivery, times *promiseTimes, rep *Report) error {
	if len(w.outbox) == 0 && len(notices) == 0 {
		return nil
	}
	all := append(w.outbox, notices...)
	w.outbox = nil
	if len(all) > w.cfg.DeliverMax {
		for _, d := range all[w.cfg.DeliverMax:] {
			if d.kind == KindLapse {
				w.outbox = append(w.outbox, d)
				rep.Waiting++
			}
		}
		all = all[:w.cfg.DeliverMax]
	}
	if err := w.j.Lock(ctx); err != nil {
		w.outbox = append(w.outbox, lapsesOf(all)...)
		return err
	}
	defer w.j.Unlock()
	promises := map[string]struct{}{}
	for i, d := range all {
		if d.promise != "" {
			promises[d.promise] = struct{}{}
		}
		if w.j.Sent(d.key) {
			continue // another timekeeper delivered it
		}
		if err := w.send(ctx, d); err != nil {
			rep.Failed++
			w.cfg.Logger.Warn("delivery failed; it is retried on the next sweep", "key", d.key, "err", err)
			if d.kind == KindLapse {
				w.outbox = append(w.outbox, d)
			}
			if ctx.Err() != nil {
				w.outbox = append(w.outbox, lapsesOf(all[i+1:])...)
				break
			}
			continue
		}
		if err := w.j.Record(JournalEntry{Key: d.key, Kind: d.kind, DueAt: d.dueAt, SentAt: w.now()}); err != nil {
			w.outbox = append(w.outbox, lapsesOf(all[i+1:])...)
			return err
		}
		rep.Delivered++
	}
	// Move each notified promise to its next undelivered rung (each was
	// read for its notice).
	for id := range promises {
		w.ladders.trackOne(times.get, w.j.Sent, id)
	}
	return nil
}

func lapsesOf(ds []delivery) []delivery {
	var out []delivery
	for _, d := range ds {
		if d.kind == KindLapse {
			out = append(out, d)
		}
	}
	return out
}

// send delivers d to every sink; the first failure stops it.
func (w *Timekeeper) send(ctx context.Context, d delivery) error {
	for _, s := range w.cfg.Sinks {
		var err error
		if ns, ok := s.(NoticeSink); ok {
			n := d.notice
			n.Key, n.Kind, n.Doc = d.key, d.kind, d.doc
			err = ns.DeliverNotice(ctx, n)
		} else {
			err = s.Deliver(ctx, d.key, d.doc)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name(), err)
		}
	}
	return nil
}

// Run sweeps every interval until ctx ends, then returns nil. A sweep in
// progress when ctx ends is finished (its ledger writes and journal lines
// complete); report is called after each sweep.
func (w *Timekeeper) Run(ctx context.Context, every time.Duration, report func(Report, error)) error {
	if every <= 0 {
		return fmt.Errorf("watch: interval %v must be positive", every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		rep, err := w.Sweep(context.WithoutCancel(ctx))
		if report != nil {
			report(rep, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// LapseNotice is the document delivered for a lapse.
type LapseNotice struct {
	SchemaVersion int               `json:"schema_version"`
	Kind          string            `json:"kind"` // "lapse"
	Key           string            `json:"key"`  // the lapse id: the idempotency key
	Lapse         expect.LapseView  `json:"lapse"`
	Expectation   *ExpectationBrief `json:"expectation,omitempty"`
}

// ExpectationBrief is what a lapse notice says of its expectation: enough to
// route it to the agent that answers for it.
type ExpectationBrief struct {
	ExpectationID string         `json:"expectationId"`
	Kind          string         `json:"kind"`
	Subject       expect.Subject `json:"subject"`
	Expects       string         `json:"expects,omitempty"`
	By            string         `json:"by"`
	Basis         expect.Basis   `json:"basis"`
	Origin        *expect.Origin `json:"origin,omitempty"`
	// ReplyTo is where the raising agent takes its lapses over A2A (a push
	// token shows as "set").
	ReplyTo *expect.ReplyTo `json:"replyTo,omitempty"`
	State   string          `json:"state"`
}

func lapseDelivery(ld service.Lapsed) delivery {
	lv := ld.Lapse
	n := LapseNotice{SchemaVersion: SchemaVersion, Kind: KindLapse, Key: lv.LapseID, Lapse: lv}
	if v := ld.Expectation; v != nil {
		n.Expectation = &ExpectationBrief{
			ExpectationID: v.ExpectationID, Kind: v.Kind, Subject: v.Subject, Expects: v.Expects,
			By: v.By, Basis: v.Basis, Origin: v.Origin, ReplyTo: v.ReplyTo, State: v.State,
		}
	}
	doc, _ := json.Marshal(n)
	lapse := lv
	notice := Notice{Lapse: &lapse, Expectation: n.Expectation, ReplyTo: ld.ReplyTo}
	return delivery{key: lv.LapseID, kind: KindLapse, dueAt: lv.LapsedAt, doc: doc, notice: notice}
}

// PromiseNotice is the document delivered for one rung of a promise's
// ladder. The ledger records none of it.
type PromiseNotice struct {
	SchemaVersion int       `json:"schema_version"`
	Kind          string    `json:"kind"` // "promise.notice"
	Key           string    `json:"key"`  // NoticeKey: the idempotency key
	Promise       string    `json:"promise"`
	Text          string    `json:"text"`
	Horizon       int       `json:"horizon"` // 1: the declared deadline; n+1 after n amends
	Rung          int       `json:"rung"`
	To            Recipient `json:"to"`        // debtor | creditor
	Recipient     string    `json:"recipient"` // the debtor's or creditor's identity
	Debtor        string    `json:"debtor"`
	Creditor      string    `json:"creditor"`
	Deadline      time.Time `json:"deadline"`
	DueAt         time.Time `json:"dueAt"`     // deadline + the rung's offset
	NoticedAt     time.Time `json:"noticedAt"` // the sweep that sent it
	OverdueBy     string    `json:"overdueBy"` // ISO 8601, now - deadline
}

func noticeDelivery(rungs []Rung, p service.PromiseTime, n pendingNotice, now time.Time) delivery {
	r := rungs[n.rung]
	recipient := p.By
	if r.To == Creditor {
		recipient = p.To
	}
	deadline := n.dueAt.Add(-r.After)
	doc, _ := json.Marshal(PromiseNotice{
		SchemaVersion: SchemaVersion, Kind: KindNotice, Key: n.key, Promise: p.ID, Text: p.Text,
		Horizon: n.horizon, Rung: n.rung, To: r.To, Recipient: recipient, Debtor: p.By, Creditor: p.To,
		Deadline: deadline, DueAt: n.dueAt, NoticedAt: now, OverdueBy: instant.FormatISOSpan(instant.Span(deadline, now)),
	})
	return delivery{key: n.key, kind: KindNotice, dueAt: n.dueAt, doc: doc, promise: p.ID}
}
