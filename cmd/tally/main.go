// Command tally is a durable ledger of obligations between agents.
//
// It runs the verbs that serve a ledger or act on a cluster node (serve,
// mcp, cluster, backup, restore) through tally-server, installed beside it
// by `go install ./cmd/...`, so that every other verb starts without the
// server's, the cluster's and MCP's packages.
package main

import (
	"os"

	"tally/cli"
)

func main() { os.Exit(int(cli.Run(nil))) }
