package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"tally/auth"
	"tally/cluster/node"
	"tally/cluster/replica"
)

// The tokener creates the cluster's tokens and revokes some, through the
// meta group, as a node's CreateToken and RevokeToken do (the secret
// minted at the proposer, only its record proposed; a replica-decided
// revocation), one command at a time, each retried through any live node
// under the same record until answered, while nodes crash and the meta
// group's snapshots install. The end checks that the meta group's
// replicas hold the same token table, and that it holds what was
// acknowledged.
type tokener struct {
	tokens  []*simToken
	cmd     *replica.MetaCommand // the command under way
	revoke  *simToken            // the token cmd revokes
	attempt int                  // never reset, so a late answer to an earlier attempt is ignored
}

// simToken is a token created: its secret, its record, and whether its
// creation and revocation were acknowledged.
type simToken struct {
	secret          string
	rec             auth.Record
	created, revokd bool
}

// maxTokens bounds the tokens of a run: with their revocations and the
// elections' empty entries, enough to compact the meta group's log now and
// then (node.Config.CompactAfter), sending snapshots to nodes behind, and
// few enough to keep a seed fast.
const maxTokens = 6

func (w *World) startTokener() {
	w.tokener = &tokener{}
	w.after(time.Duration(w.rng.IntN(200))*time.Millisecond, func() { w.tokenStep(w.tokener) })
}

// tokenStep starts the tokener's next command: a revocation of one of its
// tokens one time in three, else a new token, until it made maxTokens.
func (w *World) tokenStep(t *tokener) {
	if w.err != nil || w.now >= int64(w.opt.Chaos)+int64(w.opt.Quiesce)/2 {
		return
	}
	t.revoke = nil
	var live []*simToken
	for _, tk := range t.tokens {
		if tk.created && !tk.revokd {
			live = append(live, tk)
		}
	}
	switch {
	case len(live) > 0 && w.rng.IntN(3) == 0:
		t.revoke = live[w.rng.IntN(len(live))]
		t.cmd = &replica.MetaCommand{Op: replica.OpTokenRevoke, TokenID: t.revoke.rec.ID, TS: epoch + w.now}
	case len(t.tokens) < maxTokens:
		secret, rec, err := auth.Mint(tenant, fmt.Sprintf("p%d", len(t.tokens)), auth.RoleAgent, w.clock.Now())
		if err != nil {
			w.fail("tokener: %v", err)
			return
		}
		t.tokens = append(t.tokens, &simToken{secret: secret, rec: rec})
		t.cmd = &replica.MetaCommand{Op: replica.OpTokenCreate, Token: &rec, TS: epoch + w.now}
	default:
		return
	}
	w.tokenAttempt(t)
}

// tokenAttempt proposes the tokener's command through some live node.
func (w *World) tokenAttempt(t *tokener) {
	if w.err != nil {
		return
	}
	t.attempt++
	a := t.attempt
	live := func() bool { return t.attempt == a }
	data, err := json.Marshal(t.cmd)
	if err != nil {
		w.fail("tokener: %v", err)
		return
	}
	w.through(live, func() { w.tokenAttempt(t) }, func(sn *simNode, retry func()) {
		sm := sn.sm
		sn.n.Propose(node.MetaGroup, data, func(r node.ProposeResult) {
			if !live() {
				return
			}
			if r.Err != nil {
				retry()
				return
			}
			out, ok := sm.Take(node.MetaGroup, r.Index)
			if !ok {
				w.fail("node %d has no outcome for entry %d of the meta group", sn.id, r.Index)
				return
			}
			e, ok := out.Value.(replica.TokenEntry)
			if out.Err != nil || !ok {
				w.fail("tokener: %s: %v (%T)", t.cmd.Op, out.Err, out.Value)
				return
			}
			t.attempt++ // answered: later answers to this command are ignored
			if t.revoke != nil {
				if !e.Revoked || e.ID != t.revoke.rec.ID {
					w.fail("tokener: revoking %s answered %+v", t.revoke.rec.ID, e)
					return
				}
				t.revoke.revokd = true
				w.stats.TokensRevoked++
			} else {
				tk := t.tokens[len(t.tokens)-1]
				if !sameToken(e, replica.TokenEntry{Record: tk.rec}) {
					w.fail("tokener: creating %s answered %+v", tk.rec.ID, e)
					return
				}
				tk.created = true
				w.stats.Tokens++
			}
			w.mix(14, uint64(len(t.tokens)))
			w.after(time.Duration(50+w.rng.IntN(150))*time.Millisecond, func() { w.tokenStep(t) })
		})
	})
}

// checkTokens requires every replica of the meta group to hold the same
// token table (ids, hashes, revocations, in creation order), every token
// whose creation was acknowledged, revoked if its revocation was, and to
// authenticate each one's secret exactly when it is not revoked.
func (w *World) checkTokens(metas []*simNode) error {
	t := w.tokener
	if t == nil {
		return nil
	}
	ref := metas[0].sm.TokenEntries()
	for _, sn := range metas[1:] {
		if es := sn.sm.TokenEntries(); !slices.EqualFunc(es, ref, sameToken) {
			return fmt.Errorf("node %d's tokens %v differ from node %d's %v", sn.id, es, metas[0].id, ref)
		}
	}
	for _, tk := range t.tokens {
		i := slices.IndexFunc(ref, func(e replica.TokenEntry) bool { return e.ID == tk.rec.ID })
		if i < 0 {
			if tk.created {
				return fmt.Errorf("token %s was created but is in no replica's table", tk.rec.ID)
			}
			continue
		}
		if !sameToken(ref[i], replica.TokenEntry{Record: tk.rec, Revoked: ref[i].Revoked, RevokedAt: ref[i].RevokedAt}) {
			return fmt.Errorf("token %s is held as %+v, created as %+v", tk.rec.ID, ref[i].Record, tk.rec)
		}
		if tk.revokd && !ref[i].Revoked {
			return fmt.Errorf("token %s was revoked but is not", tk.rec.ID)
		}
		for _, sn := range metas {
			_, err := sn.sm.Tokens().Authenticate(tk.secret)
			if (err == nil) == ref[i].Revoked {
				return fmt.Errorf("node %d: token %s (revoked: %v) authenticates: %v", sn.id, tk.rec.ID, ref[i].Revoked, err)
			}
		}
	}
	w.mix(15, uint64(len(ref)))
	return nil
}

// sameToken compares two token entries, their instants as instants.
func sameToken(a, b replica.TokenEntry) bool {
	x, y := a.Record, b.Record
	return x.ID == y.ID && x.Hash == y.Hash && x.Tenant == y.Tenant && x.Participant == y.Participant && x.Role == y.Role &&
		x.Created.Equal(y.Created) && a.Revoked == b.Revoked && a.RevokedAt.Equal(b.RevokedAt)
}
