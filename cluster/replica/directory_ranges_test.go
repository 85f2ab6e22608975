package replica

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"tally/cluster/node"
)

// starts are the directory's ranges' starts and counts, "start:count".
func starts(d *Directory) string {
	var out []string
	for _, r := range d.Ranges() {
		out = append(out, fmt.Sprintf("%s:%d", r.Start, r.Count))
	}
	return strings.Join(out, " ")
}

func names(ns ...string) []DirEntry {
	out := make([]DirEntry, len(ns))
	for i, n := range ns {
		out[i] = DirEntry{Name: n, Group: 2}
	}
	return out
}

func seq(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// The layout: a range starts at a name its hash marks (with split 3,
// t/s02, t/s05, t/s08 and t/s10 among t/s00 to t/s11) or when a range would
// hold more than max; the first range starts at "".
func TestDirectoryLayout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rule  rangeRule
		names []string
		want  string
	}{
		{"empty", rangeRule{max: 3}, nil, ""},
		{"one", rangeRule{max: 3}, []string{"a"}, ":1"},
		{"by count", rangeRule{max: 3}, []string{"g", "a", "b", "c", "d", "e", "f"}, ":3 d:3 g:1"},
		{"by hash", rangeRule{max: 4, split: 3}, seq("t/s", 12), ":2 t/s02:3 t/s05:3 t/s08:2 t/s10:2"},
		{"by hash and count", rangeRule{max: 2, split: 3}, seq("t/s", 12), ":2 t/s02:2 t/s04:1 t/s05:2 t/s07:1 t/s08:2 t/s10:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDirectoryRule(tc.rule, names(tc.names...))
			if got := starts(d); got != tc.want {
				t.Fatalf("ranges %q, want %q", got, tc.want)
			}
			if d.Len() != len(tc.names) || d.Placed() != len(tc.names) {
				t.Fatalf("len %d placed %d", d.Len(), d.Placed())
			}
		})
	}
}

// Setting a new name re-cuts its range and those after it up to the next
// natural boundary; setting a known name replaces its one range; lookups
// find each range by its bounds.
func TestDirectorySetAndFind(t *testing.T) {
	rule := rangeRule{max: 3}
	d := newDirectoryRule(rule, names("a", "b", "c", "d", "e", "f", "g"))
	steps := []struct {
		set  DirEntry
		want string
	}{
		{DirEntry{Name: "cc", Group: 3}, ":3 cc:3 f:2"},
		{DirEntry{Name: "0", Group: 4}, ":3 c:3 e:3"},
		{DirEntry{Name: "cc", Group: 5, Epoch: 2}, ":3 c:3 e:3"},
		{DirEntry{Name: "z", Epoch: 1}, ":3 c:3 e:3 z:1"},
	}
	for _, s := range steps {
		before := starts(d)
		next := d.Set(s.set)
		if got := starts(next); got != s.want {
			t.Fatalf("set %s: ranges %q, want %q", s.set.Name, got, s.want)
		}
		if starts(d) != before {
			t.Fatalf("set %s changed the directory it was given", s.set.Name)
		}
		d = next
	}
	for _, c := range []struct {
		name  string
		group uint64
		ok    bool
		b, i  int
	}{
		{"0", 4, true, 0, 0}, {"a", 2, true, 0, 0}, {"bb", 0, false, 0, 0}, {"c", 2, true, 0, 1},
		{"cc", 5, true, 0, 1}, {"dd", 0, false, 0, 1}, {"e", 2, true, 0, 2}, {"y", 0, false, 0, 2}, {"z", 0, false, 0, 3},
	} {
		g, ok := d.Group(c.name)
		b, i, _ := d.locate(c.name)
		if g != c.group || ok != c.ok || b != c.b || i != c.i {
			t.Errorf("%s: group %d %v in range %d.%d, want %d %v in %d.%d", c.name, g, ok, b, i, c.group, c.ok, c.b, c.i)
		}
	}
	if d.Epoch("z") != 1 || d.Epoch("cc") != 2 || d.Len() != 10 || d.Placed() != 9 {
		t.Fatalf("epochs %d %d, len %d placed %d", d.Epoch("z"), d.Epoch("cc"), d.Len(), d.Placed())
	}
	if got := fmt.Sprint(d.From("c", 3)); got != "[{cc 5 2} {d 2 0} {e 2 0}]" {
		t.Fatalf("page after c: %s", got)
	}
	if got := fmt.Sprint(d.Prefix("c")); got != "[{c 2 0} {cc 5 2}]" {
		t.Fatalf("prefix c: %s", got)
	}
}

