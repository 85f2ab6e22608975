package node

type compaction struct {
	g        *group
	to       uint64
	snapshot bool // the group installs a snapshot in this iteration
}

func (n *MultiRaft) compactions() []compaction {
	var out []compaction
	for _, g := range n.groups {
		first, _ := g.store.FirstIndex()
		if g.applied >= first-1+n.cfg.CompactAfter && g.smApplied >= g.applied {
			out = append(out, compaction{g: g, to: g.applied - n.cfg.CompactKeep})
		}
	}
	return out
}
