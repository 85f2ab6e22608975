package node

import "errors"

var (
	// ErrFailed: the node's disk failed; it serves nothing until restarted.
	ErrFailed = errors.New("node: stopped after a disk failure")
	// ErrTimeout: no outcome within ProposalTimeout. A proposal that timed
	// out after raft took it (ProposeResult.Proposed) may still commit;
	// retry it under the same request id.
	ErrTimeout = errors.New("node: timed out waiting for the group")
	// ErrBusy: MaxPending requests already wait at this node.
	ErrBusy = errors.New("node: too many pending requests")
	// ErrTooLarge: the command exceeds MaxEntrySize.
	ErrTooLarge = errors.New("node: command exceeds the maximum entry size")
	// ErrUnknownGroup: this node does not host the group.
	ErrUnknownGroup = errors.New("node: group not hosted here")
	// ErrNotMember: this node hosts the group but is not (or no longer) in
	// its configuration, so it cannot serve it. Retry at another node.
	ErrNotMember = errors.New("node: not a member of the group")
	// ErrLeaderChanged: the group's leader changed while a proposal handed
	// to the old one waited. It may still commit: retry it under the same
	// request id.
	ErrLeaderChanged = errors.New("node: the group's leader changed while the proposal waited")
	// ErrNoLeader: the group has no leader known here; a read cannot be
	// confirmed. Retry shortly.
	ErrNoLeader = errors.New("node: the group has no known leader")
	// ErrNotLeader: membership changes are proposed at the group's leader.
	ErrNotLeader = errors.New("node: not the group's leader")
	// ErrConfChangePending: one membership change at a time per group.
	ErrConfChangePending = errors.New("node: a membership change of the group is still pending")
	// ErrLastVoter: the change would leave the group without a voter.
	ErrLastVoter = errors.New("node: the change would remove the group's last voter")
	// ErrWouldLoseQuorum: the voters after the change that this leader
	// has heard from recently are not a majority of them.
	ErrWouldLoseQuorum = errors.New("node: the change would leave too few reachable voters for a quorum")
)
