package servecli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the units a byte size may carry, longest first so that
// "MiB" is not read as "B".
var byteUnits = []struct {
	name string
	mult int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"KB", 1e3}, {"B", 1},
}

// parseByteSize reads a size in bytes: a whole number, alone or followed
// by a unit (64MiB, 1GiB, 500MB, 4096B). It refuses a negative or
// fractional number, an unknown unit and a size past int64.
func parseByteSize(s string) (int64, error) {
	num, mult := s, int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.name) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.name)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size: a whole number of bytes, or one with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB), such as 64MiB", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large a size", s)
	}
	return n * mult, nil
}
