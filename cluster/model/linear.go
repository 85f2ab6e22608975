package model

import (
	"maps"
	"slices"

	"github.com/anishathalye/porcupine"
)

// Op is one client operation on a session, for the linearizability check:
// an append of Value, or a read of the whole session.
type Op struct {
	Read    bool
	Session string
	Value   string
}

// Out is an operation's outcome: an append's position in its session
// (1-based), a read's values in order.
type Out struct {
	Seq    uint64
	Values []string
}

// Linear is the model a client history is checked against with porcupine:
// each session an append-only list; an append returns its position, a
// read the whole list. The multi-process tests use it (the simulator,
// which runs the real replica, checks against Ledger).
var Linear = porcupine.Model{
	Partition: partitionBy(func(in any) string { return in.(Op).Session }),
	Init:      func() any { return []string(nil) },
	Step: func(state, input, output any) (bool, any) {
		st := state.([]string)
		in, out := input.(Op), output.(Out)
		if in.Read {
			return slices.Equal(st, out.Values), st
		}
		if out.Seq != uint64(len(st))+1 {
			return false, st
		}
		next := make([]string, len(st), len(st)+1)
		copy(next, st)
		return true, append(next, in.Value)
	},
	Equal: func(a, b any) bool { return slices.Equal(a.([]string), b.([]string)) },
}

// partitionBy splits a history by session (porcupine checks each part on
// its own), the sessions in name order so a run is repeatable.
func partitionBy(session func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		for _, op := range history {
			s := session(op.Input)
			by[s] = append(by[s], op)
		}
		out := make([][]porcupine.Operation, 0, len(by))
		for _, k := range slices.Sorted(maps.Keys(by)) {
			out = append(out, by[k])
		}
		return out
	}
}

// LedgerKind is what a LedgerOp does.
type LedgerKind uint8

// The operations on a session of tally's ledger.
const (
	Declare LedgerKind = iota + 1 // declare a promise
	Resolve                       // resolve (satisfy) a promise
	List                          // read the session's promises
)

// LedgerOp is one client operation on a session of tally's ledger, for
// checking a cluster that runs the real replica: a promise declared (Text
// is unique in the history), one resolved (named by its Text), or a read
// of the session's promises.
type LedgerOp struct {
	Kind    LedgerKind
	Session string
	Text    string
}

// LedgerOut is an operation's outcome: a write's record sequence in its
// session; a read's promises, in declaration order.
type LedgerOut struct {
	Seq      uint64
	Promises []Promise
}

// Promise is a promise as a read sees it.
type Promise struct {
	Text     string
	Seq      uint64 // the sequence of its declaration's record
	Resolved bool
}

// LinesPerWrite is what one write under a request id appends to its
// session: its record, then the tally.request record that binds the
// request id to its response. So the k-th write's record is line
// LinesPerWrite·(k-1)+1.
const LinesPerWrite = 2

// ledgerState is a session as the model has it: the lines its log holds
// and its promises. A step never changes a state in place.
type ledgerState struct {
	lines    uint64
	promises []Promise
}

// Ledger is the model a history of LedgerOps is checked against: each
// session a log a write appends LinesPerWrite lines to, returning its
// record's sequence (the line after the log's end); a resolve applies only
// to a promise declared and not yet resolved; a read sees every promise
// declared, and every resolution, linearized before it, and nothing else.
var Ledger = porcupine.Model{
	Partition: partitionBy(func(in any) string { return in.(LedgerOp).Session }),
	Init:      func() any { return ledgerState{} },
	Step:      stepLedger,
	Equal: func(a, b any) bool {
		x, y := a.(ledgerState), b.(ledgerState)
		return x.lines == y.lines && slices.Equal(x.promises, y.promises)
	},
}

func stepLedger(state, input, output any) (bool, any) {
	st, in, out := state.(ledgerState), input.(LedgerOp), output.(LedgerOut)
	if in.Kind == List {
		return slices.Equal(st.promises, out.Promises), st
	}
	if out.Seq != st.lines+1 {
		return false, st
	}
	next := ledgerState{lines: st.lines + LinesPerWrite}
	switch in.Kind {
	case Declare:
		next.promises = append(slices.Clip(st.promises), Promise{Text: in.Text, Seq: out.Seq})
	case Resolve:
		i := slices.IndexFunc(st.promises, func(p Promise) bool { return p.Text == in.Text })
		if i < 0 || st.promises[i].Resolved {
			return false, st
		}
		next.promises = slices.Clone(st.promises)
		next.promises[i].Resolved = true
	default:
		return false, st
	}
	return true, next
}
