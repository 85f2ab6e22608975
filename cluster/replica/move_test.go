package replica

import (
	"strconv"
	"testing"
)

// The move's steps, each a committed decision: the refusals with their
// exact reasons and nothing changed, and the steps in order.
func TestDecideMove(t *testing.T) {
	const groups = 3 // data groups 2, 3, 4
	hash := GroupOf(groups, "acme", "main")
	other := hash%3 + 2 // another data group
	begun := Move{ID: 1, Tenant: "acme", Session: "main", From: hash, To: other, Step: MoveBegun, Began: 10, Updated: 10}
	fenced := begun
	fenced.Step, fenced.Seq, fenced.Chain, fenced.Length, fenced.Fenced, fenced.Updated = MoveFenced, 7, "ab", 900, 20, 20
	proven := fenced
	proven.Step, proven.Updated = MoveProven, 30
	activated := proven
	activated.Step, activated.Activated, activated.Updated = MoveActivated, 40, 40
	retired := activated
	retired.Step, retired.Updated = MoveRetired, 50
	dir := func(moves ...Move) directory { return directory{moves: moves} }
	step := func(s MoveStep) MetaCommand {
		s.Tenant, s.Session = "acme", "main"
		return MetaCommand{Op: OpMoveStep, Move: &s, TS: 99}
	}
	begin := func(to, epoch uint64) MetaCommand {
		return MetaCommand{Op: OpMoveBegin, Move: &MoveStep{Tenant: "acme", Session: "main", To: to, Epoch: epoch}, TS: 10}
	}
	for _, tc := range []struct {
		name string
		d    directory
		c    MetaCommand
		err  string
		step string
	}{
		{"begin", dir(), begin(other, 0), "", MoveBegun},
		{"begin again answers it", dir(begun), begin(other, 0), "", MoveBegun},
		{"to its own group", dir(), begin(hash, 0), "group: session acme/main is in group " + u(hash) + " already", ""},
		{"to no group", dir(), begin(9, 0), "group: 9 is not a data group of this cluster: its data groups are 2 to 4", ""},
		{"a second move", dir(begun), begin(other%3+2, 0), "session: session acme/main is moving already (move 1, from group " + u(hash) + " to group " + u(other) + ", begun): let it end, or abort it (tally cluster move acme/main --abort)", ""},
		{"stale", dir(), begin(other, 2), "epoch: the move of acme/main was asked for at its epoch 2; it is at epoch 0 now (it moved since): ask again", ""},
		{"no move", dir(), step(MoveStep{Step: MoveFenced}), "session: no move of acme/main is in progress", ""},
		{"fenced", dir(begun), step(MoveStep{Step: MoveFenced, Seq: 7, Chain: "ab", Length: 900}), "", MoveFenced},
		{"proven", dir(fenced), step(MoveStep{Step: MoveProven, Seq: 7, Chain: "ab", Length: 900}), "", MoveProven},
		{"proof of another chain", dir(fenced), step(MoveStep{Step: MoveProven, Seq: 7, Chain: "cd", Length: 900}), "chain: group " + u(other) + " holds acme/main at sequence 7, chain cd, 900 bytes; the source was fenced at sequence 7, chain ab, 900 bytes", ""},
		{"activated before proof", dir(fenced), step(MoveStep{Step: MoveActivated}), "step: move 1 of acme/main is fenced: it cannot be activated next", ""},
		{"activated", dir(proven), step(MoveStep{Step: MoveActivated}), "", MoveActivated},
		{"abort before activation", dir(proven), step(MoveStep{Step: MoveAborted, Reason: "operator"}), "", MoveAborted},
		{"abort after activation", dir(activated), step(MoveStep{Step: MoveAborted}), "session: move 1 of acme/main was activated: there is no abort after activation (moving back is another move)", ""},
		{"abort after retire", dir(retired), step(MoveStep{Step: MoveAborted}), "session: move 1 of acme/main was activated: there is no abort after activation (moving back is another move)", ""},
		{"retired", dir(activated), step(MoveStep{Step: MoveRetired}), "", MoveRetired},
		{"retired again", dir(retired), step(MoveStep{Step: MoveRetired}), "", MoveRetired},
		{"a step overtaken", dir(proven), step(MoveStep{Step: MoveFenced, Seq: 7, Chain: "ab", Length: 900}), "", MoveProven},
		{"no such step", dir(begun), step(MoveStep{Step: "flown"}), `step: "flown" is not a step of a move: copied, fenced, proven, activated, retired or aborted`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(tc.d.moves)
			got, out := decideMove(tc.d, tc.c, groups)
			if tc.err != "" {
				if out.Err == nil || out.Err.Error() != tc.err {
					t.Fatalf("err = %v, want %s", out.Err, tc.err)
				}
				if len(got.moves) != before || len(got.placements) != 0 || len(got.epochs) != 0 {
					t.Fatalf("a refusal changed the directory: %+v", got)
				}
				return
			}
			if out.Err != nil {
				t.Fatal(out.Err)
			}
			mv := out.Value.(Move)
			if mv.Step != tc.step {
				t.Fatalf("step = %s, want %s", mv.Step, tc.step)
			}
			if tc.step == MoveActivated {
				if got.placements["acme/main"] != other || got.epochs["acme/main"] != 1 {
					t.Fatalf("activation: placements %v epochs %v", got.placements, got.epochs)
				}
			} else if len(got.placements) != 0 || len(got.epochs) != 0 {
				t.Fatalf("%s changed the directory: %v %v", tc.step, got.placements, got.epochs)
			}
		})
	}
}

