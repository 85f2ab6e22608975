package replica

// Placement epochs: a group's placement epoch is the raft index of the
// last configuration change applied in it (0 before any). Every replica
// applies the same entries, so every replica of a group names the same
// epoch at the same applied index; it is kept with the applied index (and
// so in the snapshot's head), so a replica restored from a snapshot knows
// it too. A custody receipt is bound to the epoch it was made at: after a
// change, the copies the new placement requires establish custody again.

import (
	"fmt"

	"tally/cluster/node"
)

// nextEpoch is the epoch after entry e: its index if it is a
// configuration change, else epoch unchanged.
func nextEpoch(epoch uint64, e node.Entry) uint64 {
	if e.Kind == node.KindConf {
		return e.Index
	}
	return epoch
}

// PlacementEpoch is group's placement epoch as this replica has applied
// it: the index of the last configuration change applied in the group, 0
// before any (or for a group it does not hold).
func (m *SM) PlacementEpoch(group uint64) uint64 {
	var a applied
	var err error
	if group == node.MetaGroup {
		a, err = m.metaSM.progress(group)
	} else {
		a, err = m.dataSM.progress(group)
	}
	if err != nil {
		m.dataSM.log.Warn("replica: read a placement epoch", "group", group, "err", fmt.Sprint(err))
		return 0
	}
	return a.Epoch
}
