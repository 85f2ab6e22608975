// Command tally is a durable ledger of obligations between agents.
package main

import (
	"os"
	"runtime/debug"

	"tally/cli"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// Most invocations fold a ledger and exit within milliseconds; the
		// heap they build is live until then, so collecting it early is
		// wasted work. `tally serve` is long-lived and sets its own.
		debug.SetGCPercent(400)
	}
	os.Exit(int(cli.Main(os.Args[1:], cli.System())))
}
