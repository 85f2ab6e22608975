package servecli

import "testing"

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{in: "1024", want: 1024},
		{in: "64MiB", want: 64 << 20},
		{in: "1GiB", want: 1 << 30},
		{in: "500MB", want: 500e6},
		{in: "4096B", want: 4096},
		{in: "2 KiB", want: 2048},
		{in: "0", want: 0},
		{in: "-1", err: `"-1" is not a size: a whole number of bytes, or one with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB), such as 64MiB`},
		{in: "1.5GiB", err: `"1.5GiB" is not a size: a whole number of bytes, or one with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB), such as 64MiB`},
		{in: "10XB", err: `"10XB" is not a size: a whole number of bytes, or one with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB), such as 64MiB`},
		{in: "9999999TiB", err: `"9999999TiB" is too large a size`},
	} {
		got, err := parseByteSize(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("parseByteSize(%q) = %d, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
