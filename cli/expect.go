package cli

import "github.com/spf13/cobra"

// addExpectCommands adds the expectations family's verbs and the watcher.
func addExpectCommands(root *cobra.Command, g *global) {}
