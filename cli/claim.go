package cli

import "github.com/spf13/cobra"

// addClaimCommands adds the claims family's verbs.
func addClaimCommands(root *cobra.Command, g *global) {}
