package promise

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"tally/instant"
)

// genLog makes a random but well-formed log over a few ids, with antecedent
// edges, amends, resolves and assessments, as records written by any tool.
func genLog(r *rand.Rand, ids []string, n int, withOn bool) []Event {
	base := ts("2026-09-01T00:00:00Z")
	var out []Event
	for i := 0; i < n; i++ {
		id := ids[r.IntN(len(ids))]
		at := base.Add(time.Duration(i) * time.Minute)
		until := instant.Format(base.Add(time.Duration(r.IntN(48)) * time.Hour))
		var meta string
		if r.IntN(3) == 0 {
			meta = fmt.Sprintf(`{"n":%d}`, r.IntN(100))
		}
		switch r.IntN(5) {
		case 0, 1:
			on := ""
			if withOn && r.IntN(2) == 0 {
				on = ids[r.IntN(len(ids))]
			}
			out = append(out, Event{TS: at, Type: TypePromise, ID: id, Text: "t " + id, By: "d", To: "c", On: on, Until: until, Meta: meta})
		case 2:
			out = append(out, Event{TS: at, Type: TypeAmend, ID: id, By: "d", Until: until, Meta: meta})
		case 3:
			as := []string{AsSatisfied, AsCancelled, AsReleased}[r.IntN(3)]
			ev := Event{TS: at, Type: TypeResolve, ID: id, As: as, By: "d", Meta: meta}
			if as == AsSatisfied {
				ev.Evidence = []string{"e"}
			} else {
				ev.Reason = "r"
			}
			out = append(out, ev)
		case 4:
			out = append(out, Event{TS: at, Type: TypeAssess, ID: id, State: StateViolated, Observer: "o", Meta: meta})
		}
	}
	return out
}

func foldEvents(evs []Event) *State {
	s := NewState()
	for i := range evs {
		// Through the wire, as the ledger does.
		ev, err := Decode(evs[i].Encode())
		if err != nil {
			panic(err)
		}
		s.Apply(Meta{Seq: uint64(i + 1)}, &ev)
	}
	return s
}

// statesOf prints every promise's view at several nows, seq fields dropped
// when reorder is true (positions change when records are reordered).
func statesOf(s *State, ids []string, noSeq bool) string {
	var b strings.Builder
	for _, now := range []string{"2026-09-01T12:00:00Z", "2026-09-03T00:00:00Z"} {
		for _, id := range ids {
			p, ok := s.Get(id)
			if !ok {
				b.WriteString(id + ":none\n")
				continue
			}
			v := s.View(p, ts(now))
			v.Meta = ""
			if noSeq {
				v.Seq = 0
			}
			b.Write(v.AppendJSON(nil))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

var propIDs = []string{"a", "b", "c", "d", "e"}

func TestPropertyReplayDeterministic(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		evs := genLog(r, propIDs, 40, true)
		s1, s2 := foldEvents(evs), foldEvents(evs)
		if !bytes.Equal(s1.AppendSnapshot(nil), s2.AppendSnapshot(nil)) || statesOf(s1, propIDs, false) != statesOf(s2, propIDs, false) {
			t.Fatalf("seed %d: two folds of one log differ", seed)
		}
	}
}

func TestPropertyMetaChangesNoState(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 2))
		evs := genLog(r, propIDs, 40, true)
		rewritten := make([]Event, len(evs))
		copy(rewritten, evs)
		for i := range rewritten {
			switch r.IntN(3) {
			case 0:
				rewritten[i].Meta = ""
			case 1:
				rewritten[i].Meta = `{"other":{"deep":[true,null]}}`
			}
		}
		if a, b := statesOf(foldEvents(evs), propIDs, false), statesOf(foldEvents(rewritten), propIDs, false); a != b {
			t.Fatalf("seed %d: rewriting meta changed a state:\n%s\n%s", seed, a, b)
		}
	}
}

// Records of unrelated promises (no antecedent edges between them) can be
// interleaved in any order without changing any state.
func TestPropertyUnrelatedReorder(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		left := genLog(r, []string{"a", "b"}, 20, false)
		right := genLog(r, []string{"x", "y"}, 20, false)
		// Keep each side's own order; merge at random.
		var merged []Event
		i, j := 0, 0
		for i < len(left) || j < len(right) {
			if j == len(right) || (i < len(left) && r.IntN(2) == 0) {
				merged = append(merged, left[i])
				i++
			} else {
				merged = append(merged, right[j])
				j++
			}
		}
		sequential := append(append([]Event{}, left...), right...)
		ids := []string{"a", "b", "x", "y"}
		if a, b := statesOf(foldEvents(sequential), ids, true), statesOf(foldEvents(merged), ids, true); a != b {
			t.Fatalf("seed %d: reordering unrelated records changed a state:\n%s\n%s", seed, a, b)
		}
	}
}

