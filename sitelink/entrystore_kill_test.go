package sitelink_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/sitelink"
)

// writerEnv names the file a child process writes entries to until it is killed.
const writerEnv = "SITELINK_ENTRY_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		writeEntriesUntilKilled(path)
	}
	os.Exit(m.Run())
}

// writeEntriesUntilKilled puts entries one by one and prints each MAC once Put returned.
func writeEntriesUntilKilled(path string) {
	round, _ := strconv.Atoi(os.Getenv(writerEnv + "_ROUND"))
	s, err := sitelink.OpenEntryStore(path, nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		e := storeEntry(round*1000+i, time.Now().Add(2*time.Hour))
		if err := s.Put(e); err != nil {
			fmt.Println("ERR", err)
			os.Exit(1)
		}
		fmt.Println("ACK", e.MAC)
	}
}

// TestEntryStoreSurvivesKill kills a process that is writing entries at random moments:
// every entry it acknowledged is there after the kill, and the file is never damaged.
func TestEntryStoreSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills child processes; skipped with -short")
	}
	path := filepath.Join(t.TempDir(), "boot-entries.json")
	r := rand.New(rand.NewPCG(7, 11))
	acked := map[string]bool{}
	for round := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+path, writerEnv+"_ROUND="+strconv.Itoa(round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		want := 1 + r.IntN(15)
		sc := bufio.NewScanner(out)
		for n := 0; n < want && sc.Scan(); {
			line := sc.Text()
			if mac, ok := strings.CutPrefix(line, "ACK "); ok {
				acked[mac] = true
				n++
			} else if strings.HasPrefix(line, "ERR") {
				t.Fatalf("round %d: writer: %s", round, line)
			}
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait() // killed: the error says so
		s, err := sitelink.OpenEntryStore(path, nil)
		if err != nil {
			t.Fatalf("round %d: open after the kill: %v", round, err)
		}
		if d, ok := s.Damage(); ok {
			t.Fatalf("round %d: file damaged by the kill: %+v", round, d)
		}
		for mac := range acked {
			if _, ok := s.Lookup(hwid.MustParseMAC(mac)); !ok {
				t.Fatalf("round %d: acknowledged entry %s lost", round, mac)
			}
		}
	}
}
