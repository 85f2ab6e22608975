// Command crashchild is a test helper for tally's end-to-end crash test: it
// opens a session through tally/ledger and appends promises (and resolves
// some of them) from several goroutines until it is killed, printing each
// record's key to stdout only after Submit returned, that is after the record
// was fsynced. The parent kills it with SIGKILL at random moments and checks
// that everything it printed survived.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"tally/ledger"
	"tally/promise"
)

func main() {
	session := flag.String("session", "", "session directory (LEDGER/sessions/default/default)")
	prefix := flag.String("prefix", "c", "prefix of the ids this run supplies")
	workers := flag.Int("workers", 4, "concurrent appenders")
	perWorker := flag.Int("n", 100000, "records per worker before exiting")
	cpMin := flag.Uint64("checkpoint-min", 0, "ledger CheckpointMin (0: the default)")
	flag.Parse()
	if *session == "" {
		fmt.Fprintln(os.Stderr, "crashchild: -session is required")
		os.Exit(2)
	}
	cfg := ledger.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *cpMin > 0 {
		cfg.CheckpointMin = *cpMin
	}
	l, err := ledger.Open(*session, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashchild: open:", err)
		os.Exit(1)
	}
	var outMu sync.Mutex
	ack := func(s string) {
		outMu.Lock()
		defer outMu.Unlock()
		// One write per line: a pipe write this short is atomic.
		if _, err := os.Stdout.WriteString(s + "\n"); err != nil {
			os.Exit(1)
		}
	}
	ctx := context.Background()
	const actor = "crash/debtor"
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Go(func() {
			last := ""
			for i := range *perWorker {
				id := ""
				if i%3 != 0 { // every third id is minted by the ledger
					id = fmt.Sprintf("%s-w%d-%d", *prefix, w, i)
				}
				res, err := l.Submit(ctx, promise.Declare{
					ID: id, Text: fmt.Sprintf("crash record %d of worker %d", i, w),
					By: actor, To: "crash/creditor", Until: time.Now().Add(time.Hour),
				}, ledger.WriteOptions{Actor: actor})
				if err != nil {
					fmt.Fprintln(os.Stderr, "crashchild: declare:", err)
					os.Exit(1)
				}
				ack("declared " + res.Event.ID)
				if i%4 == 3 && last != "" {
					if _, err := l.Submit(ctx, promise.Resolve{ID: last, As: promise.AsSatisfied, Evidence: []string{"crash://" + last}},
						ledger.WriteOptions{Actor: actor}); err != nil {
						fmt.Fprintln(os.Stderr, "crashchild: resolve:", err)
						os.Exit(1)
					}
					ack("resolved " + last)
				}
				last = res.Event.ID
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "crashchild: close:", err)
		os.Exit(1)
	}
}
