// Package duequeue holds a generic deadline index: a set of keys, each with
// one due time, that answers "what is due at now?" in O(k log n) for k due
// keys and "is anything due?" in O(1).
//
// The index is family-agnostic: the expectations core keys it by
// expectation, the promise timekeeper by (promise, rung). It does no I/O and
// never reads a clock: now is always an argument.
//
// Due times are stored packed (instant.Pack) to keep an entry small (a key
// and eight bytes): exact for every instant tally accepts (years 1–9999),
// ordered as the times are. A due time finer than the packed form keeps (a
// sum computed outside 1680–2253) is rounded up to the microsecond, so it
// never falls due early; times far outside years 1–9999 (beyond about
// 600 BC or AD 10500) saturate.
package duequeue

import (
	"math"
	"time"

	"tally/instant"
)

// Index is a min-heap of (due, key) with a position map, so that Set and
// Delete are O(log n), Next is O(1) and Due visits the k due keys in
// O(k log k) without removing them.
//
// Invariant: position(items[i].key) == i for every i, and no other key has
// a position.
// Invariant: items is a binary min-heap under before.
//
// An Index is not safe for concurrent use.
type Index[K comparable] struct {
	less  func(a, b K) bool // strict total order on keys: breaks ties between equal due times
	items []entry[K]
	pos   map[K]int      // key → position in items, unless slot is set
	slot  func(K) *int32 // where a key keeps its own position + 1 (0: absent)

	// scratch is the candidate heap Due reuses between calls, so a sweep with
	// k due items allocates nothing once warmed up.
	scratch []int
	// visiting is set while Due runs: fn must not change the index.
	visiting bool
}

type entry[K comparable] struct {
	key K
	due int64 // instant.PackCeil of the due time
}

// New returns an empty index. less must be a strict total order on keys; it
// makes the visiting order of keys with equal due times deterministic.
func New[K comparable](less func(a, b K) bool) *Index[K] {
	if less == nil {
		panic("deadline: New needs an ordering function")
	}
	return &Index[K]{less: less, pos: make(map[K]int)}
}

// NewWithSlots returns an empty index that keeps each key's position in
// storage the key owns instead of a map: slot(key) points at an int32 the
// index alone writes (position + 1; 0 while the key is absent), which must
// start at 0 and stay with the key. This saves the map's memory when keys
// are pointers to records; the index then holds at most MaxInt32 - 1 keys.
func NewWithSlots[K comparable](less func(a, b K) bool, slot func(K) *int32) *Index[K] {
	if less == nil || slot == nil {
		panic("deadline: NewWithSlots needs an ordering and a slot function")
	}
	return &Index[K]{less: less, slot: slot}
}

func (x *Index[K]) position(key K) (int, bool) {
	if x.slot != nil {
		p := *x.slot(key)
		return int(p) - 1, p != 0
	}
	i, ok := x.pos[key]
	return i, ok
}

func (x *Index[K]) setPosition(key K, i int) {
	if x.slot != nil {
		if i >= math.MaxInt32-1 {
			panic("deadline: index full")
		}
		*x.slot(key) = int32(i + 1)
		return
	}
	x.pos[key] = i
}

func (x *Index[K]) deletePosition(key K) {
	if x.slot != nil {
		*x.slot(key) = 0
		return
	}
	delete(x.pos, key)
}

// Len returns the number of keys in the index.
func (x *Index[K]) Len() int { return len(x.items) }

// Set gives key the due time due, inserting it when absent and moving it
// when present. O(log n).
func (x *Index[K]) Set(key K, due time.Time) {
	x.assertNotVisiting("Set")
	d := instant.PackCeil(due)
	if i, ok := x.position(key); ok {
		old := x.items[i].due
		x.items[i].due = d
		if d < old {
			x.up(i)
		} else if d > old {
			x.down(i)
		}
		return
	}
	x.items = append(x.items, entry[K]{key: key, due: d})
	i := len(x.items) - 1
	x.setPosition(key, i)
	x.up(i)
}

