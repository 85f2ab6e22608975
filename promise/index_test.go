package promise

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The id index against a map: every id found at its position, absent ids
// not found, duplicates refused, through many growths.
func TestIDIndexAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var x idIndex
	var order []*Promise
	ref := map[string]int{}
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
