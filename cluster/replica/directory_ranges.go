package replica

// The directory in bounded ranges. The meta group's directory (every
// session's recorded group and epoch, by "tenant/session") is held as
// contiguous ranges of the key space, each of at most DirectoryRangeMax
// entries, found by binary search. A Directory is an immutable value: a
// placement or an epoch replaces the one range it touches (and the block
// of ranges that holds it), sharing every other range, so a decision
// costs O(range), not O(directory), and a reader or a snapshot holds a
// Directory without copying it.
//
// The layout is deterministic from the content: a name starts a range
// when its hash says so (a natural boundary, on average one name in
// DirectoryRangeSplit) or when the range would otherwise hold more than
// DirectoryRangeMax entries. So every replica, whatever order it applied
// the placements in, after a restart (which rebuilds the ranges from the
// names in pebble) or a restore, derives the same ranges, with nothing
// about the layout stored or committed: a range named by its bounds in
// one replica's snapshot is the same range in another's. Adding a name
// re-cuts only its natural segment (the ranges from its natural boundary
// to the next), on average one range. Names that avoid the hash's
// boundaries (chosen to) make longer segments, which cost more to re-cut;
// the ranges stay bounded.

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/zeebo/blake3"
)

// Bounds of the directory's ranges.
const (
	// DirectoryRangeMax bounds the entries of one range.
	DirectoryRangeMax = 4096
	// DirectoryRangeSplit is one over the share of names that start a
	// range by their hash: the ranges' mean size.
	DirectoryRangeSplit = 1024
)

// dirBlockMax bounds the ranges of a block (the directory's inner level,
// which no one sees: blocks keep a decision from copying every range's
// pointer).
const dirBlockMax = 64

// DirEntry is a session's entry in the directory: its recorded group (0:
// none, it routes by its name's hash) and its epoch (how many times its
// group changed).
type DirEntry struct {
	Name  string `json:"name"`
	Group uint64 `json:"group,omitempty"`
	Epoch uint64 `json:"epoch,omitempty"`
}

// rangeRule is the layout's rule: max entries a range, and one name in
// split starts one (0: none does).
type rangeRule struct{ max, split int }

var defaultRule = rangeRule{max: DirectoryRangeMax, split: DirectoryRangeSplit}

// ruleOf is the layout cfg asks for.
func ruleOf(cfg Config) rangeRule {
	r := defaultRule
	if cfg.DirectoryRangeMax > 0 {
		r.max = cfg.DirectoryRangeMax
	}
	if cfg.DirectoryRangeSplit > 0 {
		r.split = cfg.DirectoryRangeSplit
	}
	return r
}

