package servecli

import (
	"github.com/spf13/cobra"

	"tally/cli"
)

// Add adds the hosted verbs to tally-server's root command (cli.Hosted).
func Add(root *cobra.Command, g cli.Env) {
	root.AddCommand(newServe(g), newMCP(g), newCluster(g), newBackup(g), newRestore(g))
}
