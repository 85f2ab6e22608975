package node

import (
	"errors"
	"fmt"
	"time"
)

// Config holds a node's named limits. Start from DefaultConfig.
type Config struct {
	// ID is this node's id, the same in every group it belongs to; never 0.
	ID uint64
	// ClusterID names the cluster; the store is claimed for (ClusterID, ID)
	// and refuses to serve as another.
	ClusterID string
	// Groups lists the groups this node hosts: the meta group (MetaGroup)
	// and the data groups.
	Groups []uint64
	// TickInterval is the wall time of one raft tick; the driver ticks.
	TickInterval time.Duration
	// ElectionTicks and HeartbeatTicks are raft's timeouts in ticks.
	ElectionTicks  int
	HeartbeatTicks int
	// MaxEntrySize bounds one proposal's command, in bytes; larger ones are
	// refused at Propose.
	MaxEntrySize int
	// MaxMsgSize bounds the entries raft packs into one append message.
	MaxMsgSize uint64
	// MaxInflightMsgs bounds append messages in flight to one follower.
	MaxInflightMsgs int
	// MaxUncommittedBytes bounds a leader's uncommitted log; proposals
	// beyond it are dropped by raft (and retried here until they time out).
	MaxUncommittedBytes uint64
	// MaxPending bounds proposals and reads waiting at this node; more are
	// refused with ErrBusy.
	MaxPending int
	// ProposalTimeout is how long a proposal or read may wait before it
	// fails with ErrTimeout (the outcome of a timed-out proposal is unknown;
	// the client retries it under the same request id).
	ProposalTimeout time.Duration
	// CompactAfter is how many applied entries a group keeps before its log
	// is compacted; CompactKeep of them stay for followers slightly behind.
	CompactAfter uint64
	CompactKeep  uint64
}

// MetaGroup is the id of the group holding the directory and membership.
const MetaGroup uint64 = 1

// DefaultConfig is a node hosting the meta group and eight data groups.
func DefaultConfig(id uint64) Config {
	groups := []uint64{MetaGroup}
	for g := uint64(0); g < 8; g++ {
		groups = append(groups, MetaGroup+1+g)
	}
	return Config{
		ID:                  id,
		Groups:              groups,
		TickInterval:        100 * time.Millisecond,
		ElectionTicks:       10,
		HeartbeatTicks:      1,
		MaxEntrySize:        1 << 20,
		MaxMsgSize:          1 << 20,
		MaxInflightMsgs:     256,
		MaxUncommittedBytes: 64 << 20,
		MaxPending:          4096,
		ProposalTimeout:     5 * time.Second,
		CompactAfter:        10000,
		CompactKeep:         1000,
	}
}

// Validate reports the first limit out of range, naming it.
func (c Config) Validate() error {
	var errs []error
	if c.ID == 0 {
		errs = append(errs, errors.New("node config: ID must not be 0"))
	}
	if len(c.Groups) == 0 {
		errs = append(errs, errors.New("node config: Groups must list at least one group"))
	}
	seen := map[uint64]bool{}
	for _, g := range c.Groups {
		if g == 0 {
			errs = append(errs, errors.New("node config: group id 0 is reserved"))
		}
		if seen[g] {
			errs = append(errs, fmt.Errorf("node config: group %d listed twice", g))
		}
		seen[g] = true
	}
	if c.TickInterval <= 0 {
		errs = append(errs, errors.New("node config: TickInterval must be positive"))
	}
	if c.HeartbeatTicks <= 0 {
		errs = append(errs, errors.New("node config: HeartbeatTicks must be positive"))
	}
	if c.ElectionTicks <= c.HeartbeatTicks {
		errs = append(errs, errors.New("node config: ElectionTicks must exceed HeartbeatTicks"))
	}
	if c.MaxEntrySize <= 0 {
		errs = append(errs, errors.New("node config: MaxEntrySize must be positive"))
	}
	if c.MaxMsgSize < uint64(c.MaxEntrySize) {
		errs = append(errs, errors.New("node config: MaxMsgSize must be at least MaxEntrySize"))
	}
	if c.MaxInflightMsgs <= 0 {
		errs = append(errs, errors.New("node config: MaxInflightMsgs must be positive"))
	}
	if c.MaxUncommittedBytes < uint64(c.MaxEntrySize) {
		errs = append(errs, errors.New("node config: MaxUncommittedBytes must be at least MaxEntrySize"))
	}
	if c.MaxPending <= 0 {
		errs = append(errs, errors.New("node config: MaxPending must be positive"))
	}
	if c.ProposalTimeout <= 0 {
		errs = append(errs, errors.New("node config: ProposalTimeout must be positive"))
	}
	if c.CompactAfter == 0 || c.CompactKeep >= c.CompactAfter {
		errs = append(errs, errors.New("node config: CompactAfter must be positive and exceed CompactKeep"))
	}
	return errors.Join(errs...)
}