// natural reports a name that starts a range by its hash.
func (r rangeRule) natural(name string) bool {
	if r.split <= 0 {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()%uint64(r.split) == 0
}

// cut lays sorted entries out in ranges from a range's start: a new range
// at each natural boundary after the first entry, and whenever one holds
// max.
func (r rangeRule) cut(entries []DirEntry) [][]DirEntry {
	return r.cutBy(entries, func(i int) bool { return r.natural(entries[i].Name) })
}

// cutBy is cut with natural(i) telling whether entry i is a natural
// boundary.
func (r rangeRule) cutBy(entries []DirEntry, natural func(i int) bool) [][]DirEntry {
	var out [][]DirEntry
	start := 0
	for i := 1; i < len(entries); i++ {
		if i-start >= r.max || natural(i) {
			out = append(out, entries[start:i:i])
			start = i
		}
	}
	if len(entries) > 0 {
		out = append(out, entries[start:])
	}
	return out
}

// dirRange is one range: its entries, sorted by name, never changed once
// made (a change makes a new range). Its encoding's size and digest, for a
// snapshot, are computed once.
type dirRange struct {
	entries []DirEntry
	once    sync.Once
	size    uint64
	digest  string
}

// first is the range's first name.
func (r *dirRange) first() string { return r.entries[0].Name }

// dirBlock is a run of consecutive ranges.
type dirBlock struct {
	ranges []*dirRange
}

// Directory is the directory's entries in ranges. The zero value is the
// empty directory; a nil *Directory reads as empty too.
type Directory struct {
	rule   rangeRule
	blocks []*dirBlock
	count  int
	placed int // entries with a recorded group
}

// NewDirectory lays out entries (any order, one per name) in ranges.
func NewDirectory(entries []DirEntry) *Directory {
	return newDirectoryRule(defaultRule, entries)
}

func newDirectoryRule(rule rangeRule, entries []DirEntry) *Directory {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	d := &Directory{rule: rule, count: len(sorted)}
	for _, e := range sorted {
		if e.Group != 0 {
			d.placed++
		}
	}
	var ranges []*dirRange
	for _, c := range rule.cut(sorted) {
		ranges = append(ranges, &dirRange{entries: c})
	}
	d.blocks = blocksOf(ranges)
	return d
}

// blocksOf groups ranges into blocks of at most dirBlockMax.
func blocksOf(ranges []*dirRange) []*dirBlock {
	var out []*dirBlock
	for len(ranges) > 0 {
		n := min(len(ranges), dirBlockMax)
		if len(ranges) > dirBlockMax && len(ranges) < 2*dirBlockMax {
			n = len(ranges) / 2 // two halves rather than a full block and a scrap
		}
		out = append(out, &dirBlock{ranges: slices.Clip(ranges[:n])})
		ranges = ranges[n:]
	}
	return out
}

func (d *Directory) ruleOf() rangeRule {
	if d == nil || d.rule.max == 0 {
		return defaultRule
	}
	return d.rule
}

// Len is how many entries the directory holds.
func (d *Directory) Len() int {
	if d == nil {
		return 0
	}
	return d.count
}

// Placed is how many entries record a group.
func (d *Directory) Placed() int {
	if d == nil {
		return 0
	}
	return d.placed
}

// locate finds the block and range that hold name, or would: the last
// range whose first name is at or before it (the first range holds every
// name before its own first). ok is false for an empty directory.
func (d *Directory) locate(name string) (b, i int, ok bool) {
	if d == nil || len(d.blocks) == 0 {
		return 0, 0, false
	}
	b = sort.Search(len(d.blocks), func(k int) bool { return d.blocks[k].ranges[0].first() > name }) - 1
	b = max(b, 0)
	rs := d.blocks[b].ranges
	i = sort.Search(len(rs), func(k int) bool { return rs[k].first() > name }) - 1
	return b, max(i, 0), true
}

// Get is name's entry.
func (d *Directory) Get(name string) (DirEntry, bool) {
	b, i, ok := d.locate(name)
	if !ok {
		return DirEntry{}, false
	}
	es := d.blocks[b].ranges[i].entries
	j, found := slices.BinarySearchFunc(es, name, func(e DirEntry, n string) int { return strings.Compare(e.Name, n) })
	if !found {
		return DirEntry{}, false
	}
	return es[j], true
}

// Group is name's recorded group, if one is recorded.
func (d *Directory) Group(name string) (uint64, bool) {
	e, ok := d.Get(name)
	return e.Group, ok && e.Group != 0
}

// Epoch is name's epoch (0 for a name the directory does not hold).
func (d *Directory) Epoch(name string) uint64 {
	e, _ := d.Get(name)
	return e.Epoch
}

// Set is the directory with name's entry e (e.Name is the name): the range
// that holds it replaced, and for a new name its natural segment re-cut.
// d is unchanged.
func (d *Directory) Set(e DirEntry) *Directory {
	rule := d.ruleOf()
	b, i, ok := d.locate(e.Name)
	if !ok {
		return &Directory{rule: rule, count: 1, placed: placedOf(e), blocks: []*dirBlock{{ranges: []*dirRange{{entries: []DirEntry{e}}}}}}
	}
	es := d.blocks[b].ranges[i].entries
	j, found := slices.BinarySearchFunc(es, e.Name, func(x DirEntry, n string) int { return strings.Compare(x.Name, n) })
	if found {
		if es[j] == e {
			return d
		}
		ne := slices.Clone(es)
		ne[j] = e
		out := d.shallow()
		out.placed += placedOf(e) - placedOf(es[j])
		blk := &dirBlock{ranges: slices.Clone(d.blocks[b].ranges)}
		blk.ranges[i] = &dirRange{entries: ne}
		out.blocks[b] = blk
		return out
	}
	// A new name: re-cut from its range to the end of its natural segment
	// (the ranges before it in the segment keep their cut).
	var segRanges []*dirRange
	total := 0
	lb, li := b, i
	for {
		r := d.blocks[lb].ranges[li]
		if (lb != b || li != i) && rule.natural(r.first()) {
			break
		}
		segRanges = append(segRanges, r)
		total += len(r.entries)
		if li++; li == len(d.blocks[lb].ranges) {
			if lb++; lb == len(d.blocks) {
				break
			}
			li = 0
		}
	}
	// The segment is ranges (b,i) up to, not including, (lb,li), with e.
	seg := make([]DirEntry, 0, total+1)
	for _, r := range segRanges {
		seg = append(seg, r.entries...)
	}
	k, _ := slices.BinarySearchFunc(seg, e.Name, func(x DirEntry, n string) int { return strings.Compare(x.Name, n) })
	seg = slices.Insert(seg, k, e)
	// No name inside the segment after its first is a natural boundary (it
	// would have started a range, and so the segment would have ended
	// before it), so only the new name's hash is asked; and, if it comes
	// first of all, that of the name it displaces.
	natural := func(j int) bool {
		switch {
		case j == k:
			return rule.natural(e.Name)
		case j == 1 && k == 0:
			return rule.natural(seg[1].Name)
		}
		return false
	}
	var cut []*dirRange
	for _, c := range rule.cutBy(seg, natural) {
		cut = append(cut, &dirRange{entries: c})
	}
	// The blocks from b to the one holding (lb, li) are rebuilt around the
	// new ranges.
	last := lb
	if lb == len(d.blocks) {
		last = lb - 1
		li = len(d.blocks[last].ranges)
	}
	var ranges []*dirRange
	ranges = append(ranges, d.blocks[b].ranges[:i]...)
	ranges = append(ranges, cut...)
	ranges = append(ranges, d.blocks[last].ranges[li:]...)
	out := &Directory{rule: rule, count: d.count + 1, placed: d.placed + placedOf(e)}
	out.blocks = make([]*dirBlock, 0, len(d.blocks)+2)
	out.blocks = append(out.blocks, d.blocks[:b]...)
	if len(ranges) <= dirBlockMax {
		out.blocks = append(out.blocks, &dirBlock{ranges: ranges})
	} else {
		out.blocks = append(out.blocks, blocksOf(ranges)...)
	}
	out.blocks = append(out.blocks, d.blocks[last+1:]...)
	return out
}

func placedOf(e DirEntry) int {
	if e.Group != 0 {
		return 1
	}
	return 0
}

// shallow is a copy of d sharing its blocks.
func (d *Directory) shallow() *Directory {
	return &Directory{rule: d.rule, count: d.count, placed: d.placed, blocks: slices.Clone(d.blocks)}
}

// Each calls f with every entry, in name order, until f returns false.
func (d *Directory) Each(f func(DirEntry) bool) {
	d.eachRange(func(r *dirRange) bool {
		for _, e := range r.entries {
			if !f(e) {
				return false
			}
		}
		return true
	})
}

func (d *Directory) eachRange(f func(*dirRange) bool) {
	if d == nil {
		return
	}
	for _, b := range d.blocks {
		for _, r := range b.ranges {
			if !f(r) {
				return
			}
		}
	}
}

// From lists at most limit entries whose names come after after ("" for
// the first), in order: one page of the directory. It reads only the
// ranges the page spans.
func (d *Directory) From(after string, limit int) []DirEntry {
	var out []DirEntry
	b, i, ok := d.locate(after)
	if !ok || limit <= 0 {
		return nil
	}
	for ; b < len(d.blocks); b, i = b+1, 0 {
		for ; i < len(d.blocks[b].ranges); i++ {
			for _, e := range d.blocks[b].ranges[i].entries {
				if e.Name <= after && after != "" {
					continue
				}
				if out = append(out, e); len(out) == limit {
					return out
				}
			}
		}
	}
	return out
}

// Prefix lists the entries whose names begin with p, in order (a
// tenant's sessions: p is "tenant/").
func (d *Directory) Prefix(p string) []DirEntry {
	var out []DirEntry
	b, i, ok := d.locate(p)
	if !ok {
		return nil
	}
	for ; b < len(d.blocks); b, i = b+1, 0 {
		for ; i < len(d.blocks[b].ranges); i++ {
			for _, e := range d.blocks[b].ranges[i].entries {
				switch {
				case strings.HasPrefix(e.Name, p):
					out = append(out, e)
				case e.Name > p:
					return out
				}
			}
		}
	}
	return out
}

// RangeInfo describes one range: its bounds (Start inclusive, "" for the
// first; End exclusive, "" for the last), its entries and its encoding's
// digest.
type RangeInfo struct {
	Start  string `json:"start"`
	End    string `json:"end,omitempty"`
	Count  int    `json:"count"`
	Digest string `json:"digest,omitempty"`
}

// Ranges describes the directory's ranges, in order.
func (d *Directory) Ranges() []RangeInfo {
	var out []RangeInfo
	d.eachRange(func(r *dirRange) bool {
		start := r.first()
		if len(out) == 0 {
			start = ""
		} else {
			out[len(out)-1].End = start
		}
		out = append(out, RangeInfo{Start: start, Count: len(r.entries)})
		return true
	})
	return out
}

// rangeList is the directory's ranges, in order.
func (d *Directory) rangeList() []*dirRange {
	var out []*dirRange
	d.eachRange(func(r *dirRange) bool { out = append(out, r); return true })
	return out
}

// The encoding of a range in a snapshot's body: per entry, in order, its
// name (a uvarint length, then the bytes), group and epoch (uvarints). Its
// digest is BLAKE3 (this context) of those bytes, in hex. Sent between
// nodes: do not change.
const dirDigestContext = "tally 2026-12 cluster directory range v1"

func appendDirEntry(b []byte, e DirEntry) []byte {
	b = binary.AppendUvarint(b, uint64(len(e.Name)))
	b = append(b, e.Name...)
	b = binary.AppendUvarint(b, e.Group)
	return binary.AppendUvarint(b, e.Epoch)
}

// encoded is the range's encoding's size and digest, computed once.
func (r *dirRange) encoded() (uint64, string) {
	r.once.Do(func() {
		h := blake3.NewDeriveKey(dirDigestContext)
		var buf []byte
		for _, e := range r.entries {
			buf = appendDirEntry(buf[:0], e)
			h.Write(buf)
			r.size += uint64(len(buf))
		}
		r.digest = fmt.Sprintf("%x", h.Sum(nil))
	})
	return r.size, r.digest
}

// changedRanges are the ranges of old that dir does not share (gone) and
// those of dir that old does not (fresh): only blocks the two do not share
// are looked into.
func changedRanges(old, dir *Directory) (gone, fresh []*dirRange) {
	oldOnly, dirOnly := blockDiff(old, dir), blockDiff(dir, old)
	inOld := map[*dirRange]bool{}
	for _, b := range oldOnly {
		for _, r := range b.ranges {
			inOld[r] = true
		}
	}
	inDir := map[*dirRange]bool{}
	for _, b := range dirOnly {
		for _, r := range b.ranges {
			inDir[r] = true
			if !inOld[r] {
				fresh = append(fresh, r)
			}
		}
	}
	for _, b := range oldOnly {
		for _, r := range b.ranges {
			if !inDir[r] {
				gone = append(gone, r)
			}
		}
	}
	return gone, fresh
}

// blockDiff is a's blocks that b does not hold.
func blockDiff(a, b *Directory) []*dirBlock {
	if a == nil {
		return nil
	}
	have := map[*dirBlock]bool{}
	if b != nil {
		for _, blk := range b.blocks {
			have[blk] = true
		}
	}
	var out []*dirBlock
	for _, blk := range a.blocks {
		if !have[blk] {
			out = append(out, blk)
		}
	}
	return out
}

// result is the directory d's moves decided over, with the placements and
// epochs they changed (d.placements, d.epochs) set in it.
func (d directory) result() *Directory {
	dir := d.dir
	for name, g := range d.placements {
		e, _ := dir.Get(name)
		e.Name, e.Group = name, g
		dir = dir.Set(e)
	}
	for name, ep := range d.epochs {
		e, _ := dir.Get(name)
		e.Name, e.Epoch = name, ep
		dir = dir.Set(e)
	}
	return dir
}

// epoch is the session's epoch in d.
func (d directory) epoch(name string) uint64 {
	if e, ok := d.epochs[name]; ok {
		return e
	}
	return d.dir.Epoch(name)
}
