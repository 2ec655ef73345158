// Package simmachine is a simulated bare-metal machine that network-boots the way firmware
// and iPXE do, with real protocol clients: a PXE DHCP DISCOVER to the proxy, a TFTP read of
// the iPXE build as EDK2's PXE reads it (a size request with "tsize 0 blksize 1468
// windowsize 4" aborted after the option acknowledgement, then the read in windows of 4,
// with EDK2's retransmission rules), a second DHCP as iPXE, then the iPXE chain and boot scripts over HTTP,
// interpreted command by command (kernel, initrd, boot, chain, goto, sleep, reboot, exit),
// with the kernel and initrds fetched and hashed. It serves examples/bootlab and the boot
// storm benchmark; it is not firmware, and the real-firmware tests use QEMU.
package simmachine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/hwid"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// Stage names one step of a boot.
type Stage string

// The stages of a boot, in order.
const (
	StageDHCP   Stage = "dhcp"   // the firmware's proxy DHCP offer
	StageTFTP   Stage = "tftp"   // the iPXE build over TFTP
	StageIPXE   Stage = "ipxe"   // iPXE's own DHCP, answered with the chain URL
	StageChain  Stage = "chain"  // /boot/chain.ipxe
	StageScript Stage = "script" // /boot/ipxe, the machine's script
	StageKernel Stage = "kernel" // kernel and initrds fetched
	StageBoot   Stage = "boot"   // the kernel would start now
)

// Stages lists the stages in order.
var Stages = []Stage{StageDHCP, StageTFTP, StageIPXE, StageChain, StageScript, StageKernel, StageBoot}

// Errors that end a boot.
var (
	// ErrNoOffer: no proxy DHCP answered; real firmware falls through to its next boot device.
	ErrNoOffer = errors.New("simmachine: no proxy DHCP offer")
	// ErrExit: the script exited (no boot entry): the firmware falls through.
	ErrExit = errors.New("simmachine: script exited to the next boot device")
	// ErrTooManyReboots: the machine rebooted more often than Machine.MaxReboots.
	ErrTooManyReboots = errors.New("simmachine: too many reboots")
)

// Machine is one simulated machine. Set the fields, then call Boot.
type Machine struct {
	Name string
	MAC  hwid.MAC
	UUID hwid.UUID // sent in option 97 and as ${uuid}
	// IP is the address the site's own DHCP server gave the machine; proxy DHCP replies
	// come back to IP:ClientPort.
	IP         netip.Addr
	ClientPort int
	// DHCPServers are where the machine's DHCP "broadcast" reaches: every proxy on the
	// segment, each at its DHCP port.
	DHCPServers []netip.AddrPort
	// TFTPAddr gives the TFTP address of the server an offer names; nil means its port 69.
	// A lab on loopback, whose servers cannot all have port 69, maps them here.
	TFTPAddr func(server netip.Addr) netip.AddrPort
	// HTTP makes the script and image fetches; nil: a client with a 30 s timeout.
	HTTP *http.Client

	DHCPTimeout  time.Duration // per attempt; zero: 1 s
	DHCPAttempts int           // zero: 4 (firmware backs off 4, 8, 16 s; this one doesn't)
	MaxReboots   int           // zero: 3
	// TFTPTimeout and TFTPRetries are how long the TFTP client waits for a datagram and how
	// often it sends its request or acknowledgement again; zero: 1 s and 5. EDK2's PXE
	// waits 4 s and retries 6 times (EDK2TFTPTimeout, EDK2TFTPRetries), which a server that
	// drops requests beyond its transfer limit relies on.
	TFTPTimeout time.Duration
	TFTPRetries int
	// TFTPBlockSize and TFTPWindow are the blksize and windowsize (RFC 7440) the TFTP reads
	// ask for; zero: 1468 and 4, as OVMF asks.
	TFTPBlockSize int
	TFTPWindow    int
	// SleepScale multiplies the sleeps a script asks for (the demo shortens them); zero: 1.
	SleepScale float64

	// Offer, when set, stands in for the DHCP exchange: it returns the server and the boot
	// file a proxy offer would name (ipxe: iPXE's own DHCP). The boot storm sets it to run
	// machines against TFTP and HTTP servers when no proxy DHCP answers them.
	Offer func(ipxe bool) (server netip.Addr, file string)

	// Digest, when set, sums what the machine fetches (the build, kernel and initrds) into
	// Fetched.Sum instead of SHA-256 into Fetched.SHA256: a storm of a thousand machines on
	// one host checks its files with a cheaper sum (CRC-32C) and leaves the CPU to the
	// servers it measures.
	Digest func() hash.Hash

	// OnStage is told when a stage completes, with the server that answered it.
	OnStage func(m *Machine, s Stage, server string)
	// OnEvent is told of anything worth a line in a log: retries, waits, reboots.
	OnEvent func(m *Machine, msg string)
}