// Any sequence of sets answers as a plain map does, every range stays
// within its bound, and the layout is the one the content alone gives,
// whatever order the names came in.
func TestDirectoryMatchesAMap(t *testing.T) {
	for _, rule := range []rangeRule{{max: 1}, {max: 3}, {max: 4, split: 3}, {max: 8, split: 2}, {max: 16, split: 5}} {
		t.Run(fmt.Sprintf("max%d-split%d", rule.max, rule.split), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(rule.max), uint64(rule.split)))
			d := newDirectoryRule(rule, nil)
			want := map[string]DirEntry{}
			for step := range 3000 {
				name := fmt.Sprintf("t%d/s%d", r.IntN(5), r.IntN(300))
				e := DirEntry{Name: name, Group: uint64(r.IntN(3)), Epoch: uint64(r.IntN(3))}
				d = d.Set(e)
				want[name] = e
				if step%500 != 0 {
					continue
				}
				checkDirectory(t, d, want, rule)
			}
			checkDirectory(t, d, want, rule)
		})
	}
}

func checkDirectory(t *testing.T, d *Directory, want map[string]DirEntry, rule rangeRule) {
	t.Helper()
	placed := 0
	for name, e := range want {
		if got, ok := d.Get(name); !ok || got != e {
			t.Fatalf("%s: %+v %v, want %+v", name, got, ok, e)
		}
		if e.Group != 0 {
			placed++
		}
	}
	if d.Len() != len(want) || d.Placed() != placed {
		t.Fatalf("len %d placed %d, want %d %d", d.Len(), d.Placed(), len(want), placed)
	}
	if _, ok := d.Get("t9/none"); ok {
		t.Fatal("found a name never set")
	}
	var all []DirEntry
	for _, e := range want {
		all = append(all, e)
	}
	if got, fresh := starts(d), starts(newDirectoryRule(rule, all)); got != fresh {
		t.Fatalf("layout %q, from the content %q", got, fresh)
	}
	for _, ri := range d.Ranges() {
		if ri.Count > rule.max || ri.Count == 0 {
			t.Fatalf("a range of %d", ri.Count)
		}
	}
	var paged []DirEntry
	for after := ""; ; {
		page := d.From(after, 7)
		paged = append(paged, page...)
		if len(page) < 7 {
			break
		}
		after = page[len(page)-1].Name
	}
	slices.SortFunc(all, func(a, b DirEntry) int { return strings.Compare(a.Name, b.Name) })
	if !slices.Equal(paged, all) {
		t.Fatalf("paged %d entries, want %d", len(paged), len(all))
	}
}

// A placement decision at 10k and 1M directory entries: with ranges it
// copies the one range it touches (and a block of range pointers); the
// previous release cloned the whole map ("map", for comparison).
func BenchmarkPlacementDecide(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		entries := make([]DirEntry, n)
		plain := make(map[string]uint64, n)
		for i := range entries {
			entries[i] = DirEntry{Name: fmt.Sprintf("acme/s%08d", 2*i), Group: 2, Epoch: 1}
			plain[entries[i].Name] = 2
		}
		dir := NewDirectory(entries)
		place := func(i int) *Placement {
			session := fmt.Sprintf("s%08d", (2*i+1)%(2*n))
			g := GroupOf(testGroups, "acme", session)%testGroups + 2
			return &Placement{Tenant: "acme", Session: session, Group: g}
		}
		b.Run(fmt.Sprintf("ranges-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, out := decidePlacementIn(dir, testGroups, testGroups, place(i*7919)); out.Err != nil {
					b.Fatal(out.Err)
				}
			}
		})
		b.Run(fmt.Sprintf("map-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				p := place(i * 7919)
				out := maps.Clone(plain)
				out[p.Name()] = p.Group
			}
		})
	}
}

