package checkrun

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/claim"
)

const goJSONFail = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"fail","Package":"p","Test":"TestB","Elapsed":0}
{"Action":"fail","Package":"p","Elapsed":0.01}
`

const goJSONPass = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestA/sub"}
{"Action":"pass","Package":"p","Test":"TestA/sub"}
{"Action":"skip","Package":"p","Test":"TestC"}
{"Action":"pass","Package":"p"}
`

const goJSONNone = `{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"testing: warning: no tests to run\n"}
{"Action":"skip","Package":"p","Test":"TestC"}
{"Action":"pass","Package":"p"}
`

// A build failure: the package fails with no failing test.
const goJSONBuild = `# p
p/x.go:3:1: syntax error
{"Action":"start","Package":"p"}
{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}
{"Action":"fail","Package":"p"}
`

const junitFail = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="parser" tests="3">
    <testcase classname="parser" name="escapes"/>
    <testcase classname="parser" name="surrogates"><failure message="boom">trace</failure></testcase>
    <testcase classname="parser" name="later"><skipped/></testcase>
  </testsuite>
</testsuites>`

const junitError = `<testsuite name="s"><testcase name="a"/><testcase name="b"><error message="panic"/></testcase></testsuite>`

const junitPass = `<testsuite name="s"><testcase name="a"/><testcase name="b"></testcase><testsuite name="inner"><testcase name="c"/></testsuite></testsuite>`

const junitNone = `<testsuites><testsuite name="s"><testcase name="a"><skipped/></testcase></testsuite></testsuites>`

func TestParseReport(t *testing.T) {
	cases := []struct {
		name                    string
		in                      string
		want                    claim.Result
		passed, failed, skipped int
	}{
		{"go json with a failure", goJSONFail, claim.Fail, 1, 1, 0},
		{"go json all pass", goJSONPass, claim.Pass, 2, 0, 1},
		{"go json none passed", goJSONNone, claim.Incomplete, 0, 0, 1},
		{"go json build failure", goJSONBuild, claim.Fail, 0, 1, 0},
		{"junit with a failure", junitFail, claim.Fail, 1, 1, 1},
		{"junit with an error", junitError, claim.Fail, 1, 1, 0},
		{"junit all pass", junitPass, claim.Pass, 3, 0, 0},
		{"junit none passed", junitNone, claim.Incomplete, 0, 0, 1},
		{"junit empty suite", `<testsuite name="s"></testsuite>`, claim.Incomplete, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseReport([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if c.Result() != tc.want || c.Passed != tc.passed || c.Failed != tc.failed || c.Skipped != tc.skipped {
				t.Fatalf("got %+v → %s, want %s %d/%d/%d", c, c.Result(), tc.want, tc.passed, tc.failed, tc.skipped)
			}
		})
	}
	for _, bad := range []string{"", "   ", "not a report", "<html><body/></html>", "<testsuite><testcase>", `{"Foo":1}`} {
		if c, err := ParseReport([]byte(bad)); err == nil {
			t.Errorf("%q read as a report: %+v", bad, c)
		}
	}
}

func materialise(t *testing.T, name, content string) Input {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return Input{Dir: dir, Path: p, Timeout: 5 * time.Second}
}

func TestTestReportValidator(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		in   string
		want claim.Result
	}{{goJSONFail, claim.Fail}, {goJSONPass, claim.Pass}, {goJSONNone, claim.Incomplete}, {junitFail, claim.Fail}, {junitPass, claim.Pass}, {junitNone, claim.Incomplete}, {"garbage", claim.Error}} {
		o := TestReport{}.Run(ctx, materialise(t, "report", tc.in))
		if o.Result != tc.want {
			t.Errorf("%.30q: %s (%s), want %s", tc.in, o.Result, o.Note, tc.want)
		}
		if len(o.Log) == 0 {
			t.Errorf("%.30q: no log", tc.in)
		}
	}
	// From a command's standard output; its exit status does not decide.
	in := materialise(t, "report", goJSONFail)
	in.Command = `cat "$TALLY_ARTIFACT"; exit 1`
	if o := (TestReport{}).Run(ctx, in); o.Result != claim.Fail || !strings.Contains(o.Note, "1 failed") {
		t.Fatalf("command report: %s %s", o.Result, o.Note)
	}
	in.Command = `printf '%s\n' '{"Action":"pass","Package":"p","Test":"T"}'`
	if o := (TestReport{}).Run(ctx, in); o.Result != claim.Pass {
		t.Fatalf("command report pass: %s %s", o.Result, o.Note)
	}
	in.Command = "no-such-tally-command-xyz"
	if o := (TestReport{}).Run(ctx, in); o.Result != claim.Error {
		t.Fatalf("missing command: %s %s", o.Result, o.Note)
	}
}

func TestCommandValidator(t *testing.T) {
	ctx := context.Background()
	in := materialise(t, "patch.txt", "the fixed escape\n")
	run := func(cmd string, timeout time.Duration) Outcome {
		t.Helper()
		i := in
		i.Command, i.Timeout = cmd, timeout
		return Command{}.Run(ctx, i)
	}
	if o := run("grep -q fixed patch.txt && grep -q fixed \"$TALLY_ARTIFACT\"", 0); o.Result != claim.Pass {
		t.Fatalf("exit 0: %s %s %s", o.Result, o.Note, o.Log)
	}
	if o := run("echo looking; grep -q broken patch.txt", 0); o.Result != claim.Fail || o.Note != "exit 1" || !strings.Contains(string(o.Log), "looking") {
		t.Fatalf("exit 1: %s %q %q", o.Result, o.Note, o.Log)
	}
	if o := run("exit 3", 0); o.Result != claim.Fail || o.Note != "exit 3" {
		t.Fatalf("exit 3: %s %q", o.Result, o.Note)
	}
	if o := run("no-such-tally-command-xyz --flag", 0); o.Result != claim.Error || !strings.Contains(o.Note, "cannot start") {
		t.Fatalf("not found: %s %q", o.Result, o.Note)
	}
	if o := run("./patch.txt", 0); o.Result != claim.Error {
		t.Fatalf("not executable: %s %q", o.Result, o.Note)
	}
	if o := run("   ", 0); o.Result != claim.Error {
		t.Fatalf("empty command: %s %q", o.Result, o.Note)
	}
	start := time.Now()
	if o := run("sleep 30 & sleep 30; wait", 300*time.Millisecond); o.Result != claim.Error || !strings.Contains(o.Note, "timed out") {
		t.Fatalf("timeout: %s %q", o.Result, o.Note)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v: the shell's children outlived it", d)
	}
}

func TestLookup(t *testing.T) {
	for _, n := range []string{"command", "test-report"} {
		v, ok := Lookup(n)
		if !ok || v.Name() != n || v.Version() == "" {
			t.Fatalf("lookup %s: %v %v", n, v, ok)
		}
	}
	if _, ok := Lookup("review"); ok {
		t.Fatal("found a validator that does not exist")
	}
	if got := strings.Join(Names(), ","); got != "command,test-report" {
		t.Fatal(got)
	}
}

// FuzzParseReport reads arbitrary bytes as a test report (evidence comes
// from whoever ran the tests): it never panics, and what it counts is
// consistent with the result it gives.
func FuzzParseReport(f *testing.F) {
	for _, s := range []string{goJSONFail, goJSONPass, goJSONNone, goJSONBuild, junitFail, junitError, junitPass, junitNone, "", "{}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseReport(data)
		if err != nil {
			return
		}
		if c.Passed < 0 || c.Failed < 0 || c.Skipped < 0 || len(c.FailedNames) > 20 || len(c.FailedNames) > c.Failed {
			t.Fatalf("inconsistent counts %+v", c)
		}
		if (c.Result() == claim.Pass) != (c.Failed == 0 && c.Passed > 0) {
			t.Fatalf("result %s for %+v", c.Result(), c)
		}
	})
}
