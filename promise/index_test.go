package promise

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The id index against a map: every id found at its position, absent ids
// not found, duplicates refused, through many growths and while each
// growth's entries are being moved.
func TestIDIndexAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var x idIndex
	var order []*Promise
	ref := map[string]int{}
	migrating := 0
	for i := 0; i < 20000; i++ {
		id := fmt.Sprintf("p%d", r.IntN(15000))
		if _, dup := ref[id]; dup {
			order = append(order, &Promise{ID: id})
			if x.insert(order, len(order)-1) {
				t.Fatalf("duplicate %s accepted", id)
			}
			order = order[:len(order)-1]
			continue
		}
		order = append(order, &Promise{ID: id})
		if !x.insert(order, len(order)-1) {
			t.Fatalf("insert %s refused", id)
		}
		ref[id] = len(order) - 1
		// Lookups while a growth's moves are under way, too.
		if x.old != nil {
			migrating++
		}
		for j := 0; j < 3; j++ {
			k := order[r.IntN(len(order))].ID
			if got := x.find(order, k); got != ref[k] {
				t.Fatalf("after %d inserts: find %s = %d, want %d", i, k, got, ref[k])
			}
			if x.find(order, fmt.Sprintf("q%d", r.IntN(1000))) >= 0 {
				t.Fatal("found an absent id")
			}
		}
	}
	if migrating == 0 {
		t.Fatal("no insert happened while a growth was moving")
	}
	for id, pos := range ref {
		if got := x.find(order, id); got != pos {
			t.Fatalf("find %s = %d, want %d", id, got, pos)
		}
	}
	for i := 0; i < 1000; i++ {
		if x.find(order, fmt.Sprintf("absent%d", i)) >= 0 {
			t.Fatal("found an absent id")
		}
	}
	if x.n != len(ref) || len(x.slots) < 2*x.n {
		t.Fatalf("n %d slots %d", x.n, len(x.slots))
	}
}