// Fetched is one image the script loaded.
type Fetched struct {
	URL    string
	SHA256 string // hex; empty when Machine.Digest is set
	Sum    string // hex, by Machine.Digest; empty when it is nil
	Bytes  int64
}

// Result is what a finished boot loaded.
type Result struct {
	Server   netip.Addr // the proxy DHCP server that answered last
	BootFile string     // the firmware's boot file (TFTP)
	Build    Fetched    // the iPXE build fetched over TFTP
	Kernel   Fetched
	Initrds  []Fetched
	// Cmdline is the kernel command line the script gave.
	Cmdline []string
	Reboots int
	Stages  map[Stage]time.Duration // time from the boot's start to each stage's end
}

// Param returns the value of the kernel parameter name (as "name=value"), or "".
func (r *Result) Param(name string) string {
	for _, t := range r.Cmdline {
		if v, ok := strings.CutPrefix(t, name+"="); ok {
			return v
		}
	}
	return ""
}

func (m *Machine) event(format string, args ...any) {
	if m.OnEvent != nil {
		m.OnEvent(m, fmt.Sprintf(format, args...))
	}
}

// Boot powers the machine on and runs its network boot until the kernel would start, the
// firmware falls through (ErrNoOffer, ErrExit), or ctx ends.
func (m *Machine) Boot(ctx context.Context) (*Result, error) {
	maxReboots := m.MaxReboots
	if maxReboots == 0 {
		maxReboots = 3
	}
	start := time.Now()
	res := &Result{Stages: map[Stage]time.Duration{}}
	for {
		err := m.bootOnce(ctx, res, start)
		if !errors.Is(err, errReboot) {
			return res, err
		}
		res.Reboots++
		if res.Reboots > maxReboots {
			return res, ErrTooManyReboots
		}
		m.event("reboot %d", res.Reboots)
	}
}

var errReboot = errors.New("reboot")

func (m *Machine) done(res *Result, start time.Time, s Stage, server string) {
	res.Stages[s] = time.Since(start)
	if m.OnStage != nil {
		m.OnStage(m, s, server)
	}
}

func (m *Machine) bootOnce(ctx context.Context, res *Result, start time.Time) error {
	offer, err := m.dhcp(ctx, false)
	if err != nil {
		return err
	}
	res.Server = offer.server
	res.BootFile = offer.file
	m.done(res, start, StageDHCP, offer.server.String())

	res.Build, err = m.tftpGet(ctx, offer.server, offer.file)
	if err != nil {
		return err
	}
	m.done(res, start, StageTFTP, offer.server.String())

	// The build runs: iPXE asks DHCP again, saying it is iPXE.
	offer, err = m.dhcp(ctx, true)
	if err != nil {
		return err
	}
	res.Server = offer.server
	m.done(res, start, StageIPXE, offer.server.String())

	in := &interp{m: m, res: res, start: start}
	return in.chain(ctx, offer.file, 0)
}