// naiveStatus is a deliberately simple reference: recursion with a visited set.
func naiveStatus(s *State, p *Promise, visiting map[string]bool) Status {
	if p.Resolution != nil {
		return Status(p.Resolution.As)
	}
	if p.On == "" {
		return Owed
	}
	if visiting[p.ID] {
		return Conditional
	}
	a, ok := s.Get(p.On)
	if !ok {
		return Conditional
	}
	visiting[p.ID] = true
	defer delete(visiting, p.ID)
	if a.Resolution == nil && a.On != "" && visiting[a.ID] {
		return Conditional
	}
	switch naiveStatus(s, a, visiting) {
	case Satisfied:
		return Owed
	case Cancelled, Released, Expired:
		return Expired
	}
	return Conditional
}

func TestPropertyStatusMatchesNaive(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for seed := uint64(0); seed < 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 4))
		s := foldEvents(genLog(r, ids, 30, true))
		for _, id := range ids {
			p, ok := s.Get(id)
			if !ok {
				continue
			}
			if got, want := s.Status(p), naiveStatus(s, p, map[string]bool{}); got != want {
				t.Fatalf("seed %d: %s is %s, naive says %s", seed, id, got, want)
			}
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, l := range append([]string{antecedentLine, antecedentSatisfied}, seedLifecycle...) {
		f.Add([]byte(l))
	}
	f.Add([]byte(`{"ts":"2026-08-28T20:14:03Z","type":"x"}`))
	f.Add([]byte(`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"\ud800","promise":"\u00e9","by":"d","to":"c","until":"2026-09-01T17:00:00+02:00"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := Decode(line)
		if err != nil {
			return
		}
		// What decodes re-encodes to a record that decodes to the same thing.
		again, err := Decode(ev.Encode())
		if err != nil {
			t.Fatalf("re-decode of %s: %v", ev.Encode(), err)
		}
		if string(again.Encode()) != string(ev.Encode()) {
			t.Fatalf("unstable encoding:\n%s\n%s", ev.Encode(), again.Encode())
		}
	})
}

// FuzzFold folds arbitrary lines: no panic, and a line that does not decode
// leaves no trace in the state.
func FuzzFold(f *testing.F) {
	f.Add([]byte(strings.Join(append([]string{antecedentLine, antecedentSatisfied}, seedLifecycle...), "\n")))
	f.Add([]byte(`{"ts":"2026-08-28T20:00:00Z","type":"promise","id":"a","promise":"x","by":"d","to":"c","on":"a","until":"2026-09-01T17:00:00Z"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewState()
		now := ts("2026-09-01T17:30:00Z")
		for i, line := range bytes.Split(data, []byte{'\n'}) {
			before := s.AppendSnapshot(nil)
			ev, err := Decode(line)
			if err != nil {
				if !bytes.Equal(before, s.AppendSnapshot(nil)) {
					t.Fatal("a refused line changed the state")
				}
				continue
			}
			s.Apply(Meta{Seq: uint64(i + 1)}, &ev)
		}
		s.Each(func(p *Promise) bool {
			v := s.View(p, now)
			_ = v.AppendJSON(nil)
			return true
		})
		if _, _, err := ReadSnapshot(s.AppendSnapshot(nil)); err != nil {
			t.Fatalf("snapshot does not read back: %v", err)
		}
	})
}

// FuzzReadSnapshot feeds arbitrary bytes as a checkpoint payload: no panic,
// no huge allocation, and whatever decodes encodes back to the same bytes.
func FuzzReadSnapshot(f *testing.F) {
	f.Add(fold(f, append([]string{antecedentLine, antecedentSatisfied}, seedLifecycle...)...).AppendSnapshot(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		data = append([]byte(nil), data...) // the state keeps references into it
		s, rest, err := ReadSnapshot(data)
		if err != nil {
			return
		}
		consumed := data[:len(data)-len(rest)]
		if again := s.AppendSnapshot(nil); !bytes.Equal(again, consumed) {
			// Interning may reorder the name table; the states must agree.
			s2, _, err := ReadSnapshot(again)
			if err != nil || !bytes.Equal(s2.AppendSnapshot(nil), again) {
				t.Fatalf("snapshot does not round-trip: %v", err)
			}
		}
	})
}

// The overdue query through the deadline index (second query on) gives the
// same views as the scan (first query), across random logs, amends,
// resolves, nows, and records applied after the index was built.
func TestPropertyOverdueIndexMatchesScan(t *testing.T) {
	nows := []string{"2026-09-01T06:00:00Z", "2026-09-01T20:00:00Z", "2026-09-02T12:00:00Z", "2026-09-03T00:00:00Z"}
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		evs := genLog(r, propIDs, 60, true)
		half := len(evs) / 2
		indexed := foldEvents(evs[:half])
		indexed.Select(Filter{State: "overdue"}, ts(nows[0])) // the scan
		indexed.Select(Filter{State: "overdue"}, ts(nows[0])) // builds the index
		for i := half; i < len(evs); i++ {
			ev, _ := Decode(evs[i].Encode())
			indexed.Apply(Meta{Seq: uint64(i + 1)}, &ev)
		}
		scanned := foldEvents(evs)
		for _, n := range nows {
			for _, f := range []Filter{{State: "overdue"}, {State: "overdue", By: "d"}} {
				a := indexed.Select(f, ts(n))
				b := scanned.Select(f, ts(n))
				if len(a) != len(b) {
					t.Fatalf("seed %d now %s: index %d, scan %d", seed, n, len(a), len(b))
				}
				for i := range a {
					if string(a[i].AppendJSON(nil)) != string(b[i].AppendJSON(nil)) {
						t.Fatalf("seed %d now %s: %s vs %s", seed, n, a[i].AppendJSON(nil), b[i].AppendJSON(nil))
					}
				}
			}
		}
	}
}

