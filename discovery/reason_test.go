package discovery_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

func TestReasonOf(t *testing.T) {
	_, unusable := discovery.Match(discovery.Query{MachineID: "m1", PoweredAt: epoch, Now: epoch.Add(time.Minute)})
	_, incomplete := discovery.Match(discovery.Query{MachineID: "m1", UUID: hwid.MustParseUUID("4c4c4544-0031-3510-8052-b4c04f4e4b32")})
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"foreign", errors.New("elsewhere"), ""},
		{"not seen", &discovery.MatchError{Reason: discovery.ReasonNotSeen}, "not-seen"},
		{"wrapped ambiguous", fmt.Errorf("matching: %w", &discovery.MatchError{Reason: discovery.ReasonAmbiguous}), "ambiguous"},
		{"identity", &discovery.MatchError{Reason: discovery.ReasonIdentityMismatch}, "machine-identity-mismatch"},
		{"placeholder UUID from Match", unusable, "unusable-uuid"},
		{"query without times from Match", incomplete, "incomplete-query"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := discovery.ReasonOf(tt.err); got != tt.want {
				t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
