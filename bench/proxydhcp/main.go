// Command proxydhcp-bench floods a proxy DHCP server with PXE DISCOVERs and counts the
// offers. run.sh starts it in network namespaces beside dnsmasq in proxy mode:
//
//	proxydhcp-bench serve -macs 1000                         # our server on :67 and :4011
//	proxydhcp-bench flood -target 192.0.2.10:67 -dur 5s      # prints one JSON line
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"golang.org/x/net/ipv4"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: proxydhcp-bench serve|flood [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "flood":
		err = flood(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxydhcp-bench:", err)
		os.Exit(1)
	}
}

// benchMAC is the i-th MAC of the flood: 52:54:01:xx:xx:xx.
func benchMAC(i int) hwid.MAC {
	return hwid.MAC{0x52, 0x54, 0x01, byte(i >> 16), byte(i >> 8), byte(i)}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	macs := fs.Int("macs", 1000, "number of MACs with a boot entry")
	workers := fs.Int("workers", 0, "Server.Workers (0: default)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the serving time to this file")
	fs.Parse(args)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	entries := make(map[hwid.MAC]bool, *macs)
	for i := range *macs {
		entries[benchMAC(i)] = true
	}
	srv := &proxydhcp.Server{
		Workers: *workers,
		Handler: proxydhcp.HandlerFunc(func(_ context.Context, r *proxydhcp.Request) proxydhcp.Decision {
			if !entries[r.MAC] {
				return proxydhcp.Silence(proxydhcp.ReasonUnknown)
			}
			return proxydhcp.Answer()
		}),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Fprintln(os.Stderr, "serving")
	select {
	case err := <-errc:
		return err
	case <-sig:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	<-errc
	st := srv.Stats().DHCP
	fmt.Fprintf(os.Stderr, "received %d answered %d send-errors %d overload %d\n", st.Received, st.Answered, st.SendErrors, st.Silent.Of(proxydhcp.ReasonOverload))
	return nil
}

type result struct {
	Target   string  `json:"target"`
	Seconds  float64 `json:"seconds"`
	Sent     uint64  `json:"sent"`
	Answers  uint64  `json:"answers"`
	PerSec   float64 `json:"answers_per_sec"`
	Window   int     `json:"window"`
	TimedOut uint64  `json:"timed_out"`
}

// flood keeps window DISCOVERs in flight to target and counts the offers that come back
// (broadcast to port 68, matched by xid). A request unanswered after timeout frees its slot.
func flood(args []string) error {
	fs := flag.NewFlagSet("flood", flag.ExitOnError)
	target := fs.String("target", "", "server address ip:port")
	dur := fs.Duration("dur", 5*time.Second, "measuring time")
	window := fs.Int("window", 128, "requests in flight")
	macs := fs.Int("macs", 1000, "number of MACs to cycle through")
	timeout := fs.Duration("timeout", 200*time.Millisecond, "a request unanswered this long frees its slot")
	warm := fs.Duration("warmup", 500*time.Millisecond, "unmeasured time before measuring")
	fs.Parse(args)
	dst, err := netip.ParseAddrPort(*target)
	if err != nil {
		return err
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{Port: 68})
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadBuffer(4 << 20)
	conn.SetWriteBuffer(4 << 20)

	tmpl, err := dhcpv4.New(
		dhcpv4.WithHwAddr(net.HardwareAddr{0x52, 0x54, 0x01, 0, 0, 0}),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeDiscover),
		dhcpv4.WithBroadcast(true),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64)),
		dhcpv4.WithGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, 3, 0}),
		dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, make([]byte, 16)...)),
		dhcpv4.WithOption(dhcpv4.OptMaxMessageSize(1472)),
		dhcpv4.WithRequestedOptions(dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionVendorSpecificInformation,
			dhcpv4.OptionClassIdentifier, dhcpv4.OptionTFTPServerName, dhcpv4.OptionBootfileName),
	)
	if err != nil {
		return err
	}
	base := tmpl.ToBytes()

	const slots = 1 << 16
	var sentAt [slots]atomic.Int64 // by xid low bits; 0 when free
	var xids [slots]atomic.Uint32
	tokens := make(chan struct{}, *window)
	for range *window {
		tokens <- struct{}{}
	}
	var measuring atomic.Bool
	var answers, timedOut atomic.Uint64
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup

	// Receiver: recvmmsg, up to batch offers per call.
	pc := ipv4.NewPacketConn(conn)
	const batch = 32
	wg.Add(1)
	go func() {
		defer wg.Done()
		ms := make([]ipv4.Message, batch)
		for i := range ms {
			ms[i].Buffers = [][]byte{make([]byte, 1500)}
		}
		for {
			n, err := pc.ReadBatch(ms, 0)
			if err != nil {
				return
			}
			for i := range n {
				buf := ms[i].Buffers[0][:ms[i].N]
				if len(buf) < 240 || buf[0] != 2 {
					continue
				}
				xid := binary.BigEndian.Uint32(buf[4:8])
				s := xid & (slots - 1)
				if xids[s].Load() != xid || sentAt[s].Swap(0) == 0 {
					continue
				}
				if measuring.Load() {
					answers.Add(1)
				}
				tokens <- struct{}{}
			}
		}
	}()
	// Sweeper: frees the slots of lost requests.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(*timeout / 4)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			limit := time.Since(start) - *timeout
			for s := range slots {
				t := sentAt[s].Load()
				if t != 0 && time.Duration(t) < limit && sentAt[s].CompareAndSwap(t, 0) {
					timedOut.Add(1)
					tokens <- struct{}{}
				}
			}
		}
	}()

	// Sender: sendmmsg, as many requests per call as there are free slots (up to batch).
	to := net.UDPAddrFromAddrPort(dst)
	out := make([]ipv4.Message, batch)
	for i := range out {
		p := make([]byte, len(base))
		copy(p, base)
		out[i] = ipv4.Message{Buffers: [][]byte{p}, Addr: to}
	}
	wait := time.NewTimer(time.Hour)
	var sent, measuredSent uint64
	var xid uint32 = 1
	end := start.Add(*warm + *dur)
	var mStart time.Time
	for i := 0; ; {
		now := time.Now()
		if !measuring.Load() && now.Sub(start) >= *warm {
			mStart = now
			measuredSent = sent
			measuring.Store(true)
		}
		if now.After(end) {
			break
		}
		k := 0
		select {
		case <-tokens:
			k = 1
		default:
			wait.Reset(10 * time.Millisecond)
			select {
			case <-tokens:
				k = 1
			case <-wait.C:
			}
			wait.Stop()
		}
		if k == 0 {
			continue
		}
	more:
		for k < batch {
			select {
			case <-tokens:
				k++
			default:
				break more
			}
		}
		for j := range k {
			xid++
			if xid&(slots-1) == 0 {
				xid++
			}
			s := xid & (slots - 1)
			xids[s].Store(xid)
			sentAt[s].Store(int64(time.Since(start)) | 1)
			pkt := out[j].Buffers[0]
			binary.BigEndian.PutUint32(pkt[4:8], xid)
			m := benchMAC(i % *macs)
			i++
			copy(pkt[28:34], m[:])
		}
		for done := 0; done < k; {
			n, err := pc.WriteBatch(out[done:k], 0)
			if err != nil {
				return err
			}
			done += n
		}
		sent += uint64(k)
	}
	measuring.Store(false)
	el := time.Since(mStart).Seconds()
	a := answers.Load()
	close(stop)
	conn.Close()
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(result{
		Target: *target, Seconds: el, Sent: sent - measuredSent, Answers: a, PerSec: float64(a) / el,
		Window: *window, TimedOut: timedOut.Load(),
	})
}
