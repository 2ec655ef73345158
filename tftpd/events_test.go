package tftpd_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/tftpd"
	"github.com/pin/tftp/v3"
)

// A transfer and a refusal land in the timeline of the machine whose address the
// timeline learned from DHCP, with the file's base name and never its directory.
func TestEventsInTimeline(t *testing.T) {
	tl, err := bootevents.NewTimeline(bootevents.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mac := hwid.MustParseMAC("52:54:00:00:00:71")
	tl.Emit(bootevents.Event{MAC: mac, Stage: bootevents.StageBoot4011, Outcome: bootevents.OutcomeOK, Addr: netip.MustParseAddr("127.0.0.1")})
	done := make(chan struct{}, 2)
	srv := &tftpd.Server{
		FS:         fstest.MapFS{"sb/secret-nonce/grubx64.efi": {Data: make([]byte, 3000)}},
		Events:     tl,
		OnTransfer: func(tftpd.Transfer) { done <- struct{}{} },
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(conn) }()
	c, _ := tftp.NewClient(conn.LocalAddr().String())
	c.SetTimeout(time.Second)
	c.SetRetries(2)
	if wt, err := c.Receive("sb/secret-nonce/grubx64.efi", "octet"); err != nil {
		t.Fatal(err)
	} else if _, err := wt.WriteTo(io.Discard); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Receive("missing.efi", "octet")
	for range 2 {
		<-done
	}
	srv.Shutdown(context.Background())
	<-served

	m, _ := tl.Machine(mac)
	b, _ := m.Last()
	if len(b.Events) != 3 {
		t.Fatalf("events = %+v", b.Events)
	}
	// the transfer reports after its last acknowledgement, maybe after the refusal
	ok, miss := b.Events[1], b.Events[2]
	if ok.Detail != "grubx64.efi" {
		ok, miss = miss, ok
	}
	if ok.Stage != bootevents.StageTFTP || ok.Outcome != bootevents.OutcomeOK || ok.Bytes != 3000 || ok.Detail != "grubx64.efi" {
		t.Errorf("transfer event = %+v", ok)
	}
	if miss.Outcome != bootevents.OutcomeRefused || miss.Reason != "not-found" || miss.Detail != "missing.efi" {
		t.Errorf("refusal event = %+v", miss)
	}
}