// A Frozen view encodes exactly the state at Freeze, however the state goes
// on changing (declarations, amends, resolves, assessments, other views
// taken and released meanwhile), and the live state ends as a plain fold.
func TestPropertyFrozenViewNeverChanges(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for seed := uint64(0); seed < 300; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		evs := genLog(r, ids, 5+r.IntN(80), true)
		cut := r.IntN(len(evs))
		s := foldEvents(evs[:cut])
		want := s.AppendSnapshot(nil)
		frozen := s.Freeze()
		var others []*Frozen
		for i := cut; i < len(evs); i++ {
			ev, err := Decode(evs[i].Encode())
			if err != nil {
				t.Fatal(err)
			}
			s.Apply(Meta{Seq: uint64(i + 1)}, &ev)
			switch r.IntN(6) {
			case 0:
				others = append(others, s.Freeze())
			case 1:
				if len(others) > 0 {
					others[0].Release()
					others = others[1:]
				}
			}
		}
		if got := frozen.AppendSnapshot(nil); !bytes.Equal(got, want) {
			t.Fatalf("seed %d: the frozen view changed after %d more records", seed, len(evs)-cut)
		}
		frozen.Release()
		for _, o := range others {
			o.Release()
		}
		if s.frozen != 0 {
			t.Fatalf("seed %d: %d views still counted after all were released", seed, s.frozen)
		}
		if !bytes.Equal(s.AppendSnapshot(nil), foldEvents(evs).AppendSnapshot(nil)) {
			t.Fatalf("seed %d: copying for frozen views changed the live fold", seed)
		}
	}
}

// Encoding a frozen view while Apply goes on is safe (run with -race).
func TestFrozenViewEncodesConcurrentlyWithApply(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	ids := make([]string, 200)
	for i := range ids {
		ids[i] = fmt.Sprintf("p%d", i)
	}
	evs := genLog(r, ids, 4000, true)
	s := foldEvents(evs[:2000])
	want := s.AppendSnapshot(nil)
	frozen := s.Freeze()
	got := make(chan []byte)
	go func() { got <- frozen.AppendSnapshot(nil) }()
	for i := 2000; i < len(evs); i++ {
		ev, _ := Decode(evs[i].Encode())
		s.Apply(Meta{Seq: uint64(i + 1)}, &ev)
	}
	if !bytes.Equal(<-got, want) {
		t.Fatal("a view encoded during Apply is not the state at Freeze")
	}
	frozen.Release()
}

// A snapshot streamed in chunks of any size is AppendSnapshot's bytes, for
// the live state and a frozen one; an emit error stops it.
func TestStreamSnapshotIsAppendSnapshot(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ids := make([]string, 300)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%d", i)
	}
	s := foldEvents(genLog(r, ids, 3000, true))
	want := s.AppendSnapshot([]byte("prefix"))
	frozen := s.Freeze()
	defer frozen.Release()
	for _, chunk := range []int{1, 100, 4096, 1 << 30} {
		for name, stream := range map[string]func([]byte, int, func([]byte) error) error{"live": s.StreamSnapshot, "frozen": frozen.StreamSnapshot} {
			var got []byte
			pieces := 0
			if err := stream([]byte("prefix"), chunk, func(b []byte) error {
				got = append(got, b...)
				pieces++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s, chunk %d: streamed bytes differ from AppendSnapshot", name, chunk)
			}
			if chunk == 100 && pieces < len(want)/1000 {
				t.Fatalf("%s: %d pieces for %d bytes in chunks of %d", name, pieces, len(want), chunk)
			}
		}
	}
	stop := fmt.Errorf("disk full")
	calls := 0
	if err := s.StreamSnapshot(nil, 100, func([]byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("after an emit error: %v, %d calls", err, calls)
	}
}
