// Command tally-server is the whole tally CLI: every verb of tally, and the
// ones that serve a ledger or act on a cluster node (serve, mcp, cluster,
// backup, restore), which tally runs through it.
package main

import (
	"os"

	"tally/cli"
	"tally/cli/servecli"
)

func main() { os.Exit(int(cli.Run(servecli.Add))) }
