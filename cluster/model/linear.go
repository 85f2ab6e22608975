package model

import (
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
// read the whole list. The simulator and the multi-process tests use it.
var Linear = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			s := op.Input.(Op).Session
			if _, ok := by[s]; !ok {
				keys = append(keys, s)
			}
			by[s] = append(by[s], op)
		}
		slices.Sort(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return []string(nil) },
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
