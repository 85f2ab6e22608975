package claim

import (
	"encoding/json"
	"math/rand"
	"testing"
	"testing/quick"

	"tally/refuse"
)

func intp(n int) *int { return &n }

// A claim posted to a pool records no respondent (and its seats, and a
// priority other than the default), after the members an older reader
// knows, so such a reader keeps them as unknown members in order.
func TestPoolCreateExactBytes(t *testing.T) {
	cases := []struct {
		name string
		cmd  Create
		want string
	}{
		{"any seat", Create{Claim: "C1", Work: "triage the parser bugs", NoChecks: true},
			`{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C1","claimant":"maintainer","respondent":"","work":"triage the parser bugs","max_responses":4,"slots":[]}`},
		{"named seats and a priority", Create{Claim: "C2", Work: "fix \\u12", NoChecks: true, Pool: []string{"worker-1", "worker-2"}, Priority: intp(0)},
			`{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C2","claimant":"maintainer","respondent":"","work":"fix \\u12","max_responses":4,"slots":[],"pool":["worker-1","worker-2"],"priority":0}`},
		{"the default priority is not recorded", Create{Claim: "C3", Respondent: parser, Work: "w", NoChecks: true, Priority: intp(2)},
			`{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C3","claimant":"maintainer","respondent":"parser","work":"w","max_responses":4,"slots":[]}`},
		{"a named respondent with a priority", Create{Claim: "C4", Respondent: parser, Work: "w", NoChecks: true, Priority: intp(4)},
			`{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C4","claimant":"maintainer","respondent":"parser","work":"w","max_responses":4,"slots":[],"priority":4}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := NewState().Decide(maintainer, t0, tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(evs[0].Encode()); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			d, err := Decode([]byte(tc.want))
			if err != nil {
				t.Fatal(err)
			}
			if string(d.Encode()) != tc.want {
				t.Fatalf("re-encode %s", d.Encode())
			}
		})
	}
}

func TestPoolCreateRefusals(t *testing.T) {
	cases := []struct {
		name string
		cmd  Create
		want string
	}{
		{"respondent and pool", Create{Claim: "C1", Respondent: parser, Work: "w", NoChecks: true, Pool: []string{"worker-1"}},
			"pool: a claim names a respondent or a pool of seats, not both"},
		{"a seat twice", Create{Claim: "C1", Work: "w", NoChecks: true, Pool: []string{"worker-1", "worker-1"}},
			`pool: lists "worker-1" twice`},
		{"a blank seat", Create{Claim: "C1", Work: "w", NoChecks: true, Pool: []string{""}},
			"pool: must not be empty"},
		{"priority too low", Create{Claim: "C1", Work: "w", NoChecks: true, Priority: intp(5)},
			"priority: must be an integer from 0 (highest) to 4"},
		{"priority negative", Create{Claim: "C1", Work: "w", NoChecks: true, Priority: intp(-1)},
			"priority: must be an integer from 0 (highest) to 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewState().Decide(maintainer, t0, tc.cmd)
			r, ok := refuse.As(err)
			if !ok || r.Code != refuse.Invalid || r.Error() != tc.want {
				t.Fatalf("got %v, want invalid %q", err, tc.want)
			}
		})
	}
	for _, line := range []string{
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C1","claimant":"m","respondent":"","work":"w","max_responses":4,"slots":[],"priority":9}`,
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C1","claimant":"m","respondent":"","work":"w","max_responses":4,"slots":[],"priority":"1"}`,
	} {
		if _, err := Decode([]byte(line)); err == nil || err.Error() != "priority: must be an integer from 0 (highest) to 4" {
			t.Errorf("decode %s: %v", line, err)
		}
	}
}

// The first seat of the pool to acquire the receipt becomes the respondent;
// its generation fences every other acquirer, who is refused naming it.
func TestPoolFirstAcquirerIsRespondent(t *testing.T) {
	l := newLedger(t)
	l.do(maintainer, Create{Claim: "C1", Work: "w", NoChecks: true, Pool: []string{"worker-1", "worker-2"}})
	if why := l.view("C1").Why[0].Text; why != "the claim is not posted yet (claimant maintainer)" {
		t.Fatalf("why %q", why)
	}
	r := l.refuse("worker-1", AcquireReceipt{Claim: "C1"}, refuse.Conflict, "claim")
	if r.Error() != "claim: not posted yet" {
		t.Fatal(r)
	}
	l.do(maintainer, Post{Claim: "C1"})
	if why := l.view("C1").Why[0].Text; why != "no seat of the pool has acquired the execution receipt" {
		t.Fatalf("why %q", why)
	}
	for _, tc := range []struct {
		actor string
		cmd   Command
		code  refuse.Code
		want  string
	}{
		{"outsider", AcquireReceipt{Claim: "C1"}, refuse.Forbidden, "actor: only a seat of the pool (worker-1, worker-2) acquires the receipt"},
		{"worker-1", DeclineReceipt{Claim: "C1", Reason: "busy"}, refuse.Conflict, "claim: a claim posted to a pool is not declined: leave it to another seat"},
	} {
		if r := l.refuse(tc.actor, tc.cmd, tc.code, ""); r.Error() != tc.want {
			t.Fatalf("%s: %q, want %q", tc.actor, r.Error(), tc.want)
		}
	}
	evs := l.do("worker-2", AcquireReceipt{Claim: "C1"})
	if got, want := string(evs[0].Encode()), `{"ts":"2026-09-01T17:00:00Z","type":"claim.receipt","claim":"C1","holder":"worker-2","generation":1}`; got != want {
		t.Fatalf("got %s", got)
	}
	r = l.refuse("worker-1", AcquireReceipt{Claim: "C1"}, refuse.Conflict, "claim")
	if r.Error() != "claim: receipt already acquired by worker-2 (generation 1)" {
		t.Fatal(r)
	}
	v := l.view("C1")
	if v.Respondent != "worker-2" || !v.Pooled || len(v.Pool) != 2 || v.Receipt.Holder != "worker-2" {
		t.Fatalf("view %+v", v)
	}
	// A second receipt written by another tool is ignored by the fold.
	l.append("worker-1", Event{TS: l.now, Type: TypeReceipt, Claim: "C1", Holder: "worker-1", Generation: 1})
	if ig, n := l.s.Ignored(); n != 1 || ig[0].Reason != "claim: receipt already acquired by worker-2 (generation 1)" {
		t.Fatalf("ignored %v", ig)
	}
	if got := l.s.List(Filter{Respondent: "worker-2"}, t0); len(got) != 1 || got[0].Respondent != "worker-2" {
		t.Fatalf("list %+v", got)
	}
	// The respondent publishes under its receipt; the other seat is fenced.
	l.refuse("worker-1", Progress{Claim: "C1", Generation: 1, Note: "mine"}, refuse.Forbidden, "actor")
	l.do("worker-2", Progress{Claim: "C1", Generation: 1, Note: "started"})
	// An open pool: any seat.
	l.do(maintainer, Create{Claim: "C2", Work: "w", NoChecks: true})
	l.do(maintainer, Post{Claim: "C2"})
	l.do("anyone", AcquireReceipt{Claim: "C2"})
	if v := l.view("C2"); v.Respondent != "anyone" || v.Pool != nil || !v.Pooled {
		t.Fatalf("view %+v", v)
	}
}

// Takeable lists the posted claims nobody has taken that the seat may take,
// once their DependsOn targets are Satisfied and Awaits targets terminal.
func TestTakeable(t *testing.T) {
	l := newLedger(t)
	post := func(c Create) {
		c.Work, c.NoChecks = "w", true
		l.do(maintainer, c)
		l.do(maintainer, Post{Claim: c.Claim})
	}
	post(Create{Claim: "A", Respondent: parser}) // a dependency, taken below
	post(Create{Claim: "B", Respondent: parser}) // an awaited claim
	post(Create{Claim: "P1", Pool: []string{"worker-1"}, Priority: intp(1)})
	post(Create{Claim: "P2"})
	post(Create{Claim: "P3", DependsOn: []string{"A"}})
	post(Create{Claim: "P4", Awaits: []string{"B"}})
	post(Create{Claim: "N1", Respondent: "worker-1"}) // named, not yet taken
	l.do(maintainer, Create{Claim: "G1", Work: "w", NoChecks: true})
	ids := func(seat string) string {
		var out []string
		for _, c := range l.s.Takeable(seat) {
			out = append(out, c.Claim)
		}
		b, _ := json.Marshal(out)
		return string(b)
	}
	if got := ids("worker-1"); got != `["P1","P2","N1"]` {
		t.Fatalf("worker-1: %s", got)
	}
	if got := ids("worker-2"); got != `["P2"]` {
		t.Fatalf("worker-2: %s", got)
	}
	l.do(parser, AcquireReceipt{Claim: "B"})
	l.do(maintainer, Cancel{Claim: "B", Reason: "not needed"})
	l.do(parser, AcquireReceipt{Claim: "A"})
	l.do(parser, CloseTestament{Claim: "A", Testament: "T1", Generation: 1, Summary: "done"})
	l.do(parser, PostTestament{Claim: "A", Testament: "T1"})
	l.do(maintainer, ReceiveTestament{Claim: "A", Testament: "T1"})
	l.expect("A", Satisfied)
	if got := ids("worker-2"); got != `["P2","P3","P4"]` {
		t.Fatalf("worker-2 after the dependencies: %s", got)
	}
	l.do("worker-2", AcquireReceipt{Claim: "P2"})
	if got := ids("worker-1"); got != `["P1","P3","P4","N1"]` {
		t.Fatalf("worker-1 after P2 was taken: %s", got)
	}
	if got := l.s.Takeable("worker-1")[0]; got.Priority != 1 || got.Claimant != maintainer || !got.Pooled {
		t.Fatalf("P1 %+v", got)
	}
}

// Replay is deterministic: random pool races, decided and applied in the
// order they happen, fold to the same views and the same takeable lists
// from the log's bytes; and no pool claim ever has two respondents.
func TestPoolReplayDeterministic(t *testing.T) {
	seats := []string{"worker-1", "worker-2", "worker-3", maintainer}
	prop := func(seed int64) bool {
		rng := rand.New(rand.NewSource(seed))
		l := newLedger(t)
		var ids []string
		for i := 0; i < 40; i++ {
			actor := seats[rng.Intn(len(seats))]
			var cmd Command
			switch k := rng.Intn(6); {
			case k == 0 || len(ids) == 0:
				id := "C" + string(rune('a'+len(ids)%26)) + string(rune('0'+len(ids)/26))
				c := Create{Claim: id, Work: "w", NoChecks: true, Priority: intp(rng.Intn(5))}
				if rng.Intn(2) == 0 {
					c.Pool = []string{seats[rng.Intn(3)], seats[3-rng.Intn(2)]}
					if c.Pool[0] == c.Pool[1] {
						c.Pool = c.Pool[:1]
					}
				}
				if len(ids) > 0 && rng.Intn(3) == 0 {
					c.DependsOn = []string{ids[rng.Intn(len(ids))]}
				}
				cmd, actor = c, maintainer
				ids = append(ids, id)
			case k == 1:
				cmd, actor = Post{Claim: ids[rng.Intn(len(ids))]}, maintainer
			case k == 2:
				cmd, actor = Cancel{Claim: ids[rng.Intn(len(ids))], Reason: "r"}, maintainer
			default:
				cmd = AcquireReceipt{Claim: ids[rng.Intn(len(ids))]}
			}
			if evs, err := l.s.Decide(actor, l.now, cmd); err == nil {
				for _, e := range evs {
					l.append(actor, e)
				}
			}
		}
		receipts := map[string]int{}
		for _, ll := range l.log {
			if e, _ := Decode(ll.line); e.Type == TypeReceipt {
				receipts[e.Claim]++
			}
		}
		for id, n := range receipts {
			if n != 1 {
				t.Logf("seed %d: claim %s has %d receipts", seed, id, n)
				return false
			}
		}
		r := l.replay()
		if allViews(r, t0) != allViews(l.s, t0) {
			t.Logf("seed %d: views differ after replay", seed)
			return false
		}
		for _, seat := range seats {
			a, _ := json.Marshal(l.s.Takeable(seat))
			b, _ := json.Marshal(r.Takeable(seat))
			if string(a) != string(b) {
				t.Logf("seed %d: takeable of %s differs: %s / %s", seed, seat, a, b)
				return false
			}
		}
		return true
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 200}); err != nil {
		t.Fatal(err)
	}
}
