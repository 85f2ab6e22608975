package placement

import "testing"

func TestIntersect(t *testing.T) {
	z := func(zs ...string) Constraint { return Constraint{Zones: zs} }
	r := func(rs ...string) Constraint { return Constraint{Regions: rs} }
	for _, tc := range []struct {
		a, b Constraint
		want string
	}{
		{z("a", "b"), z("b", "c"), "zones b"},
		{z("a", "b"), z("c"), "none in common"},
		{z("a", "b"), Constraint{}, "zones a,b"},
		{r("eu"), z("a"), "regions eu and zones a"},
		{r("eu", "us"), r("us", "ap"), "regions us"},
		{r("eu"), r("us"), "none in common"},
	} {
		got := "none in common"
		if c, ok := tc.a.Intersect(tc.b); ok {
			got = c.String()
		}
		if got != tc.want {
			t.Errorf("(%s) ∩ (%s) = %s, want %s", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestCheckMet(t *testing.T) {
	// Nodes 1..5 in zones a, a, b, c, c; node 3 (zone b's only) dead.
	nodes := with(zoned("aabcc"), dead(3))
	for _, tc := range []struct {
		c        Constraint
		replicas int
		want     string
	}{
		{Constraint{Zones: []string{"a", "c"}}, 3, ""},
		{Constraint{Zones: []string{"a", "b"}}, 3, `zones: zone "b" has no live member that is not draining: the constraint cannot be met`},
		{Constraint{Zones: []string{"a"}}, 3, "only 2 live members that are not draining are inside the constraint (zones a), and a group's 3 voters must be: the constraint cannot be met"},
		{Constraint{Zones: []string{"a"}}, 1, ""},
		{Constraint{Zones: []string{"x"}}, 3, `zones: no member is in zone "x" (the members' zones: a, b, c)`},
	} {
		if got := errString(CheckMet(nodes, tc.c, tc.replicas)); got != tc.want {
			t.Errorf("CheckMet(%s, %d):\n got  %q\n want %q", tc.c, tc.replicas, got, tc.want)
		}
	}
	one := zoned("abb")
	if got, want := errString(CheckMet(one, Constraint{Zones: []string{"a"}}, 3)), "only 1 live member that is not draining is inside the constraint (zones a), and a group's 3 voters must be: the constraint cannot be met"; got != want {
		t.Errorf("one member inside:\n got  %q\n want %q", got, want)
	}
}

func TestCheckJoint(t *testing.T) {
	nodes := zoned("aabbcc")
	for _, tc := range []struct {
		c, other Constraint
		want     string
	}{
		{Constraint{Zones: []string{"a", "b"}}, Constraint{Zones: []string{"b", "c", "a"}}, ""},
		{Constraint{Zones: []string{"a", "b"}}, Constraint{Zones: []string{"c"}}, "no region or zone is in both (zones a,b) and (zones c)"},
		{Constraint{Zones: []string{"a", "b"}}, Constraint{Zones: []string{"b", "c"}}, "together (zones b): only 2 live members that are not draining are inside the constraint (zones b), and a group's 3 voters must be: the constraint cannot be met"},
	} {
		if got := errString(CheckJoint(nodes, tc.c, tc.other, 3)); got != tc.want {
			t.Errorf("CheckJoint(%s, %s):\n got  %q\n want %q", tc.c, tc.other, got, tc.want)
		}
	}
}

func TestMeets(t *testing.T) {
	nodes := with(zoned("abcab"), dead(5))
	c := Constraint{Zones: []string{"a", "b"}}
	for _, tc := range []struct {
		voters []uint64
		want   bool
	}{{[]uint64{1, 2, 4}, true}, {[]uint64{1, 2, 3}, false}, {[]uint64{1, 5}, false}, {nil, false}, {[]uint64{9}, false}} {
		if got := Meets(nodes, tc.voters, c); got != tc.want {
			t.Errorf("Meets(%v) = %v, want %v", tc.voters, got, tc.want)
		}
	}
}