// Get returns key's due time and whether key is in the index.
func (x *Index[K]) Get(key K) (time.Time, bool) {
	i, ok := x.position(key)
	if !ok {
		return time.Time{}, false
	}
	return instant.Unpack(x.items[i].due), true
}

// Delete removes key and reports whether it was present. O(log n).
func (x *Index[K]) Delete(key K) bool {
	x.assertNotVisiting("Delete")
	i, ok := x.position(key)
	if !ok {
		return false
	}
	last := len(x.items) - 1
	if i != last {
		x.swap(i, last)
	}
	var zero entry[K]
	x.items[last] = zero // drop the reference the key may hold
	x.items = x.items[:last]
	x.deletePosition(key)
	if i != last {
		x.down(i)
		x.up(i)
	}
	if cap(x.items) > 64 && len(x.items) < cap(x.items)/4 {
		x.items = append([]entry[K](nil), x.items...)
	}
	return true
}

// Next returns the earliest due time, and false when the index is empty. O(1).
func (x *Index[K]) Next() (time.Time, bool) {
	if len(x.items) == 0 {
		return time.Time{}, false
	}
	return instant.Unpack(x.items[0].due), true
}

// Due calls fn for every key whose due time is at or before now, in due
// order (ties in the key order given to New), until fn returns false. It
// removes nothing: the caller deletes or moves keys once their work is done.
// fn must not call Set or Delete on this index (it panics if it does).
// O(k log k) for k visited keys; O(1) when nothing is due.
func (x *Index[K]) Due(now time.Time, fn func(key K, due time.Time) bool) {
	limit := instant.Pack(now) // floored: due ≤ limit only if due ≤ now
	if len(x.items) == 0 || x.items[0].due > limit {
		return
	}
	x.visiting = true
	defer func() { x.visiting = false }()

	// A heap of candidate positions: every visited node's children are
	// candidates, so the frontier stays sorted without touching items.
	c := append(x.scratch[:0], 0)
	for len(c) > 0 {
		i := c[0]
		last := len(c) - 1
		c[0] = c[last]
		c = c[:last]
		x.candidateDown(c, 0)

		e := x.items[i]
		if !fn(e.key, instant.Unpack(e.due)) {
			break
		}
		for _, child := range [2]int{2*i + 1, 2*i + 2} {
			if child < len(x.items) && x.items[child].due <= limit {
				c = append(c, child)
				x.candidateUp(c, len(c)-1)
			}
		}
	}
	x.scratch = c[:0]
}

func (x *Index[K]) assertNotVisiting(op string) {
	if x.visiting {
		panic("deadline: " + op + " called from inside Due")
	}
}

// before is the heap order: due time, then key order.
func (x *Index[K]) before(i, j int) bool {
	a, b := x.items[i], x.items[j]
	if a.due != b.due {
		return a.due < b.due
	}
	return x.less(a.key, b.key)
}

func (x *Index[K]) swap(i, j int) {
	x.items[i], x.items[j] = x.items[j], x.items[i]
	x.setPosition(x.items[i].key, i)
	x.setPosition(x.items[j].key, j)
}

func (x *Index[K]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !x.before(i, p) {
			return
		}
		x.swap(i, p)
		i = p
	}
}

func (x *Index[K]) down(i int) {
	n := len(x.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && x.before(r, l) {
			m = r
		}
		if !x.before(m, i) {
			return
		}
		x.swap(i, m)
		i = m
	}
}

func (x *Index[K]) candidateUp(c []int, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !x.before(c[i], c[p]) {
			return
		}
		c[i], c[p] = c[p], c[i]
		i = p
	}
}

func (x *Index[K]) candidateDown(c []int, i int) {
	n := len(c)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && x.before(c[r], c[l]) {
			m = r
		}
		if !x.before(c[m], c[i]) {
			return
		}
		c[i], c[m] = c[m], c[i]
		i = m
	}
}
