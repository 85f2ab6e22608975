package cluster

import (
	"slices"
	"testing"

	"tally/cluster/replica"
	"tally/verb"
)

// A replica runs exactly the commands of the verb table's writes, and the
// timekeeper's sweeps: a write whose command is missing here, or a command
// no verb names, fails.
func TestMethodsAreTheTables(t *testing.T) {
	m := Methods(func() *replica.SM { return nil })
	want := []string{MethodSweep, MethodSweepClaims}
	for _, v := range verb.Table() {
		if v.Command != "" {
			want = append(want, v.Command)
		}
		if v.Effect != verb.Read && v.Command == "" {
			t.Errorf("%s writes and names no command a replica runs", v.Name)
		}
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("commands %v, the table's %v", got, want)
	}
}
