package prime

import (
	"testing"

	"tally/service"
)

// TestCommands: a printed command carries --session and --as only when
// they are needed, each a shell word.
func TestCommands(t *testing.T) {
	for _, c := range []struct {
		cmds Commands
		want string
	}{
		{Commands{}, "tally resolve L1"},
		{Commands{Session: "default/load"}, "tally --session default/load resolve L1"},
		{Commands{As: "worker-1"}, "tally --as worker-1 resolve L1"},
		{Commands{Session: "acme/q 3", As: "agent://a b"}, "tally --session 'acme/q 3' --as 'agent://a b' resolve L1"},
	} {
		if got := c.cmds.Tally("resolve L1"); got != c.want {
			t.Errorf("%+v: %q, want %q", c.cmds, got, c.want)
		}
	}
	for in, want := range map[string]string{"": "''", "C1": "C1", "it's": `'it'\''s'`, "a|b": "'a|b'"} {
		if got := service.ShellWord(in); got != want {
			t.Errorf("ShellWord(%q) = %q, want %q", in, got, want)
		}
	}
}
