package testlog_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/bettercompute/siteboot/internal/testlog"
)

// TestConcurrentWritesKeepEveryLine: loggers on many goroutines write whole lines, none
// lost or torn, while String is read (under -race, also no data race).
func TestConcurrentWritesKeepEveryLine(t *testing.T) {
	var buf testlog.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	const writers, lines = 8, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				log.Info("line", "w", w, "i", i)
				_ = buf.String()
			}
		})
	}
	wg.Wait()
	out := buf.String()
	if n := strings.Count(out, "\n"); n != writers*lines {
		t.Fatalf("%d lines, want %d", n, writers*lines)
	}
	for w := range writers {
		if !strings.Contains(out, fmt.Sprintf("w=%d i=%d\n", w, lines-1)) {
			t.Errorf("writer %d's last line is missing", w)
		}
	}
}