// The directory a replica applied, batch by batch in any order, is the one
// it reads back after a restart, and the one a replica installing its
// snapshot holds: the same entries, the same ranges. Ranges of at most 8
// (a name in 4 starting one) make thousands of them, in many blocks.
func TestDirectorySurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	small := func(c *Config) { c.Groups, c.DirectoryRangeMax, c.DirectoryRangeSplit = testGroups, 8, 4 }
	sm, db := openReplicaWith(t, dir, "", small)
	r := rand.New(rand.NewPCG(3, 4))
	order := r.Perm(12_000)
	for first := 0; first < len(order); first += 1000 {
		var ents []node.Entry
		for j, i := range order[first : first+1000] {
			session := fmt.Sprintf("s%05d", i)
			ents = append(ents, metaEntry(t, uint64(first+j+1), MetaCommand{Op: OpPlacementSet, Placement: &Placement{Tenant: fmt.Sprint("t", i%7), Session: session, Group: GroupOf(testGroups, fmt.Sprint("t", i%7), session)%testGroups + 2}}))
		}
		if _, err := sm.Apply(node.MetaGroup, ents); err != nil {
			t.Fatal(err)
		}
	}
	before := sm.Directory()
	if before.Len() != len(order) || len(before.Ranges()) < 2000 || len(before.blocks) < 30 {
		t.Fatalf("%d entries in %d ranges, %d blocks", before.Len(), len(before.Ranges()), len(before.blocks))
	}
	same := func(what string, got *Directory) {
		t.Helper()
		if starts(got) != starts(before) || !slices.Equal(got.From("", before.Len()+1), before.From("", before.Len()+1)) {
			t.Fatalf("%s: %d entries in %d ranges, before %d in %d", what, got.Len(), len(got.Ranges()), before.Len(), len(before.Ranges()))
		}
	}
	idx, man, body := takeSnapshot(t, sm, node.MetaGroup)
	other, otherDB := openReplicaWith(t, filepath.Join(dir, "other"), "", small)
	defer otherDB.Close()
	defer other.Close()
	if err := other.Restore(node.MetaGroup, idx, man, body); err != nil {
		t.Fatal(err)
	}
	same("installed", other.Directory())
	sm.Close()
	db.Close()
	again, againDB := openReplicaWith(t, dir, "", small)
	defer againDB.Close()
	defer again.Close()
	same("after a restart", again.Directory())
}

// A page of placements skips entries that record only an epoch and still
// fills up to its limit.
func TestPlacementsOfSkipsEpochOnlyEntries(t *testing.T) {
	d := newDirectoryRule(rangeRule{max: 2}, []DirEntry{
		{Name: "a", Group: 2}, {Name: "b", Epoch: 1}, {Name: "c", Epoch: 1}, {Name: "d", Group: 3}, {Name: "e", Group: 4}, {Name: "f", Epoch: 2},
	})
	for _, c := range []struct {
		after string
		limit int
		want  string
	}{
		{"", 2, "[{a 2} {d 3}]"},
		{"a", 2, "[{d 3} {e 4}]"},
		{"d", 5, "[{e 4}]"},
		{"", -1, "[{a 2} {d 3} {e 4}]"},
	} {
		var got []string
		for _, p := range placementsOf(d, c.after, c.limit) {
			got = append(got, fmt.Sprintf("{%s %d}", p.Tenant, p.Group))
		}
		if s := "[" + strings.Join(got, " ") + "]"; s != c.want {
			t.Errorf("after %q limit %d: %s, want %s", c.after, c.limit, s, c.want)
		}
	}
}
