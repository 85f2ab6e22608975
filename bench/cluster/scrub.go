package main

// -scrub: the scrubber's rate and its effect on write latency. One server
// (`tally serve --dir D`) over a content store holding -scrub bytes of
// objects is run in legs, each a fresh process on the same directory:
// without scrubbing (--scrub-rate 0), at the default rate (16MiB/s) and
// at a fast one (256MiB/s), each pass starting a second after the last.
// In each leg -clients clients declare promises (each a durable write:
// appended and fsynced) for -duration, and the leg reports their p50 and
// p99 latency and the bytes the scrubber re-read a second (its /metrics
// counter over the leg). The legs are interleaved, -rounds times, their
// order turned each round, so that the others' load on the machine falls
// on each alike.

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"tally/artifact"
	"tally/bench/internal/benchproc"
	"tally/store"
)

// scrubLeg is one way the server scrubs: its --scrub-rate.
type scrubLeg struct{ name, rate string }

var scrubLegs = []scrubLeg{{"off", "0"}, {"default 16MiB/s", "16MiB/s"}, {"fast 256MiB/s", "256MiB/s"}}

func scrubBench(bin string, size int64, clients int, d time.Duration, rounds int) error {
	dir, err := os.MkdirTemp("", "tally-scrub-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "ledger")
	if out, err := exec.Command(bin, "init", "--dir", root).CombinedOutput(); err != nil {
		return fmt.Errorf("tally init: %v: %s", err, out)
	}
	objs, err := artifact.OpenStore(store.ObjectsDir(root))
	if err != nil {
		return err
	}
	const object = 16 << 20
	rng := rand.New(rand.NewPCG(uint64(size), 24))
	buf := make([]byte, object)
	for put := int64(0); put < size; put += object {
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		if _, err := objs.PutBytes(context.Background(), buf); err != nil {
			return err
		}
	}
	fmt.Printf("content store: %d MiB in %d objects; %d clients declaring promises for %v a leg; %d rounds\n", size>>20, (size+object-1)/object, clients, d, rounds)
	fmt.Println("round  leg               writes/s   p50 ms   p99 ms   scrubbed MB/s")
	p99s := map[string][]float64{}
	rates := map[string][]float64{}
	for r := 1; r <= rounds; r++ {
		for i := range scrubLegs {
			leg := scrubLegs[(i+r-1)%len(scrubLegs)]
			res, err := scrubLegRun(bin, root, leg, clients, d)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, leg.name, err)
			}
			p99s[leg.name] = append(p99s[leg.name], res.p99)
			rates[leg.name] = append(rates[leg.name], res.mbps)
			fmt.Printf("%5d  %-16s  %8.0f  %7.2f  %7.2f  %8.1f\n", r, leg.name, res.perSec, res.p50, res.p99, res.mbps)
		}
	}
	off := medianOf(p99s["off"])
	for _, leg := range scrubLegs[1:] {
		p := medianOf(p99s[leg.name])
		fmt.Printf("%s: scrubbed %.1f MB/s (median), write p99 %.2f ms vs %.2f ms without: %.2fx (want <= 1.2x)\n", leg.name, medianOf(rates[leg.name]), p, off, p/off)
	}
	return nil
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

type legResult struct{ perSec, p50, p99, mbps float64 }

// scrubLegRun starts the server on root with the leg's scrub rate, loads
// it, and stops it.
func scrubLegRun(bin, root string, leg scrubLeg, clients int, d time.Duration) (legResult, error) {
	p := &proc{addr: benchproc.FreePort()}
	p.args = []string{"serve", "--insecure-dev", "--dir", root, "--addr", p.addr, "--watch-every", "0",
		"--scrub-rate", leg.rate, "--scrub-every", "1s", "--collect-grace", "24h"}
	if err := p.start(bin); err != nil {
		return legResult{}, err
	}
	defer p.stop()
	// A second for the first pass to be under way, the same in every leg.
	time.Sleep(time.Second)
	before, err := scrubbedBytes(p.addr)
	if err != nil {
		return legResult{}, err
	}
	var mu sync.Mutex
	var lat []time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for ctx.Err() == nil {
				t := time.Now()
				if declare(p.addr) {
					mine = append(mine, time.Since(t))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	took := time.Since(start)
	after, err := scrubbedBytes(p.addr)
	if err != nil {
		return legResult{}, err
	}
	if len(lat) == 0 {
		return legResult{}, fmt.Errorf("no write acknowledged")
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return ms(lat[min(len(lat)-1, int(q*float64(len(lat))))]) }
	return legResult{perSec: float64(len(lat)) / took.Seconds(), p50: at(0.50), p99: at(0.99), mbps: float64(after-before) / 1e6 / took.Seconds()}, nil
}

// scrubbedBytes reads the server's tally_artifact_scrubbed_bytes_total.
func scrubbedBytes(addr string) (int64, error) {
	res, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", res.Status)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "tally_artifact_scrubbed_bytes_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("/metrics: no tally_artifact_scrubbed_bytes_total")
}
