package node

import (
	"io"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// EntryKind says what a committed entry carries.
type EntryKind uint8

const (
	// KindCommand is a client command proposed through Propose.
	KindCommand EntryKind = iota + 1
	// KindEmpty is raft's own entry (a new leader's no-op): it carries no
	// command but still advances the applied index.
	KindEmpty
	// KindConf is a configuration change applied in the group (a voter or
	// learner added or removed, a joint change entered or left): no
	// command; its index is the group's placement epoch from then on.
	KindConf
)

// Entry is one committed entry handed to the state machine.
type Entry struct {
	Index uint64
	Kind  EntryKind
	Data  []byte // the command as proposed; nil for KindEmpty and KindConf
	// Waited says a proposal of this node waits for the entry's result:
	// set for Apply (not Prepare). Without it nobody reads the result, so
	// a state machine may leave out what serves only the answer (the
	// views of a reply another node sends), never what changes its state.
	Waited bool
}

// StateMachine is what a node replicates. The node calls it from its loop
// only, never concurrently, except WriteSnapshot.
//
// Contracts:
//   - Apply is deterministic: the same entries from the same state give the
//     same results and state on every replica. A command the state machine
//     refuses is a result (for example an encoded error), not an error:
//     Apply's error means the state machine cannot go on (its disk failed),
//     and the node then stops.
//   - When Apply returns, its effects and the index of its last entry are
//     durable together, so that after a restart Applied says exactly what
//     was applied and nothing is applied twice. The node never hands an
//     entry at or below Applied again (after a restart raft replays from the
//     saved configuration's index, which may be older; the node filters).
//   - Snapshot describes the group's state as of Applied: a manifest,
//     cheap to make, that the body is produced from later.
//   - WriteSnapshot writes the body of a manifest Snapshot returned (each
//     entry's Length bytes, in order; Manifest.WriteEntries). It may run on
//     any goroutine, concurrently with the loop's calls, and after Apply
//     has moved on: what the manifest names must stay producible as it was
//     at the snapshot's index (an append-only log's prefix does). What can
//     no longer be produced is an error; the stream fails and raft sends
//     a new snapshot.
//   - Restore replaces the group's state with a snapshot's, durably, with
//     Applied = index, reading the body (exactly the manifest's BodySize
//     bytes). The empty manifest and body are the state of a new group.
type StateMachine interface {
	Applied(group uint64) (uint64, error)
	Apply(group uint64, ents []Entry) (results [][]byte, err error)
	Snapshot(group uint64) (index uint64, m Manifest, err error)
	WriteSnapshot(group uint64, m Manifest, w io.Writer) error
	Restore(group uint64, index uint64, m Manifest, body io.Reader) error
}

// Preparer is a StateMachine that must make something durable before it
// applies a batch (a replica: where the sessions the batch writes stood
// before it). The node hands it each group's batch before persisting the
// iteration's raft writes, with the raft batch they go into, so that one
// fsync makes both durable; Apply then gets exactly these entries, unless
// the node failed in between. Prepare writes only keys of its own (not
// starting with 'r') and changes no state a read could see.
type Preparer interface {
	Prepare(group uint64, ents []Entry, w PrepareWriter) error
}

// PrepareWriter is the iteration's raft batch as a Preparer may write it.
type PrepareWriter interface {
	Set(key, value []byte) error
}

// Envelope is one raft message of one group.
type Envelope struct {
	Group uint64
	Msg   *pb.Message
	// Snapshot is a received MsgSnap's body; nil for other messages.
	Snapshot *InboundSnapshot
}

// InboundSnapshot is a received snapshot's body, which the transport
// received whole (and checked) before handing the MsgSnap to the node.
type InboundSnapshot struct {
	// Body is the snapshot's body. The node closes it once restored, or at
	// once if raft did not take the snapshot; closing releases it (the
	// transport removes its spool file).
	Body io.ReadCloser
	// Stepped, if set, is told from the loop, once the MsgSnap was
	// stepped, whether raft took it. The transport acknowledges the stream
	// then: the sender reports the snapshot finished, and its next append
	// finds this replica's log at the snapshot's index rather than behind
	// it (which would make it send the snapshot again).
	Stepped func(taken bool)
}

// OutboundSnapshot is a MsgSnap to send with its body.
type OutboundSnapshot struct {
	// Envelope is the MsgSnap; its snapshot's Data is the Manifest.
	Envelope Envelope
	// Size is the body's length, the manifest's BodySize.
	Size uint64
	// Write writes the body; the transport calls it once, from any
	// goroutine.
	Write func(w io.Writer) error
	// Done is told the outcome once, from any goroutine (possibly before
	// SendSnapshot returns): nil once the receiver acknowledged the whole
	// body, else why it failed.
	Done func(err error)
}

// Transport carries messages between nodes. Send must not block: a
// transport whose queue to a peer is full drops the batch, and raft's
// retries recover. Messages to one peer in one call are one batch.
// SendSnapshot must not block either: it streams the body apart from the
// messages, so that heartbeats and appends do not wait behind it, with a
// bounded number of streams (a stream it cannot start is a failure told
// to Done).
type Transport interface {
	Send(to uint64, batch []Envelope)
	SendSnapshot(to uint64, snap OutboundSnapshot)
}

// Clock is the node's source of time, for deadlines only: raft's time is
// the ticks the driver gives it.
type Clock interface {
	Now() time.Time
}
