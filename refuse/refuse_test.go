package refuse

import (
	"fmt"
	"testing"
)

// A refusal reads as "field: rule", is a usage error only when invalid,
// and is found again through any wrapping.
func TestRefusal(t *testing.T) {
	for _, c := range []struct {
		r     *Refusal
		text  string
		usage bool
	}{
		{Invalidf("until", "must be RFC 3339 or a duration"), "until: must be RFC 3339 or a duration", true},
		{NotFoundf("id", "no promise p9"), "id: no promise p9", false},
		{Conflictf("id", "already resolved"), "id: already resolved", false},
		{Forbiddenf("actor", "only the debtor amends"), "actor: only the debtor amends", false},
		{New(Code("other"), "f", "r"), "f: r", false},
	} {
		if got := c.r.Error(); got != c.text {
			t.Errorf("Error() = %q, want %q", got, c.text)
		}
		if c.r.Usage() != c.usage {
			t.Errorf("%q: Usage() = %v", c.text, c.r.Usage())
		}
		got, ok := As(fmt.Errorf("append event: %w", c.r))
		if !ok || got != c.r {
			t.Errorf("%q: As through a wrap = %v, %v", c.text, got, ok)
		}
	}
	if _, ok := As(fmt.Errorf("disk on fire")); ok {
		t.Error("As found a refusal in a plain error")
	}
}