// A move after an activation asks at the new epoch; ended moves past
// MovesKept are forgotten, oldest first.
func TestDecideMoveEpochsAndKept(t *testing.T) {
	d := directory{}
	var g uint64 = GroupOf(3, "acme", "main")
	for i := range MovesKept + 3 {
		to := g%3 + 2
		var out Outcome
		d, out = decideMove(d, MetaCommand{Op: OpMoveBegin, Move: &MoveStep{Tenant: "acme", Session: "main", To: to, Epoch: uint64(i)}}, 3)
		if out.Err != nil {
			t.Fatalf("move %d: %v", i, out.Err)
		}
		for _, s := range []MoveStep{{Step: MoveFenced, Seq: 1}, {Step: MoveProven, Seq: 1}, {Step: MoveActivated}, {Step: MoveRetired}} {
			s.Tenant, s.Session = "acme", "main"
			if d, out = decideMove(d, MetaCommand{Op: OpMoveStep, Move: &s}, 3); out.Err != nil {
				t.Fatalf("move %d %s: %v", i, s.Step, out.Err)
			}
		}
		g = to
	}
	if d.epochs["acme/main"] != MovesKept+3 || d.placements["acme/main"] != g {
		t.Fatalf("epoch %d group %d", d.epochs["acme/main"], d.placements["acme/main"])
	}
	if len(d.moves) != MovesKept || d.moves[0].ID != 4 {
		t.Fatalf("%d moves kept, the first %d", len(d.moves), d.moves[0].ID)
	}
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

// An aborted move's unfence, sent after another move of the same session
// began, is that move's: it marks the aborted one and leaves the new one
// as it is (the mover names the move; without the name the step went to
// the new move and was refused, so the aborted one stayed fenced).
func TestDecideMoveStepOfAnEarlierMove(t *testing.T) {
	const groups = 3
	hash := GroupOf(groups, "acme", "main")
	aborted := Move{ID: 1, Tenant: "acme", Session: "main", From: hash, To: hash%3 + 2, Step: MoveAborted, Began: 10, Updated: 20}
	again := Move{ID: 2, Tenant: "acme", Session: "main", From: hash, To: (hash+1)%3 + 2, Step: MoveBegun, Began: 30, Updated: 30}
	d := directory{moves: []Move{aborted, again}}
	got, out := decideMove(d, MetaCommand{Op: OpMoveStep, Move: &MoveStep{Tenant: "acme", Session: "main", Move: 1, Step: MoveUnfenced}, TS: 40}, groups)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	if mv := out.Value.(Move); mv.ID != 1 || !mv.Unfenced || mv.Unwound {
		t.Fatalf("answered %+v", mv)
	}
	if got.moves[0].ID != 1 || !got.moves[0].Unfenced || got.moves[1] != again {
		t.Fatalf("moves %+v", got.moves)
	}
	// Unnamed, as an old log's step was, it is the active move's: refused.
	if _, out := decideMove(d, MetaCommand{Op: OpMoveStep, Move: &MoveStep{Tenant: "acme", Session: "main", Step: MoveUnfenced}, TS: 40}, groups); out.Err == nil {
		t.Fatal("an unnamed unfence applied to the active move")
	}
}
