package promise

// idIndex maps promise ids to their place in the declaration order: open
// addressing with linear probing over a power-of-two table of positions.
// It costs 16 to 32 bytes per promise (a map costs several times that), and
// rebuilding it from a checkpoint is a tight loop rather than a million map
// insertions, which dominated opening a large ledger.
//
// Invariant: len(slots) is a power of two, at least twice the entries, so
// probes stay short and a free slot always exists.
//
// The table grows by doubling, but not all at once: rehashing every entry
// held the session lock for 15 ms at 131k promises and 38 ms at 262k, and
// every writer with it. The old table is kept, unchanged, and its slots are
// moved into the new one a few at a time by later inserts; until they all
// are, a lookup that misses the new table probes the old one.
type idIndex struct {
	// slots hold the hash's high 32 bits (a fingerprint that spares most
	// comparisons the trip to the promise) and, below, the position in
	// order + 1; 0 is an empty slot.
	slots []uint64
	n     int // entries in all, moved or not

	old   []uint64 // the table before the last growth, until moved (never written)
	moved int      // old[:moved] are in slots
}

func slotOf(h uint64, pos int) uint64 { return h&^0xFFFFFFFF | uint64(pos+1) }

const idIndexMin = 16

// fnv1a is a stable, allocation-free string hash.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	// Fold the high bits in: linear probing uses the low bits.
	return h ^ h>>29
}

// sizeFor is the table size for n entries.
func sizeFor(n int) int {
	size := idIndexMin
	for size < 2*n+2 {
		size <<= 1
	}
	return size
}

// find returns the position of id in order, or -1.
func (x *idIndex) find(order []*Promise, id string) int {
	h := fnv1a(id)
	if pos := probe(x.slots, order, id, h); pos >= 0 || x.old == nil {
		return pos
	}
	return probe(x.old, order, id, h)
}

// probe looks id (hashed h) up in one table.
func probe(slots []uint64, order []*Promise, id string, h uint64) int {
	if len(slots) == 0 {
		return -1
	}
	mask := uint64(len(slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := slots[i]
		if v == 0 {
			return -1
		}
		if v&^0xFFFFFFFF == h&^0xFFFFFFFF {
			if pos := int(v&0xFFFFFFFF) - 1; order[pos].ID == id {
				return pos
			}
		}
	}
}

// insert records that order[pos] holds its id. It reports false (and
// changes nothing) if the id is already present.
func (x *idIndex) insert(order []*Promise, pos int) bool {
	id := order[pos].ID
	h := fnv1a(id)
	if x.old != nil {
		if probe(x.old, order, id, h) >= 0 {
			return false
		}
		x.move(order, moveStep)
	}
	if 2*(x.n+1) > len(x.slots) {
		if probe(x.slots, order, id, h) >= 0 {
			return false
		}
		x.move(order, len(x.old)) // the last growth's moves, if any are left
		x.old, x.moved = x.slots, 0
		x.slots = make([]uint64, sizeFor(x.n+1))
		if x.n == 0 {
			x.old = nil
		}
	}
	mask := uint64(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		v := x.slots[i]
		if v == 0 {
			x.slots[i] = slotOf(h, pos)
			x.n++
			return true
		}
		if v&^0xFFFFFFFF == h&^0xFFFFFFFF && order[int(v&0xFFFFFFFF)-1].ID == id {
			return false
		}
	}
}

// moveStep is how many old slots each insert moves. A growth doubles the
// table when it is half full, so the next growth is at least len(old)/2
// inserts away: one slot an insert would do; more finish sooner.
const moveStep = 16

// move moves up to k slots of the old table into the new one.
func (x *idIndex) move(order []*Promise, k int) {
	mask := uint64(len(x.slots) - 1)
	for end := min(x.moved+k, len(x.old)); x.moved < end; x.moved++ {
		v := x.old[x.moved]
		if v == 0 {
			continue
		}
		// The fingerprint is the hash's high bits; the probe start needs
		// the low ones, so hash again. No id is in both tables' moved
		// parts: an insert refuses an id the old table holds.
		for i := fnv1a(order[int(v&0xFFFFFFFF)-1].ID) & mask; ; i = (i + 1) & mask {
			if x.slots[i] == 0 {
				x.slots[i] = v
				break
			}
		}
	}
	if x.moved == len(x.old) {
		x.old, x.moved = nil, 0
	}
}
