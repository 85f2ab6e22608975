package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// metricsText reads a server's /metrics; url is the server's base URL
// (http://host:port).
func metricsText(url string) (string, error) {
	res, err := httpc.Get(url + "/metrics")
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != 200 {
		return "", fmt.Errorf("GET %s/metrics: %d %s", url, res.StatusCode, b)
	}
	return string(b), nil
}

// sampleSum sums a metric's samples in a /metrics text: the lines of name
// (unlabelled, or with labels) that hold match ("" matches every one). It
// reports whether there was one.
func sampleSum(text, name, match string) (float64, bool) {
	var sum float64
	found := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') || !strings.Contains(line, match) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

func TestSampleSum(t *testing.T) {
	text := "# HELP tally_x_total x\n" +
		"tally_x_total 3\n" +
		"tally_x_total_bytes 100\n" +
		"tally_y{layer=\"detector\"} 2\n" +
		"tally_y{layer=\"gossip\"} 5\n"
	for _, c := range []struct {
		name, match string
		want        float64
		found       bool
	}{
		{"tally_x_total", "", 3, true},
		{"tally_x", "", 0, false},
		{"tally_y", "", 7, true},
		{"tally_y", `layer="detector"`, 2, true},
		{"tally_y", `layer="none"`, 0, false},
		{"tally_z", "", 0, false},
	} {
		if got, found := sampleSum(text, c.name, c.match); got != c.want || found != c.found {
			t.Errorf("sampleSum(%s, %q) = %v, %v; want %v, %v", c.name, c.match, got, found, c.want, c.found)
		}
	}
}
