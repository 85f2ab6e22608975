package ledger

import (
	"time"

	"tally/claim"
	"tally/expect"
	"tally/family"
	"tally/promise"
	"tally/store"
)

// The ledger reaches the families only through family.Interface (deciding,
// encoding, viewing) and family.Folder (folding): one loop folds every
// family's lines and one function turns any family's decision into records.
// The promise writer's fast path (PrepareDeclare, Admit) and the fold of a
// promise event just encoded are the two places that know the promise core
// by name, because they are the hot paths.

// folder is a family's fold and whether its lines are re-folded on load:
// a family without a snapshot codec (all but promises) is rebuilt from its
// lines, which the state locates.
type folder struct {
	family.Folder
	refold bool
}

// folders are the state's families, in the order the fold asks them.
// Promises come first: they are most of most logs.
func (s *State) folders() [3]folder {
	return [3]folder{{s.Promises, false}, {s.Claims, true}, {s.Expects, true}}
}

// metaOf is what the log knows about an entry, for the families.
func metaOf(e store.Entry) family.Meta {
	return family.Meta{Seq: e.Env.Seq, Actor: e.Env.Actor}
}

func (l *Ledger) promiseFamily(st *State) promise.Family {
	return promise.Family{S: st.Promises, Limits: l.cfg.Limits}
}

func claimFamily(st *State) claim.Family { return claim.Family{S: st.Claims} }

func expectFamily(st *State) expect.Family { return expect.Family{S: st.Expects} }

// input is what a family's decision knows besides the state and command.
func input(opts WriteOptions, human bool, now time.Time) family.Input {
	return family.Input{Actor: opts.Actor, Human: human, Now: now}
}

// decideWith decides cmd with family f and encodes the events it returns
// as the records to append. keep, if set, stores an event beside its record
// (the promise event, which is folded as it is and handed back in Result).
func decideWith[C, E, V any](f family.Interface[C, E, V], in family.Input, cmd C, keep func(*pending, E)) ([]pending, []string, error) {
	evs, warn, err := f.Decide(in, cmd)
	if err != nil {
		return nil, nil, err
	}
	return encodeWith(f, evs, keep), warn, nil
}

// encodeWith encodes events of family f as records to append.
func encodeWith[C, E, V any](f family.Interface[C, E, V], evs []E, keep func(*pending, E)) []pending {
	out := make([]pending, len(evs))
	for i, ev := range evs {
		r := f.Encode(ev)
		out[i] = pending{typ: r.Type, body: r.Body, party: r.Party}
		if keep != nil {
			keep(&out[i], ev)
		}
	}
	return out
}

// keepPromise stores a promise event beside its record.
func keepPromise(p *pending, ev promise.Event) { p.ev = ev }
