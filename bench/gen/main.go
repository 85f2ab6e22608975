// Command gen writes the synthetic ledgers the benchmark scripts load:
//
//	go run ./bench/gen pinki -n 1000000 -now 2026-10-01T00:00:00Z -overdue 50 > ledger.jsonl
//	go run ./bench/gen beads -n 10000 -prefix bench > issues.jsonl
//
// pinki: n records of a working promise ledger (without -declarations-only:
// about 70% declarations, 15% amends, 10% resolves, 5% assessments), every
// deadline after -now except those of -overdue open promises.
// beads: n open issues in bd's JSONL import shape.
// Output is deterministic for the same flags.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gen pinki|beads [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	n := fs.Int("n", 10000, "records to write")
	nowFlag := fs.String("now", "2026-10-01T00:00:00Z", "pinki: deadlines fall after this time")
	overdue := fs.Int("overdue", 50, "pinki: open promises whose deadline is before -now")
	declOnly := fs.Bool("declarations-only", false, "pinki: write declarations only")
	prefix := fs.String("prefix", "bench", "beads: issue id prefix")
	fs.Parse(os.Args[2:])
	now, err := time.Parse(time.RFC3339, *nowFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen: -now:", err)
		os.Exit(2)
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	switch os.Args[1] {
	case "pinki":
		pinki(w, *n, now, *overdue, *declOnly)
	case "beads":
		beads(w, *n, *prefix, now)
	default:
		fmt.Fprintln(os.Stderr, "gen: unknown kind", os.Args[1])
		os.Exit(2)
	}
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func party(r *rand.Rand, role string) string {
	return fmt.Sprintf("team-%02d/%s-%03d", r.IntN(20), role, r.IntN(300))
}

func pinki(w *bufio.Writer, n int, now time.Time, overdue int, declOnly bool) {
	r := rand.New(rand.NewPCG(7, 11))
	start := now.Add(-time.Duration(n) * time.Second) // one record a second up to now
	var ids []int
	overdueEvery := 0
	if overdue > 0 {
		overdueEvery = max(1, n*7/10/overdue)
	}
	made, next := 0, 0
	for i := 0; i < n; i++ {
		at := start.Add(time.Duration(i) * time.Second)
		k := 0
		if !declOnly && len(ids) > 10 {
			k = r.IntN(100)
		}
		switch {
		case k < 70:
			id := next
			next++
			until := now.Add(time.Duration(1+r.IntN(24*60)) * time.Hour)
			late := overdueEvery > 0 && id%overdueEvery == overdueEvery-1 && made < overdue
			if late {
				// Overdue: a deadline before now, no antecedent, and kept
				// out of the pool that amends and resolves draw from.
				until = at.Add(time.Minute)
				made++
			}
			fmt.Fprintf(w, `{"ts":%q,"type":"promise","id":"pnk_%06x","promise":"hand back a reviewed schema for ticket %d","by":%q,"to":%q`,
				ts(at), id, i, party(r, "agent"), party(r, "author"))
			if !late && len(ids) > 0 && r.IntN(10) == 0 {
				fmt.Fprintf(w, `,"on":"pnk_%06x"`, ids[r.IntN(len(ids))])
			}
			if !late {
				ids = append(ids, id)
			}
			fmt.Fprintf(w, `,"until":%q`, ts(until))
			if r.IntN(5) == 0 {
				fmt.Fprintf(w, `,"task":"task-%d"`, r.IntN(1<<20))
			}
			if r.IntN(10) == 0 {
				w.WriteString(`,"meta":{"priority":"high","source":"planner"}`)
			}
			w.WriteString("}\n")
		case k < 85:
			fmt.Fprintf(w, `{"ts":%q,"type":"amend","promise":"pnk_%06x","by":%q,"until":%q,"reason":"blocked on review"}`+"\n",
				ts(at), ids[r.IntN(len(ids))], party(r, "agent"), ts(now.Add(time.Duration(1+r.IntN(24*60))*time.Hour)))
		case k < 95:
			fmt.Fprintf(w, `{"ts":%q,"type":"resolve","promise":"pnk_%06x","as":"satisfied","by":%q,"evidence":["commit:%08x"]}`+"\n",
				ts(at), ids[r.IntN(len(ids))], party(r, "agent"), r.Uint32())
		default:
			fmt.Fprintf(w, `{"ts":%q,"type":"assess","promise":"pnk_%06x","state":"violated","observer":%q,"note":"late and unannounced"}`+"\n",
				ts(at), ids[r.IntN(len(ids))], party(r, "observer"))
		}
	}
}

func beads(w *bufio.Writer, n int, prefix string, now time.Time) {
	r := rand.New(rand.NewPCG(13, 17))
	for i := 0; i < n; i++ {
		at := ts(now.Add(-time.Duration(n-i) * time.Second))
		fmt.Fprintf(w, `{"id":"%s-%x","title":"hand back a reviewed schema for ticket %d","description":"promised by %s to %s","status":"open","priority":%d,"issue_type":"task","created_at":%q,"updated_at":%q}`+"\n",
			prefix, 0x100000+i, i, party(r, "agent"), party(r, "author"), r.IntN(5), at, at)
	}
}
