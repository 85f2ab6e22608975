package verb

import (
	"reflect"
	"slices"
	"testing"

	"tally/api"
)

// The table's entries are whole: every verb has a request, a call and a
// family; the members it names (the party, the path's) are its request's;
// a write names the command a replica runs; a path's parameters and the
// members they set agree in number.
func TestTableIsWhole(t *testing.T) {
	for _, v := range Table() {
		if v.Request == nil || v.Response == nil || v.Call == nil || v.Family == "" || v.Summary == "" {
			t.Errorf("%s: request %v, response %v, call set %v, family %q, summary %q", v.Name, v.Request, v.Response, v.Call != nil, v.Family, v.Summary)
			continue
		}
		members := api.Members(reflect.New(v.Request).Interface())
		if v.Party != "" && !slices.Contains(members, v.Party) {
			t.Errorf("%s: party %q is not a member of %s (%v)", v.Name, v.Party, v.Request, members)
		}
		pathDoc := members
		if v.Request == reflect.TypeFor[Evidence]() { // the path names the verdict's claim and check
			pathDoc = api.Members(&api.ClaimCheck{})
		}
		for _, m := range v.HTTP.Members {
			if !slices.Contains(pathDoc, m) {
				t.Errorf("%s: path member %q is not a member of %s", v.Name, m, v.Request)
			}
		}
		if n := len(v.HTTP.Members); n > 0 && n != len(v.Params()) {
			t.Errorf("%s: %d path members for the parameters %v", v.Name, n, v.Params())
		}
		if (v.Effect != Read) != (v.Command != "") {
			t.Errorf("%s: effect %s, command %q: a write names its command, a read none", v.Name, v.Effect, v.Command)
		}
		if v.HTTP.Path != "" && v.HTTP.Method == "" {
			t.Errorf("%s: a path without a method", v.Name)
		}
	}
}

func TestPathOf(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{PromiseDeclare, "/v1/tenants/a%2Fb/sessions/s/promises"},
		{ClaimCheckBegin, "/v1/tenants/a%2Fb/sessions/s/claims/C%201/checks/x%3F/begin"},
		{Verify, "/v1/verify"},
	} {
		v := Of(c.name)
		args := []string{"C 1", "x?"}[:len(v.Params())]
		if got := v.PathOf("a/b", "s", args...); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
