package promise

// idIndex maps promise ids to their place in the declaration order: open
// addressing with linear probing over a power-of-two table of positions.
// It costs 16 to 32 bytes per promise (a map costs several times that), and
// rebuilding it from a checkpoint is a tight loop rather than a million map
// insertions, which dominated opening a large ledger.
//
// Invariant: len(slots) is a power of two, at least twice the entries, so
// probes stay short and a free slot always exists.
type idIndex struct {
	// slots hold the hash's high 32 bits (a fingerprint that spares most
	// comparisons the trip to the promise) and, below, the position in
	// order + 1; 0 is an empty slot.
	slots []uint64
	n     int
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
	// Fold the high bits in: the fingerprint is the high half.
	return h ^ h>>29
}

// home is where an entry with hash (or slot) h starts probing in a table of
// mask+1 slots. It is taken from the fingerprint bits, which the slot keeps,
// so growing the table moves each slot without rehashing its id: going
// back to the promise for it cost a cache miss an entry, and held the
// session lock for 38 ms at 262k promises.
func home(h, mask uint64) uint64 { return (h >> 32) & mask }

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
	if len(x.slots) == 0 {
		return -1
	}
	h := fnv1a(id)
	mask := uint64(len(x.slots) - 1)
	for i := home(h, mask); ; i = (i + 1) & mask {
		v := x.slots[i]
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
	if 2*(x.n+1) > len(x.slots) {
		x.grow(sizeFor(x.n + 1))
	}
	id := order[pos].ID
	h := fnv1a(id)
	mask := uint64(len(x.slots) - 1)
	for i := home(h, mask); ; i = (i + 1) & mask {
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

// grow rebuilds the table at size from the entries it holds.
func (x *idIndex) grow(size int) {
	old := x.slots
	x.slots, x.n = make([]uint64, size), 0
	mask := uint64(size - 1)
	for _, v := range old {
		if v == 0 {
			continue
		}
		for i := home(v, mask); ; i = (i + 1) & mask {
			if x.slots[i] == 0 {
				x.slots[i] = v
				x.n++
				break
			}
		}
	}
}
