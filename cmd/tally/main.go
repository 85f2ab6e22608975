// Command tally is a durable ledger of obligations between agents.
package main

import (
	"os"

	"tally/cli"
)

func main() {
	os.Exit(int(cli.Main(os.Args[1:], cli.System())))
}
