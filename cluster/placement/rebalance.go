package placement

import (
	"fmt"
	"slices"
)

// replacement is what adding a learner on a node leads to: the voter step
// 4 then removes (v, 0 if none) and the spread left.
type replacement struct {
	v     uint64
	after spread
}

// replaced plays steps 2 and 4 forward: c added and promoted, which voter
// goes. The loads count c's new replica.
func replaced(nodes []Node, byID map[uint64]Node, g Group, c uint64, good func(uint64) bool) (replacement, map[uint64]Node) {
	after := make(map[uint64]Node, len(byID))
	for id, n := range byID {
		after[id] = n
	}
	n := after[c]
	n.Replicas++
	n.Bytes += g.Bytes
	after[c] = n
	h := g
	h.Voters = append(slices.Clone(g.Voters), c)
	h.Learners = nil
	v, ok := removal(after, h, good)
	if !ok || v == c {
		return replacement{}, after
	}
	left := slices.DeleteFunc(slices.Clone(h.Voters), func(x uint64) bool { return x == v })
	return replacement{v: v, after: spreadOf(after, left)}, after
}

// rebalance finds a move of one of the group's replicas off a node above
// the band toward a lighter one: the candidate c to add, the voter v it
// replaces, and why.
func rebalance(nodes []Node, byID map[uint64]Node, g Group, good func(uint64) bool) (c, v uint64, why string, ok bool) {
	el := eligible(nodes, Constraint{})
	if len(el) == 0 {
		return 0, 0, "", false
	}
	var total int
	var totalBytes int64
	for _, n := range el {
		total += n.Replicas
		totalBytes += n.Bytes
	}
	mean := float64(total) / float64(len(el))
	meanBytes := float64(totalBytes) / float64(len(el))
	cur := spreadOf(byID, g.Voters)
	var skip []uint64
	for range len(nodes) {
		cand, found := best(nodes, byID, g, skip)
		if !found {
			return 0, 0, "", false
		}
		skip = append(skip, cand)
		r, _ := replaced(nodes, byID, g, cand, good)
		if r.v == 0 || r.after.compare(cur) < 0 {
			continue
		}
		src, dst := byID[r.v], byID[cand]
		switch {
		case src.Replicas-dst.Replicas >= MoveGapMin && (float64(src.Replicas) > mean*(1+Band) || float64(dst.Replicas) < mean*(1-Band)):
			return cand, r.v, fmt.Sprintf("node %d holds %d replicas, node %d %d, mean %.1f, band %d%%", src.ID, src.Replicas, dst.ID, dst.Replicas, mean, int(Band*100)), true
		case g.Bytes > 0 && dst.Replicas < src.Replicas && float64(src.Bytes) > meanBytes*(1+Band) && dst.Bytes+g.Bytes < src.Bytes-g.Bytes:
			return cand, r.v, fmt.Sprintf("node %d holds %d bytes, node %d %d, mean %.0f, band %d%%", src.ID, src.Bytes, dst.ID, dst.Bytes, meanBytes, int(Band*100)), true
		}
	}
	return 0, 0, "", false
}
