package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
	"go.etcd.io/raft/v3"

	"tally/cluster/model"
	"tally/cluster/node"
	"tally/ledger"
	"tally/service"
	"tally/store"
)

// sessions names every session the clients use: the promise sessions,
// then the other families'.
func (w *World) sessions() []string {
	out := make([]string, 0, w.opt.Sessions+famSessions)
	for i := range w.opt.Sessions {
		out = append(out, sessionName(i))
	}
	for i := range famSessions {
		out = append(out, famSessionName(i))
	}
	return out
}

// checkPrefixes requires that, for every session, each live replica's log
// is a prefix of the longest one, byte for byte: replicas may lag, never
// disagree.
func (w *World) checkPrefixes() {
	for _, session := range w.sessions() {
		var longest []byte
		var from uint64
		for _, sn := range w.upNodes() {
			log, err := readLog(sn.dir, session)
			if err != nil {
				w.fail("read node %d's log of %s: %v", sn.id, session, err)
				return
			}
			short, long := log, longest
			if len(short) > len(long) {
				short, long = long, short
			}
			if !bytes.HasPrefix(long, short) {
				w.fail("session %s diverges at line %d between node %d and node %d", session, divergence(short, long), from, sn.id)
				return
			}
			if len(log) > len(longest) {
				longest, from = log, sn.id
			}
		}
	}
}

// divergence is the first line (1-based) where two logs differ.
func divergence(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return bytes.Count(a[:n], []byte{'\n'}) + 1
}

func (w *World) finalChecks() error {
	for _, c := range w.clients {
		if c.busy {
			return fmt.Errorf("seed %d: client %d's operation %+v never completed after the faults healed", w.opt.Seed, c.id, c.op)
		}
	}
	for _, sn := range w.nodes {
		if !sn.up {
			return fmt.Errorf("seed %d: node %d is down at the end", w.opt.Seed, sn.id)
		}
	}
	members, err := w.members()
	if err != nil {
		return err
	}
	groups, err := w.checkPlacement(members)
	if err != nil {
		return fmt.Errorf("seed %d: %w", w.opt.Seed, err)
	}
	if err := w.checkMove(members); err != nil {
		return fmt.Errorf("seed %d: %w", w.opt.Seed, err)
	}
	if w.opt.Placement {
		if err := w.checkGoals(members); err != nil {
			return fmt.Errorf("seed %d: %w", w.opt.Seed, err)
		}
	}
	logs := map[string][]byte{}
	for _, session := range w.sessions() {
		log, err := w.identicalLogs(session, members[groups[session]])
		if err != nil {
			return fmt.Errorf("seed %d: %w", w.opt.Seed, err)
		}
		logs[session] = log
	}
	for _, sn := range w.nodes {
		if err := verifyReplica(sn); err != nil {
			return fmt.Errorf("seed %d: node %d: %w", w.opt.Seed, sn.id, err)
		}
	}
	if err := w.checkAcked(logs); err != nil {
		return fmt.Errorf("seed %d: %w", w.opt.Seed, err)
	}
	if err := w.checkFamilies(members, groups, logs); err != nil {
		return fmt.Errorf("seed %d: %w", w.opt.Seed, err)
	}
	if w.cust != nil {
		if err := w.checkCustody(members); err != nil {
			return fmt.Errorf("seed %d: custody: %w", w.opt.Seed, err)
		}
	}
	if err := w.checkTokens(members[node.MetaGroup]); err != nil {
		return fmt.Errorf("seed %d: %w", w.opt.Seed, err)
	}
	if res := porcupine.CheckOperationsTimeout(model.Ledger, w.history, 10*time.Second); res != porcupine.Ok {
		return fmt.Errorf("seed %d: the client history is not linearizable (porcupine: %v)", w.opt.Seed, res)
	}
	return nil
}

