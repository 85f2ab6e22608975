// Command tally is a durable ledger of obligations between agents.
package main

import (
	"os"
	"runtime/debug"
	"runtime/pprof"

	"tally/cli"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// Most invocations fold a ledger and exit within milliseconds; the
		// heap they build is live until then, so collecting it early is
		// wasted work. `tally serve` is long-lived and sets its own.
		debug.SetGCPercent(400)
	}
	if path := os.Getenv("TALLY_CPUPROFILE"); path != "" {
		// For measuring tally itself: a CPU profile of this one command.
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				code := cli.Main(os.Args[1:], cli.System())
				pprof.StopCPUProfile()
				f.Close()
				os.Exit(int(code))
			}
		}
	}
	os.Exit(int(cli.Main(os.Args[1:], cli.System())))
}
