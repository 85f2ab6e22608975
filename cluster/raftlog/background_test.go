package raftlog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A repeated error is logged once, then counted: the count comes with the
// next other error, or once a minute while it goes on; errors that differ
// only in their file numbers are one error.
func TestRepeatsLogOnceWithACount(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	r := newRepeats(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	r.now = func() time.Time { return now }
	for i := 0; i < 3000; i++ {
		r.errorf(fmt.Sprintf("background error: write /d/raft/%06d.sst: no space left on device", 600000+i))
		now = now.Add(time.Millisecond)
	}
	now = now.Add(time.Minute)
	r.errorf("background error: write /d/raft/700000.sst: no space left on device")
	r.errorf("another error")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=ERROR msg="background error: write /d/raft/600000.sst: no space left on device"`,
		`level=ERROR msg="background error: write /d/raft/700000.sst: no space left on device" repeated=3000 since=1970-01-01T00:16:40.000Z`,
		`level=ERROR msg="another error"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
}

func TestDigitless(t *testing.T) {
	for in, want := range map[string]string{
		"write 000051.sst: no space": "write #.sst: no space",
		"":                           "",
		"9 of 10":                    "# of #",
	} {
		if got := digitless(in); got != want {
			t.Errorf("digitless(%q) = %q, want %q", in, got, want)
		}
	}
}

// Background work that fails again and again waits longer each time, up
// to backgroundWaitMax, and from the start again once some succeeds.
func TestBackoffDoublesToItsBound(t *testing.T) {
	var waits []time.Duration
	b := &backoff{sleep: func(d time.Duration) { waits = append(waits, d) }}
	for i := 0; i < 12; i++ {
		b.failed()
	}
	b.ok()
	b.failed()
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond,
		320 * time.Millisecond, 640 * time.Millisecond, 1280 * time.Millisecond, 2560 * time.Millisecond, 5 * time.Second, 5 * time.Second, 5 * time.Second,
		10 * time.Millisecond}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
}
