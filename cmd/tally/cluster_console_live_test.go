package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"tally/internal/proctest"
)

// The console's cluster view shows each member's liveness (state,
// incarnation, health) as the node asked sees it: in a real browser, a
// member stopped until it is settled dead shows dead, the others alive.
func TestClusterConsoleShowsMemberStates(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		proctest.Skip(t, "the console in a browser: %s is not installed (apt-get install -y chromium)", chromiumPath)
	}
	node, pwDir := playwright.Find(t)
	nodes := startLivenessCluster(t, nil)
	leader, victim := metaLeaderOf(t, nodes)
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer victim.cmd.Process.Signal(syscall.SIGCONT)
	waitUntil(t, "the stopped node dead in the leader's view", 60*time.Second, func() bool {
		return memberOf(must(membersOf(leader.addr)), victim.id).State == "dead"
	})
	var alive []string
	for _, n := range nodes {
		if n != victim {
			alive = append(alive, fmt.Sprint(n.id))
		}
	}
	out := proctest.Script{Node: node, Dir: pwDir, Path: filepath.Join("testdata", "console", "cluster.mjs"), Lib: []string{filepath.Join("testdata", "console", "page.mjs")}, Timeout: 2 * time.Minute,
		Env: append(baseEnv(), "BASE="+leader.url(), "DEAD="+fmt.Sprint(victim.id), "ALIVE="+strings.Join(alive, ","), "OUT="+t.TempDir())}.Run(t)
	if !strings.Contains(string(out), "\nok\n") {
		t.Fatal("the browser script did not finish")
	}
}