// members are each group's replicas: the members of its final
// configuration, as its leader has it.
func (w *World) members() (map[uint64][]*simNode, error) {
	members := map[uint64][]*simNode{}
	for i, g := range w.groups {
		for _, sn := range w.nodes {
			if st := sn.n.Status()[i]; st.State == raft.StateLeader {
				for _, id := range append(slices.Clone(st.Voters), st.Learners...) {
					members[g] = append(members[g], w.nodes[id-1])
				}
			}
		}
		if len(members[g]) == 0 {
			return nil, fmt.Errorf("seed %d: group %d has no leader after the faults healed", w.opt.Seed, g)
		}
	}
	return members, nil
}

// identicalLogs requires the session's log to be the same bytes on every
// replica of its group, and returns it; its chain head joins the trace.
func (w *World) identicalLogs(session string, replicas []*simNode) ([]byte, error) {
	var ref []byte
	for i, sn := range replicas {
		log, err := readLog(sn.dir, session)
		if err != nil {
			return nil, fmt.Errorf("node %d: session %s: %w", sn.id, session, err)
		}
		if i == 0 {
			ref = log
			continue
		}
		if !bytes.Equal(ref, log) {
			return nil, fmt.Errorf("session %s: node %d holds %d lines (chain head %s), node %d holds %d (chain head %s)", session,
				replicas[0].id, len(lines(ref)), chainHead(ref), sn.id, len(lines(log)), chainHead(log))
		}
	}
	head, _ := chainEnvelope(ref)
	w.mix(binary.BigEndian.Uint64(head.Hash[:8]), head.Seq)
	return ref, nil
}

// chainEnvelope is the envelope of a log's last line: its sequence and its
// chain hash, the hash of the whole log.
func chainEnvelope(log []byte) (store.Envelope, error) {
	ls := lines(log)
	if len(ls) == 0 {
		return store.Envelope{}, nil
	}
	return store.ParseEnvelope(ls[len(ls)-1])
}

func chainHead(log []byte) string {
	env, err := chainEnvelope(log)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%x at seq %d", env.Hash[:8], env.Seq)
}

// verifyReplica verifies every session log of a replica through its
// Service, as `tally verify --dir` does: every line's envelope and the
// hash chain, whole.
func verifyReplica(sn *simNode) error {
	logs, ok := sn.sm.Service().(service.Logs)
	if !ok {
		return fmt.Errorf("the replica's Service has no log verbs")
	}
	v, err := logs.VerifyAll(context.Background(), service.Call{})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if !v.Whole {
		return fmt.Errorf("verify: not whole: %s", v.JSON)
	}
	return nil
}

// record is what the acknowledgment check reads of a log line.
type record struct {
	seq       uint64
	requestID string
	request   bool // a tally.request record
}

func records(log []byte) ([]record, error) {
	var out []record
	for _, line := range lines(log) {
		env, err := store.ParseEnvelope(line)
		if err != nil {
			return nil, err
		}
		var body struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &body); err != nil {
			return nil, fmt.Errorf("line %d: %w", env.Seq, err)
		}
		out = append(out, record{seq: env.Seq, requestID: env.RequestID, request: body.Type == ledger.TypeRequest})
	}
	return out, nil
}

// checkAcked requires every acknowledged write to be in its session once:
// one record under its request id (besides its tally.request), at the
// sequence it was acknowledged with. The logs are the same on every
// replica (identicalLogs), so one copy answers for all.
func (w *World) checkAcked(logs map[string][]byte) error {
	recs := map[string][]record{}
	for s, log := range logs {
		rs, err := records(log)
		if err != nil {
			return fmt.Errorf("session %s: %w", s, err)
		}
		recs[s] = rs
	}
	for _, a := range w.acked {
		rs := recs[a.session]
		n := 0
		for _, r := range rs {
			if r.requestID == a.requestID && !r.request {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("acknowledged write %s to %s is present %d times", a.requestID, a.session, n)
		}
		if a.seq == 0 || a.seq > uint64(len(rs)) || rs[a.seq-1].requestID != a.requestID || rs[a.seq-1].request {
			return fmt.Errorf("acknowledged write %s to %s was told seq %d but is elsewhere", a.requestID, a.session, a.seq)
		}
	}
	return nil
}
