package promise

import "testing"

func TestWithPriority(t *testing.T) {
	cases := []struct {
		meta string
		p    int
		want string
		err  string
	}{
		{"", 1, `{"priority":1}`, ""},
		{"", 2, ``, ""},
		{`{ "rung": 1 }`, 0, `{"rung":1,"priority":0}`, ""},
		{`{"priority":3}`, 3, `{"priority":3}`, ""},
		{`{"priority":3}`, 1, "", "priority: meta names another priority; give it in one place"},
		{`{"priority":"high"}`, 1, "", "priority: meta names another priority; give it in one place"},
		{"", 5, "", "priority: must be an integer from 0 (highest) to 4"},
		{`[1]`, 1, "", "meta: must be a JSON object"},
	}
	for _, tc := range cases {
		got, err := WithPriority(tc.meta, tc.p)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q %d: %v, want %q", tc.meta, tc.p, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q %d: %q %v, want %q", tc.meta, tc.p, got, err, tc.want)
		}
	}
	for meta, want := range map[string]int{"": 2, `{"priority":0}`: 0, `{"priority":"high"}`: 2, `{"priority":7}`: 2, `{"a":{"priority":1}}`: 2} {
		if got, _ := MetaPriority(meta); got != want {
			t.Errorf("MetaPriority(%q) = %d, want %d", meta, got, want)
		}
	}
}