// offer is what a proxy DHCP reply says.
type offer struct {
	server netip.Addr
	file   string
}

// dhcp sends a DISCOVER to every server and returns the first offer naming a boot file.
func (m *Machine) dhcp(ctx context.Context, ipxe bool) (offer, error) {
	if m.Offer != nil {
		server, file := m.Offer(ipxe)
		return offer{server: server, file: file}, nil
	}
	attempts, timeout := m.DHCPAttempts, m.DHCPTimeout
	if attempts == 0 {
		attempts = 4
	}
	if timeout == 0 {
		timeout = time.Second
	}
	arch := iana.EFI_X86_64
	mods := []dhcpv4.Modifier{
		dhcpv4.WithHwAddr(net.HardwareAddr(m.MAC[:])),
		dhcpv4.WithMessageType(dhcpv4.MessageTypeDiscover),
		dhcpv4.WithClientIP(m.IP.AsSlice()),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(arch)),
		dhcpv4.WithGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, 3, 0}),
		dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, m.UUID[:]...)),
	}
	if ipxe {
		mods = append(mods, dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")))
	}
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(m.IP, uint16(m.ClientPort))))
	if err != nil {
		return offer{}, fmt.Errorf("simmachine: dhcp socket: %w", err)
	}
	defer conn.Close()
	buf := make([]byte, 1500)
	for attempt := 1; attempt <= attempts; attempt++ {
		req, err := dhcpv4.New(mods...)
		if err != nil {
			return offer{}, err
		}
		for _, s := range m.DHCPServers {
			conn.WriteToUDPAddrPort(req.ToBytes(), s)
		}
		deadline := time.Now().Add(timeout)
		for {
			if ctx.Err() != nil {
				return offer{}, ctx.Err()
			}
			conn.SetReadDeadline(deadline)
			n, _, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				break // this attempt timed out
			}
			rep, err := dhcpv4.FromBytes(buf[:n])
			if err != nil || rep.TransactionID != req.TransactionID || rep.OpCode != dhcpv4.OpcodeBootReply {
				continue
			}
			file := rep.BootFileNameOption()
			if file == "" {
				file = rep.BootFileName
			}
			server, ok := netip.AddrFromSlice(rep.ServerIPAddr.To4())
			if file == "" || !ok || server.IsUnspecified() {
				continue
			}
			return offer{server: server, file: file}, nil
		}
		if attempt < attempts {
			m.event("no proxy DHCP offer (attempt %d of %d), asking again", attempt, attempts)
		}
	}
	return offer{}, ErrNoOffer
}

func (m *Machine) httpClient() *http.Client {
	if m.HTTP != nil {
		return m.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// fetchWithHeader GETs a script: its status, body and the response header.
func (m *Machine) fetchWithHeader(ctx context.Context, u string) (int, []byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := m.httpClient().Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, resp.Header, err
}

const userAgent = "iPXE/1.21.1+ (siteboot simmachine)"

// fetch GETs u and returns its status and body hash.
func (m *Machine) fetch(ctx context.Context, u string) (int, Fetched, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, Fetched{}, err
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := m.httpClient().Do(req)
	if err != nil {
		return 0, Fetched{}, err
	}
	defer resp.Body.Close()
	h := m.newDigest()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		return resp.StatusCode, Fetched{}, err
	}
	return resp.StatusCode, m.fetched(u, h, n), nil
}

func (m *Machine) newDigest() hash.Hash {
	if m.Digest != nil {
		return m.Digest()
	}
	return sha256.New()
}

// fetched is what fetching u gave: n bytes summed in h.
func (m *Machine) fetched(u string, h hash.Hash, n int64) Fetched {
	f := Fetched{URL: u, Bytes: n}
	if m.Digest != nil {
		f.Sum = hex.EncodeToString(h.Sum(nil))
	} else {
		f.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return f
}
