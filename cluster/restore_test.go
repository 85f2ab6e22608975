package cluster

import (
	"reflect"
	"testing"

	"tally/backup"
	"tally/cluster/replica"
)

// What a restore asks of its data groups: the backup's groups, the added
// ones included (more if the restore asks for more at its bootstrap), and
// the sessions the backup found outside their hash's group, unless they
// hash to that group in the restored cluster or name a group it will not
// have.
func TestRestoredGroups(t *testing.T) {
	hashedTo := func(groups int, g uint64) string {
		for _, s := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
			if replica.GroupOf(groups, "acme", s) == g {
				return s
			}
		}
		t.Fatalf("no session hashes to group %d of %d", g, groups)
		return ""
	}
	placed, home := hashedTo(2, 2), hashedTo(2, 3)
	sum := func(src backup.Source, cuts ...backup.Cut) backup.Summary {
		return backup.Summary{Header: backup.Header{Source: src}, Sessions: cuts}
	}
	for _, c := range []struct {
		name   string
		groups int
		sum    backup.Summary
		want   pendingGroups
	}{
		{"nothing added or placed", 2, sum(backup.Source{Groups: 2}, backup.Cut{Tenant: "acme", Session: placed}), pendingGroups{Groups: 2, Placed: map[string]uint64{}}},
		{"two added, one session in each of an added and a bootstrap group", 2,
			sum(backup.Source{Groups: 2, Added: 2}, backup.Cut{Tenant: "acme", Session: placed, Group: 4}, backup.Cut{Tenant: "acme", Session: home, Group: 2}),
			pendingGroups{Groups: 4, Placed: map[string]uint64{"acme/" + placed: 4, "acme/" + home: 2}}},
		{"restored with more groups than the backup had", 6, sum(backup.Source{Groups: 2, Added: 1}, backup.Cut{Tenant: "acme", Session: placed, Group: 4}),
			pendingGroups{Groups: 6, Placed: map[string]uint64{"acme/" + placed: 4}}},
		{"a session whose group is its hash's in the restored cluster", 2, sum(backup.Source{Groups: 3}, backup.Cut{Tenant: "acme", Session: placed, Group: 2}),
			pendingGroups{Groups: 3, Placed: map[string]uint64{}}},
	} {
		if got := restoredGroups(c.groups, c.sum); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
