package checkrun

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"

	"tally/claim"
)

// TestReport reads a test report — `go test -json` output or JUnit XML —
// from the artifact (or from the standard output of Input.Command) and
// decides: any failed test → fail; no passed test → incomplete; else pass.
// A report it cannot read is error.
type TestReport struct{}

func (TestReport) Name() string    { return "test-report" }
func (TestReport) Version() string { return "1" }

func (TestReport) Run(ctx context.Context, in Input) Outcome {
	var report, log []byte
	if in.Command != "" {
		res := runShell(ctx, in)
		log = res.log
		switch {
		case res.startErr != nil:
			return errorf(log, "cannot start: %v", res.startErr)
		case res.timedOut:
			return errorf(log, "timed out after %v", res.timeout)
		case res.exit == 126 || res.exit == 127:
			return errorf(log, "cannot start: the shell exited %d (command not executable or not found)", res.exit)
		}
		// go test exits 1 when a test fails: the report decides, not the status.
		report = res.stdout
	} else {
		b, err := os.ReadFile(in.Path)
		if err != nil {
			return errorf(nil, "read the report: %v", err)
		}
		report = b
		log = append(log, b...)
		if len(log) > MaxLog {
			log = append(log[:MaxLog:MaxLog], "\ntally: log cut\n"...)
		}
	}
	c, err := ParseReport(report)
	if err != nil {
		return errorf(log, "unreadable test report: %v", err)
	}
	o := Outcome{Result: c.Result(), Log: log}
	o.Note = fmt.Sprintf("%s: %d passed, %d failed, %d skipped", c.Format, c.Passed, c.Failed, c.Skipped)
	if len(c.FailedNames) > 0 {
		o.Note += "; first failure " + c.FailedNames[0]
	}
	o.Log = fmt.Appendf(o.Log, "\ntally: %s\n", o.Note)
	return o
}

// Counts summarises a test report.
type Counts struct {
	Format                  string // "go-test-json" or "junit"
	Passed, Failed, Skipped int
	FailedNames             []string // in report order, at most 20
}

// Result applies the rule: any failed → fail; none passed → incomplete;
// else pass.
func (c Counts) Result() claim.Result {
	switch {
	case c.Failed > 0:
		return claim.Fail
	case c.Passed == 0:
		return claim.Incomplete
	}
	return claim.Pass
}

func (c *Counts) failed(name string) {
	c.Failed++
	if len(c.FailedNames) < 20 {
		c.FailedNames = append(c.FailedNames, name)
	}
}

// ParseReport reads `go test -json` output or JUnit XML, told apart by the
// first non-blank byte ('<' is XML).
func ParseReport(b []byte) (Counts, error) {
	t := bytes.TrimLeft(b, " \t\r\n\ufeff")
	if len(t) == 0 {
		return Counts{Format: "empty"}, errors.New("the report is empty")
	}
	if t[0] == '<' {
		return parseJUnit(t)
	}
	return parseGoTestJSON(t)
}

// goTestEvent is one line of test2json output.
type goTestEvent struct {
	Action  string
	Package string
	Test    string
}

// parseGoTestJSON counts the final action of every test and treats a
// package that failed without a failing test (a build failure, a panic in
// TestMain) as one failure. Lines that are not JSON objects (build output
// interleaved by `go test -json`) are skipped, but a report with no event
// at all is unreadable.
func parseGoTestJSON(b []byte) (Counts, error) {
	c := Counts{Format: "go-test-json"}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	events := 0
	pkgFailedTests := map[string]int{}
	var pkgFails []string
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e goTestEvent
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			continue
		}
		events++
		switch {
		case e.Test != "" && e.Action == "pass":
			c.Passed++
		case e.Test != "" && e.Action == "fail":
			c.failed(e.Package + "." + e.Test)
			pkgFailedTests[e.Package]++
		case e.Test != "" && e.Action == "skip":
			c.Skipped++
		case e.Test == "" && e.Action == "fail":
			pkgFails = append(pkgFails, e.Package)
		}
	}
	if err := sc.Err(); err != nil {
		return c, err
	}
	if events == 0 {
		return c, errors.New("no go test -json events")
	}
	for _, p := range pkgFails {
		if pkgFailedTests[p] == 0 {
			c.failed(p + " (package)")
		}
	}
	return c, nil
}

// junitCase is one <testcase>.
type junitCase struct {
	Name      string    `xml:"name,attr"`
	Classname string    `xml:"classname,attr"`
	Failure   *struct{} `xml:"failure"`
	Error     *struct{} `xml:"error"`
	Skipped   *struct{} `xml:"skipped"`
}

// parseJUnit counts every <testcase> anywhere in the document (testsuites,
// nested testsuite): failure or error → failed, skipped → skipped, else
// passed.
func parseJUnit(b []byte) (Counts, error) {
	c := Counts{Format: "junit"}
	d := xml.NewDecoder(bytes.NewReader(b))
	root := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return c, err
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if !root {
			root = true
			if se.Name.Local != "testsuites" && se.Name.Local != "testsuite" {
				return c, fmt.Errorf("root element <%s> is not <testsuites> or <testsuite>", se.Name.Local)
			}
			continue
		}
		if se.Name.Local != "testcase" {
			continue
		}
		var tc junitCase
		if err := d.DecodeElement(&tc, &se); err != nil {
			return c, err
		}
		name := tc.Name
		if tc.Classname != "" {
			name = tc.Classname + "." + name
		}
		switch {
		case tc.Failure != nil || tc.Error != nil:
			c.failed(name)
		case tc.Skipped != nil:
			c.Skipped++
		default:
			c.Passed++
		}
	}
	if !root {
		return c, errors.New("no XML element")
	}
	return c, nil
}
