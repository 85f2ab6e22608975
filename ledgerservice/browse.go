package ledgerservice

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"tally/claim"
	"tally/family"
	"tally/ledger"
	"tally/promise"
	"tally/refuse"
	"tally/service"
	"tally/store"
)

var _ service.Browse = (*Local)(nil)

// SessionList lists the sessions of the ledger directory that hold a log.
func (s *Local) SessionList(_ context.Context, c service.Call) ([]service.SessionInfo, error) {
	root, err := s.root()
	if err != nil {
		return nil, err
	}
	ss, err := store.Sessions(root, c.Tenant)
	if err != nil {
		return nil, err
	}
	out := []service.SessionInfo{}
	for _, x := range ss {
		dir, err := store.SessionDir(root, x.Tenant, x.Name)
		if err != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, "log.jsonl"))
		if err != nil {
			continue // gone since it was listed
		}
		out = append(out, service.SessionInfo{Tenant: x.Tenant, Session: x.Name, Bytes: fi.Size()})
	}
	return out, nil
}

// History folds the session's log afresh into the family's state, as the
// ledger folds it, and keeps the steps that concern id.
func (s *Local) History(ctx context.Context, c service.Call, family, id string) ([]service.HistoryStep, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return nil, err
	}
	steps := []service.HistoryStep{}
	switch family {
	case "promise":
		st := promise.NewState()
		err = history(l, st, func(e store.Entry, typ string) error {
			ev, _ := promise.Decode(e.Line) // which promise it is about (ApplyLine has read it)
			if ev.ID != id {
				return nil
			}
			p, _ := st.Get(id)
			state := ""
			if p != nil {
				state = string(st.Status(p))
			}
			steps = append(steps, service.HistoryStep{Seq: e.Env.Seq, Type: typ, Actor: e.Env.Actor, State: state, Record: slices.Clone(e.Line)})
			return nil
		})
	case "claim":
		st := claim.NewStateConfig(claim.Config{Timekeeper: s.timekeeper})
		last := ""
		err = history(l, st, func(e store.Entry, typ string) error {
			ev, _ := claim.Decode(e.Line) // which claim it is about (ApplyLine has read it)
			v, ok := st.Claim(id, time.Time{})
			if !ok {
				return nil
			}
			state := string(v.State)
			if ev.Claim != id && state == last {
				return nil
			}
			h := service.HistoryStep{Seq: e.Env.Seq, Type: typ, Actor: e.Env.Actor, State: state, Record: slices.Clone(e.Line)}
			if ev.Claim != id {
				h.Via = ev.Claim
			}
			steps = append(steps, h)
			last = state
			return nil
		})
	default:
		return nil, refuse.Invalidf("family", "must be promise or claim")
	}
	if err != nil {
		return nil, err
	}
	if len(steps) == 0 {
		return nil, refuse.NotFoundf(family, "no "+family+" with id "+id)
	}
	return steps, nil
}

// history folds the session's log afresh, up to what is durable, into one
// family's state as the ledger folds it (family.Folder), calling step with
// each line f folded, after it is applied. Lines of other families, and
// lines f cannot read (skipped by the ledger's fold too), are passed over.
func history(l *ledger.Ledger, f family.Folder, step func(e store.Entry, typ string) error) error {
	_, _, err := l.Log().ScanUntil(store.Position{}, l.Durable().Offset, func(e store.Entry) error {
		typ, err := promise.PeekType(e.Line)
		if err != nil || !f.Known(typ) {
			return nil
		}
		if f.ApplyLine(family.Meta{Seq: e.Env.Seq, Actor: e.Env.Actor}, e.Line) != nil {
			return nil
		}
		return step(e, typ)
	})
	return err
}
