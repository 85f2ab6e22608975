package expect

import (
	"encoding/json"
	"testing"
	"time"

	"tally/instant"
	"tally/refuse"
)

const timekeeper = "watch"

// harness is a tiny ledger: every record goes through the wire (Encode,
// Decode) before Apply, as it would through the log.
type harness struct {
	t     *testing.T
	s     *State
	seq   uint64
	lines []string
	metas []Meta
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Timekeeper = timekeeper
	return &harness{t: t, s: NewState(cfg)}
}

// apply appends events as actor at their own ts.
func (h *harness) apply(actor string, evs ...Event) {
	h.t.Helper()
	for _, e := range evs {
		line := e.Encode()
		back, err := Decode(line)
		if err != nil {
			h.t.Fatalf("record does not decode: %s: %v", line, err)
		}
		h.seq++
		m := Meta{Seq: h.seq, Actor: actor, TS: back.TS}
		h.lines = append(h.lines, string(line))
		h.metas = append(h.metas, m)
		h.s.Apply(m, back)
	}
}

// do decides cmd and applies its records; the command must be accepted.
func (h *harness) do(actor string, human bool, now time.Time, cmd Command) []Event {
	h.t.Helper()
	evs, err := h.s.Decide(actor, human, now, cmd)
	if err != nil {
		h.t.Fatalf("Decide(%s, %T) refused: %v", actor, cmd, err)
	}
	h.apply(actor, evs...)
	return evs
}

// refuse decides cmd, which must be refused with code.
func (h *harness) refuse(actor string, human bool, now time.Time, cmd Command, code refuse.Code, field string) {
	h.t.Helper()
	evs, err := h.s.Decide(actor, human, now, cmd)
	r, ok := refuse.As(err)
	if !ok {
		h.t.Fatalf("Decide(%s, %+v) = %v, %v; want a %s refusal", actor, cmd, evs, err, code)
	}
	if r.Code != code || (field != "" && r.Field != field) {
		h.t.Fatalf("Decide(%s, %+v) refused %s %q (%v); want %s %q", actor, cmd, r.Code, r.Field, r, code, field)
	}
}

// commit is one timekeeper pass: sweep at now and commit what it returns, each
// lapse through Decide as the timekeeper would.
func (h *harness) commit(now time.Time) []Event {
	h.t.Helper()
	out := h.s.Sweep(now, 0)
	for _, e := range out {
		if e.Lapse != nil {
			evs, err := h.s.Decide(timekeeper, false, now, LapseCommand{ExpectationID: e.Lapse.ExpectationID, Kind: e.Lapse.Kind, DueAt: e.Lapse.DueAt})
			if err != nil {
				h.t.Fatalf("timekeeper cannot commit swept lapse %s: %v", e.Encode(), err)
			}
			if len(evs) != 1 || string(evs[0].Encode()) != string(e.Encode()) {
				h.t.Fatalf("Decide(lapse) = %v, want the swept record %s", evs, e.Encode())
			}
		}
		h.apply(timekeeper, e)
	}
	return out
}

func (h *harness) view(id string) View {
	h.t.Helper()
	v, ok := h.s.Expectation(id)
	if !ok {
		h.t.Fatalf("no expectation %s", id)
	}
	return v
}

// lapses summarises records as "id kind due lapsedAt".
func lapses(evs []Event) []string {
	var out []string
	for _, e := range evs {
		if e.Lapse != nil {
			out = append(out, e.Lapse.ExpectationID+" "+string(e.Lapse.Kind)+" "+instant.Format(e.Lapse.DueAt)+" "+instant.Format(e.Lapse.LapsedAt))
		} else if e.Withdraw != nil {
			out = append(out, e.Withdraw.ExpectationID+" withdrawn by "+e.Withdraw.By)
		}
	}
	return out
}

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
