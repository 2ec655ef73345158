package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/sitelink"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bettercompute/siteboot/grubcfg"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
	"github.com/bettercompute/siteboot/proxydhcp"
	"github.com/bettercompute/siteboot/tftpd"
)

// The signed chain's files, as Debian's packages ship them (dpkg -L shim-signed
// grub-efi-amd64-signed).
const (
	DefaultShim = "/usr/lib/shim/shimx64.efi.signed"
	DefaultGRUB = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"
)

// Where the signed chain is served (TFTP names, and HTTP paths under /).
const (
	// PathGRUBConfig is the machine's own GRUB configuration (/boot/grub.cfg?mac=..&uuid=..&n=KEY),
	// answered with /boot/ipxe's decision: over TFTP as boot/grub.cfg?..., and over HTTP.
	PathGRUBConfig = "/boot/grub.cfg"
	// sbDir holds shim and GRUB (sb/shimx64.efi, sb/NONCE/shimx64.efi), the key file
	// (sb/key?mac=MAC) and the RAM disk of UEFI HTTP boot (/sb/NONCE/boot.img).
	sbDir       = "sb"
	sbImageName = "boot.img"
	// sbConfigSize is the space the RAM disk keeps for its GRUB configuration, padded with
	// new lines, so that the image's layout does not depend on it.
	sbConfigSize = 4096
	// renderWait bounds how long a TFTP request for a machine's configuration holds
	// tftpd's reading loop (which opens files on it) while the answer is made; a slower
	// answer (a discovery token fetched from the control plane) is sent to the machine's
	// next request, which a short wait configuration makes it send.
	renderWait  = 100 * time.Millisecond
	renderRetry = time.Second
	// maxRenders bounds the answers being made or waiting for their machine.
	maxRenders = 256
	// renderKeep is how long a made answer waits for its machine to ask again.
	renderKeep = time.Minute
	loaderGRUB = "grub"
)

// validateSecureBoot checks the Secure Boot keys: the file paths are absolute; with
// SecureBoot on, proxy DHCP and TFTP are on (everything of the chain is bound to the DHCP
// answer and fetched over TFTP) and both files are regular files (the command's -check).
func (c *Config) validateSecureBoot() error {
	b := &c.Boot
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
	}
	for _, f := range []struct{ field, path string }{{"Boot.Shim", b.Shim}, {"Boot.GRUB", b.GRUB}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			return bad(f.field, "want an absolute path, got %q", f.path)
		}
	}
	if !b.SecureBoot {
		return nil
	}
	if !b.ProxyDHCP {
		return bad("Boot.SecureBoot", "needs Boot.ProxyDHCP: the chain's files and its boot key are bound to this agent's DHCP answer")
	}
	if !b.TFTP {
		return bad("Boot.SecureBoot", "needs Boot.TFTP: Debian's signed network GRUB fetches over TFTP only")
	}
	for _, f := range []struct{ field, path, pkg string }{
		{"Boot.Shim", b.shimPath(), "shim-signed"}, {"Boot.GRUB", b.grubPath(), "grub-efi-amd64-signed"},
	} {
		st, err := os.Stat(f.path)
		if err != nil {
			return bad(f.field, "%v (Debian's package %s has it)", err, f.pkg)
		}
		if !st.Mode().IsRegular() {
			return bad(f.field, "%s is not a regular file", f.path)
		}
	}
	return nil
}

func (b *BootConfig) shimPath() string {
	if b.Shim != "" {
		return b.Shim
	}
	return DefaultShim
}

func (b *BootConfig) grubPath() string {
	if b.GRUB != "" {
		return b.GRUB
	}
	return DefaultGRUB
}

// secureBootFor says whether machine r boots through the signed chain: its entry's word,
// else the site's default for x86-64 UEFI entries (never for a sanboot entry: an ISO is
// booted by iPXE).
func (a *Agent) secureBootFor(r record) bool {
	if r.SecureBoot != nil {
		return *r.SecureBoot
	}
	return a.cfg.Boot.SecureBoot && r.Arch == sitelink.ArchX86UEFI && r.SanbootSHA256 == ""
}

// Reasons proxy DHCP stays silent to a Secure Boot machine.
const (
	sbRefusedUnavailable = iota // "unavailable": the chain's files are not there, or no TFTP
	sbRefusedArch               // "arch": no signed chain for this architecture (x86-64 UEFI only)
	sbRefusedIPv6               // "ipv6": the signed GRUB's network is IPv4 only
	sbRefusedError              // "error": no random bits for a nonce
	numSBRefused
)

var sbRefusedNames = [numSBRefused]string{"unavailable", "arch", "ipv6", "error"}

// sbCounters count the signed chain's work, for Stats and /metrics.
type sbCounters struct {
	answersPXE, answersHTTP atomic.Uint64
	refused                 [numSBRefused]atomic.Uint64
	otherAddress            atomic.Uint64 // a second address fetched under a machine's nonce
	nonceFetches            atomic.Uint64 // fetches over TFTP under a machine's nonce by its owner
	images                  atomic.Uint64 // RAM disks served, each with a key
	configWaits             atomic.Uint64 // configurations not made within renderWait
	unbound                 [bootbind.NoPass + 1]atomic.Uint64
}

// secureBoot is the signed chain (DESIGN.md SB1): shim and GRUB over TFTP, the GRUB
// configurations, the boot keys, the RAM disk of UEFI HTTP boot, and the TFTP file system
// that serves them beside the iPXE builds. See the package doc, "Secure Boot".
type secureBoot struct {
	a                    *Agent
	shimName, loaderName string // shimx64.efi, grubx64.efi
	chain                []byte // grub/grub.cfg
	keys                 *bootbind.Keys
	filesMu              sync.Mutex
	built                *sbFiles // nil until the first machine that boots the chain asks

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	renders map[string]*render
}

// render is one machine's configuration being made (or made, waiting for its machine).
type render struct {
	done    chan struct{}
	started time.Time
	status  int
	body    []byte
}

// setupSecureBoot reads the chain's files and builds its part, when the agent can serve it:
// proxy DHCP and TFTP on, and the files there. A missing file fails New only with
// Boot.SecureBoot; otherwise it is logged, and entries that ask for Secure Boot get silence.
func (a *Agent) setupSecureBoot() error {
	b := &a.cfg.Boot
	if !b.ProxyDHCP || !b.TFTP {
		return nil
	}
	s := &secureBoot{a: a, renders: map[string]*render{}}
	if err := chainFilesThere(b); err != nil {
		if b.SecureBoot {
			return fmt.Errorf("agent: secure boot: %w", err)
		}
		a.log.Info("secure boot: the signed chain is not served; entries that ask for it get no answer", "err", err)
		return nil
	}
	var ok bool
	if s.shimName, s.loaderName, ok = hwid.ArchX86_64EFI.ShimFile(); !ok {
		return errors.New("agent: secure boot: no file names for x86-64 UEFI")
	}
	ip := b.ServerIP.String()
	var err error
	if s.chain, err = (grubcfg.Chain{URL: "tftp://" + ip + PathGRUBConfig, KeyURL: "tftp://" + ip + "/" + sbDir + "/key"}).Render(); err != nil {
		return fmt.Errorf("agent: secure boot: %w", err)
	}
	if b.SecureBoot {
		// The site boots through the chain: a file GRUB or shim cannot be read from fails
		// the start rather than the first machine.
		if _, err := s.files(); err != nil {
			return err
		}
	}
	s.keys = bootbind.NewKeys(a.bindingConfig())
	s.ctx, s.cancel = context.WithCancel(context.Background())
	a.sb = s
	return nil
}

// sbFiles is the signed chain's bytes: the RAM disk of UEFI HTTP boot, and shim and GRUB,
// served over TFTP from where they lie whole inside it.
type sbFiles struct {
	shim, grub []byte
	image      *fatImage
	cfgOffset  int // where the RAM disk's GRUB configuration begins
}

// chainFilesThere checks that shim and GRUB are regular files, without reading them.
func chainFilesThere(b *BootConfig) error {
	for _, path := range []string{b.shimPath(), b.grubPath()} {
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", path)
		}
	}
	return nil
}

// files reads shim and GRUB and builds the RAM disk, on the first call that succeeds; the
// result is kept. Built at start, it held 9.5 MB (Debian's shim and GRUB read, then copied
// into the RAM disk) for the life of an agent whose machines may never boot the chain, and
// twice that in its resident size under the garbage collector's target.
func (s *secureBoot) files() (*sbFiles, error) {
	s.filesMu.Lock()
	defer s.filesMu.Unlock()
	if s.built != nil {
		return s.built, nil
	}
	b := &s.a.cfg.Boot
	shim, err := os.ReadFile(b.shimPath())
	if err != nil {
		return nil, fmt.Errorf("agent: secure boot: %w", err)
	}
	grub, err := os.ReadFile(b.grubPath())
	if err != nil {
		return nil, fmt.Errorf("agent: secure boot: %w", err)
	}
	efi, _ := hwid.ArchX86_64EFI.EFIName()
	shimPath := "EFI/BOOT/BOOT" + strings.ToUpper(efi) + ".EFI"
	grubPath := "EFI/BOOT/" + strings.ToUpper(s.loaderName)
	img, err := buildFAT([]fatFile{
		{shimPath, shim},
		{grubPath, grub},
		// grubnetx64's built-in prefix is /grub: on the RAM disk, (hd0)/grub/grub.cfg.
		{"GRUB/GRUB.CFG", bytes.Repeat([]byte("\n"), sbConfigSize)},
	})
	if err != nil {
		return nil, fmt.Errorf("agent: secure boot: %w", err)
	}
	s.built = &sbFiles{
		shim:      img.file(shimPath, len(shim)),
		grub:      img.file(grubPath, len(grub)),
		image:     img,
		cfgOffset: img.offsets["GRUB/GRUB.CFG"],
	}
	return s.built, nil
}

// close stops the answers being made.
func (s *secureBoot) close() {
	if s == nil {
		return
	}
	s.cancel()
	s.wg.Wait()
}

// answerSecureBoot is proxy DHCP's answer to the firmware of a Secure Boot machine:
//
//   - PXE on 67: sb/shimx64.efi. EDK2 loads the file its 4011 answer names; shim reads
//     this answer (the proxy offer) for the directory it loads grubx64.efi from (netboot.c
//     parseDhcp4: the proxy offer when the acknowledgement names no boot file), so GRUB
//     comes from sb/.
//   - PXE on 4011: sb/NONCE/shimx64.efi, the nonce in a unicast answer: the first address
//     that fetches a file under it is where the machine is (bound in tftpTransfer).
//   - UEFI HTTP boot: http://SERVER/sb/NONCE/boot.img, a RAM disk with shim, GRUB and a
//     configuration that carries the machine's boot key; bound to the connection that
//     fetches it first.
func (a *Agent) answerSecureBoot(req *proxydhcp.Request) proxydhcp.Decision {
	s := a.sb
	refuse := func(reason int) proxydhcp.Decision {
		if s != nil {
			s.n().refused[reason].Add(1)
		} else {
			a.sbUnavailable.Add(1)
		}
		a.log.Warn("proxy dhcp: no signed chain for this Secure Boot machine; silence", "mac", req.MAC.String(),
			"reason", sbRefusedNames[reason], "arch", req.Arch.String())
		return proxydhcp.Silence(proxydhcp.ReasonDeclined)
	}
	if s == nil {
		return refuse(sbRefusedUnavailable)
	}
	if req.IPv6 || !req.Server.Is4() {
		return refuse(sbRefusedIPv6)
	}
	if shim, _, ok := req.Arch.ShimFile(); !ok || shim != s.shimName {
		return refuse(sbRefusedArch)
	}
	if req.Kind == proxydhcp.KindPXE && req.Port != proxydhcp.PortBoot {
		s.n().answersPXE.Add(1)
		return proxydhcp.AnswerFile(sbDir + "/" + s.shimName)
	}
	kind := bootbind.KindShim
	if req.Kind == proxydhcp.KindHTTP {
		kind = bootbind.KindImage
	}
	n, err := a.nonces.Issue(req.MAC, kind, toAddr(req))
	if err != nil {
		return refuse(sbRefusedError)
	}
	a.nonceIssued()
	if kind == bootbind.KindShim {
		s.n().answersPXE.Add(1)
		return proxydhcp.AnswerFile(sbDir + "/" + n + "/" + s.shimName)
	}
	s.n().answersHTTP.Add(1)
	host := req.Server.String()
	if p := a.httpPort(); p != 80 {
		host += ":" + strconv.Itoa(p)
	}
	return proxydhcp.AnswerFile("http://" + host + "/" + sbDir + "/" + n + "/" + sbImageName)
}

var (
	_ tftpd.PeerFS       = (*secureBoot)(nil)
	_ tftpd.PeerFS       = sbMount{}
	_ bootserver.Claimer = sbKeys{}
)

// sbCounters live beside the agent's other counters.
func (s *secureBoot) n() *sbCounters { return &s.a.sbN }

// mounts are the signed chain's directories of the TFTP file system (bootserver.FS, beside
// the iPXE builds of Boot.TFTPRoot): grub/grub.cfg (the Chain), sb/ (shim, GRUB, the key
// file), boot/grub.cfg?... (the machine's configuration, /boot/ipxe's decision), and
// cache/t/GRANT/SHA256 (the image cache under a grant).
func (s *secureBoot) mounts() map[string]fs.FS {
	m := map[string]fs.FS{}
	for _, dir := range []string{"grub", sbDir, "boot", "cache"} {
		m[dir] = sbMount{s, dir}
	}
	return m
}

// sbMount is one directory of the signed chain's files: names under it are the secureBoot's
// under dir/.
type sbMount struct {
	s   *secureBoot
	dir string
}

func (m sbMount) Open(name string) (fs.File, error) { return m.s.Open(m.dir + "/" + name) }
func (m sbMount) OpenFrom(name string, peer netip.AddrPort) (fs.File, error) {
	return m.s.OpenFrom(m.dir+"/"+name, peer)
}

// Open is the signed chain's files by their TFTP names. tftpd opens with OpenFrom; Open,
// which does not know who asks, answers no configuration.
func (s *secureBoot) Open(name string) (fs.File, error) { return s.OpenFrom(name, netip.AddrPort{}) }

// OpenFrom is Open told the request's source (tftpd.PeerFS): a machine's configuration goes
// only to the address its boot key was delivered to, as over HTTP.
func (s *secureBoot) OpenFrom(name string, peer netip.AddrPort) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	switch {
	case name == "grub/grub.cfg" || name == "grub/x86_64-efi/grub.cfg":
		return memFile(name, s.chain), nil
	case strings.HasPrefix(name, sbDir+"/"):
		return s.openSB(name)
	case strings.HasPrefix(name, strings.TrimPrefix(PathGRUBConfig, "/")+"?"):
		return s.openConfig(name, peer.Addr())
	case strings.HasPrefix(name, "cache/t/"):
		// The image cache under its grant and fence, as over HTTP.
		return s.a.cache.GrantFS().Open(strings.TrimPrefix(name, "cache/"))
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

var errNotServed = fs.ErrNotExist

func (s *secureBoot) openSB(name string) (fs.File, error) {
	rest := strings.TrimPrefix(name, sbDir+"/")
	if q, ok := strings.CutPrefix(rest, "key?"); ok {
		return s.openKey(name, q)
	}
	file := rest
	if dir, f, ok := strings.Cut(rest, "/"); ok {
		// sb/NONCE/FILE: only under a nonce of a PXE answer, while it lives.
		if !s.a.nonces.Live(dir, bootbind.KindShim) {
			return nil, errNotServed
		}
		file = f
	}
	if file != s.shimName && file != s.loaderName {
		return nil, errNotServed // shim's optional files (revocations, certificates), and anything else
	}
	f, err := s.files()
	if err != nil {
		s.a.log.Error("secure boot: the signed chain cannot be served", "err", err)
		return nil, err
	}
	if file == s.shimName {
		return memFile(name, f.shim), nil
	}
	return memFile(name, f.grub), nil
}

// openKey answers the key file sb/key?mac=MAC: a fresh key, pending until tftpd reports
// its transfer (tftpTransfer), for a MAC whose shim was fetched under one of its nonces.
func (s *secureBoot) openKey(name, rawQuery string) (fs.File, error) {
	mac, ok := macOfQuery(rawQuery)
	if !ok || !s.a.nonces.FetchedAny(mac, bootbind.KindShim) {
		return nil, errNotServed
	}
	k, err := s.keys.Issue(mac, netip.Addr{})
	if err != nil {
		return nil, errNotServed
	}
	body, err := grubcfg.KeyFile{Key: k}.Render()
	if err != nil {
		return nil, err
	}
	return memFile(name, body), nil
}

func macOfQuery(raw string) (hwid.MAC, bool) {
	vals, err := url.ParseQuery(raw)
	if err != nil || len(vals["mac"]) != 1 {
		return hwid.MAC{}, false
	}
	mac, err := hwid.ParseMAC(vals.Get("mac"))
	return mac, err == nil
}

// tftpTransfer reads tftpd's report of each transfer: a file fetched under a nonce binds
// it to the fetching address (the first one); a key file's transfer activates its key when
// it completed to the address the MAC's shim went to, and drops it otherwise.
func (s *secureBoot) tftpTransfer(t tftpd.Transfer) {
	name := t.File
	if name == "" {
		name = strings.TrimLeft(strings.ReplaceAll(t.Requested, "\\", "/"), "/")
	}
	rest, ok := strings.CutPrefix(name, sbDir+"/")
	if !ok {
		return
	}
	peer := t.Peer.Addr().Unmap()
	if q, ok := strings.CutPrefix(rest, "key?"); ok {
		switch t.Outcome {
		case tftpd.OutcomeNotFound, tftpd.OutcomeDenied, tftpd.OutcomeRefused:
			return // a request refused at open: not the pending key's transfer
		}
		mac, ok := macOfQuery(q)
		if !ok {
			return
		}
		delivered := t.Outcome == tftpd.OutcomeOK && s.a.nonces.Owns(mac, bootbind.KindShim, peer)
		if pending, active := s.keys.Resolve(mac, peer, delivered); pending && !active {
			s.a.log.Warn("secure boot: key file not delivered to the machine; key dropped", "mac", mac.String(),
				"peer", peer.String(), "outcome", string(t.Outcome))
		}
		return
	}
	dir, _, ok := strings.Cut(rest, "/")
	if !ok {
		return
	}
	switch mac, u := s.a.nonces.Fetched(dir, bootbind.KindShim, peer); u {
	case bootbind.Bound:
		s.a.silent.Asked(mac)
		s.n().nonceFetches.Add(1)
	case bootbind.OtherAddress:
		s.n().otherAddress.Add(1)
		s.a.log.Warn("secure boot: a second address fetched under a machine's nonce", "mac", mac.String(), "peer", peer.String())
	}
}

// openConfig answers boot/grub.cfg?QUERY over TFTP with the boot handler's answer for the
// address the query's key was delivered to. tftpd opens files on its reading loop, so the
// answer is made on a goroutine of its own: when it takes longer than renderWait (a
// discovery token on its way from the control plane), the machine gets a configuration that
// waits renderRetry and asks the same name again, which then gets the answer made meanwhile.
//
// Only a request from the address a key was delivered to, presenting that active key for its
// MAC, gets that far (and counts as the
// handler counts it); any other is refused here, counted by reason, so that names nobody
// was given start no work.
func (s *secureBoot) openConfig(name string, from netip.Addr) (fs.File, error) {
	q, err := ipxe.ParseQuery(strings.TrimPrefix(name, strings.TrimPrefix(PathGRUBConfig, "/")+"?"))
	if err != nil {
		return nil, errNotServed
	}
	if u := s.keys.Claim(q.Nonce, q.MAC, from); u != bootbind.Bound {
		s.n().unbound[u].Add(1)
		return nil, errNotServed
	}
	now := time.Now()
	s.mu.Lock()
	r := s.renders[name]
	if r == nil {
		for k, old := range s.renders {
			if now.Sub(old.started) > renderKeep {
				delete(s.renders, k)
			}
		}
		if len(s.renders) >= maxRenders {
			s.mu.Unlock()
			return nil, errNotServed
		}
		r = &render{done: make(chan struct{}), started: now}
		s.renders[name] = r
		s.wg.Add(1)
		go s.render(name, from, r)
	}
	s.mu.Unlock()
	t := time.NewTimer(renderWait)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		s.n().configWaits.Add(1)
		body, err := grubcfg.Wait{Delay: renderRetry, URL: "tftp://" + s.a.cfg.Boot.ServerIP.String() + "/" + name}.Render()
		if err != nil {
			return nil, err
		}
		return memFile(name, body), nil
	}
	s.mu.Lock()
	if s.renders[name] == r {
		delete(s.renders, name)
	}
	s.mu.Unlock()
	if r.status != http.StatusOK {
		return nil, errNotServed
	}
	return memFile(name, r.body), nil
}

// render asks the boot handler (its GRUB loader) for /boot/grub.cfg?QUERY as the machine
// at from, the address its key was delivered to, would over HTTP.
func (s *secureBoot) render(name string, from netip.Addr, r *render) {
	defer s.wg.Done()
	defer close(r.done)
	raw := strings.TrimPrefix(name, strings.TrimPrefix(PathGRUBConfig, "/")+"?")
	ctx, cancel := context.WithTimeout(s.ctx, s.a.cfg.Control.Timeout+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, PathGRUBConfig+"?"+raw, nil)
	if err != nil {
		r.status = http.StatusBadRequest
		return
	}
	req.RemoteAddr = netip.AddrPortFrom(from, 0).String()
	w := &bufferWriter{header: http.Header{}}
	s.a.boot.ServeHTTP(w, req)
	r.status, r.body = w.status, w.body.Bytes()
}

// loader is the boot handler's GRUB loader: /boot/ipxe's decision spelled by grubcfg.
func (s *secureBoot) loader() ipxe.Loader {
	return ipxe.Loader{Name: loaderGRUB, Path: PathGRUBConfig, Render: s.renderAnswer}
}

// renderAnswer spells one answer for GRUB. GRUB runs a configuration only when it got one
// (TFTP has no status; its http module reads only a 200's body), so the fenced and waiting
// answers are configurations sent as 200, and "no" is a status GRUB reads as a missing
// file: its Chain's back-off then ends in a reboot, as iPXE's chain script does.
func (s *secureBoot) renderAnswer(a ipxe.Answer) (int, []byte, error) {
	again := s.configURL(a.Query)
	switch a.Kind {
	case ipxe.AnswerBoot:
		kernel, err := s.tftpCacheURL(a.Kernel)
		if err != nil {
			return 0, nil, err
		}
		initrds := make([]string, len(a.Initrds))
		for i, u := range a.Initrds {
			if initrds[i], err = s.tftpCacheURL(u); err != nil {
				return 0, nil, err
			}
		}
		// ipxe.Param and grubcfg.Param are one type (the renderers' shared core).
		b, err := grubcfg.Boot{Kernel: kernel, Initrds: initrds, Params: a.Params, Cmdline: a.Cmdline, Again: again}.Render()
		return http.StatusOK, b, err
	case ipxe.AnswerFenced:
		b, err := grubcfg.Fenced{Delay: a.Delay}.Render()
		return http.StatusOK, b, err
	case ipxe.AnswerWait:
		b, err := grubcfg.Wait{Delay: a.Delay, URL: again}.Render()
		return http.StatusOK, b, err
	}
	b, err := grubcfg.Exit{}.Render()
	return a.Status, b, err
}

// configURL is the URL of the machine's configuration with the query it came with (its
// MAC, UUID and key), over TFTP: what a GRUB configuration asks again.
func (s *secureBoot) configURL(q ipxe.Query) string {
	u := "tftp://" + s.a.cfg.Boot.ServerIP.String() + PathGRUBConfig + "?mac=" + q.MAC.String()
	if q.UUID != (hwid.UUID{}) {
		u += "&uuid=" + q.UUID.String()
	}
	return u + "&n=" + q.Nonce
}

// tftpCacheURL turns the URL of a cache image under a boot grant into the same path over
// this agent's TFTP, the one protocol Debian's signed GRUB has.
func (s *secureBoot) tftpCacheURL(u string) (string, error) {
	for _, base := range []string{s.a.cacheBase(), s.a.httpBase + "/cache"} { // the IPv4 handler's
		if rest, ok := strings.CutPrefix(u, base+"/t/"); ok {
			return "tftp://" + s.a.cfg.Boot.ServerIP.String() + "/cache/t/" + rest, nil
		}
	}
	return "", fmt.Errorf("agent: secure boot: %q is not under the image cache's URL", u)
}

// ServeHTTP answers /sb/NONCE/boot.img, UEFI HTTP boot's RAM disk (HEAD and GET): the
// image with shim, GRUB and a configuration carrying a fresh boot key for the machine the
// nonce was handed to, bound to the first connection that fetches it. HEAD tells the size
// and hands out nothing.
func (s *secureBoot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/"+sbDir+"/")
	n, file, ok := strings.Cut(rest, "/")
	if !ok || file != sbImageName || bootserver.ViaIPv6(r.Context()) || !s.a.nonces.Live(n, bootbind.KindImage) {
		http.NotFound(w, r)
		return
	}
	files, err := s.files()
	if err != nil {
		s.a.log.Error("secure boot: no RAM disk", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/vnd.efi-img")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(files.image.data)))
	switch r.Method {
	case http.MethodHead:
		return
	case http.MethodGet:
	default:
		hd.Del("Content-Length")
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	remote := remoteAddrOf(r)
	mac, u := s.a.nonces.Fetched(n, bootbind.KindImage, remote)
	if u == bootbind.Bound {
		s.a.silent.Asked(mac)
	}
	if u != bootbind.Bound {
		if u == bootbind.OtherAddress {
			s.n().otherAddress.Add(1)
			s.a.log.Warn("secure boot: a second address fetched a machine's RAM disk", "mac", mac.String(), "remote", remote.String())
		}
		hd.Del("Content-Length")
		http.NotFound(w, r)
		return
	}
	k, err := s.keys.Issue(mac, remote)
	var cfg []byte
	if err == nil {
		cfg, err = grubcfg.Chain{URL: "tftp://" + s.a.cfg.Boot.ServerIP.String() + PathGRUBConfig, Key: k, MAC: mac.String()}.Render()
	}
	if err == nil && len(cfg) > sbConfigSize {
		err = fmt.Errorf("agent: secure boot: the RAM disk's configuration is %d bytes, over %d", len(cfg), sbConfigSize)
	}
	if err != nil {
		s.a.log.Error("secure boot: no RAM disk", "mac", mac.String(), "err", err)
		hd.Del("Content-Length")
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	s.n().images.Add(1)
	pad := bytes.Repeat([]byte("\n"), sbConfigSize-len(cfg))
	img, at := files.image.data, files.cfgOffset
	io.Copy(w, io.MultiReader(bytes.NewReader(img[:at]), bytes.NewReader(cfg), bytes.NewReader(pad),
		bytes.NewReader(img[at+sbConfigSize:])))
}

// sbKeys is the GRUB loader's S1 rule (bootserver.Bind's claimer for it), after the entry
// matched: the request presents a key handed to this MAC, delivered to the address it comes
// from (over TFTP, the address openConfig asked for; over HTTP, the connection's).
type sbKeys struct{ a *Agent }

func (k sbKeys) Claim(key string, mac hwid.MAC, from netip.Addr) bootbind.Reason {
	u := k.a.sb.keys.Claim(key, mac, from)
	k.a.sbN.unbound[u].Add(1)
	return u
}

// onTransfer is tftpd's report of each transfer: the agent's counters, and the signed
// chain's bindings.
func (a *Agent) onTransfer(t tftpd.Transfer) {
	a.transfers.record(t)
	if a.sb != nil {
		a.sb.tftpTransfer(t)
	}
}

// sbStats adds the signed chain's counters to m (Agent.Stats).
func (a *Agent) sbStats(m map[string]uint64) {
	n := &a.sbN
	m["sb_answers_pxe"], m["sb_answers_http"] = n.answersPXE.Load(), n.answersHTTP.Load()
	m["sb_refused_unavailable"] = a.sbUnavailable.Load() + n.refused[sbRefusedUnavailable].Load()
	for r := sbRefusedArch; r < numSBRefused; r++ {
		m["sb_refused_"+sbRefusedNames[r]] = n.refused[r].Load()
	}
	m["sb_fetch_other_address"], m["sb_images"], m["sb_config_waits"] = n.otherAddress.Load(), n.images.Load(), n.configWaits.Load()
	m["sb_nonce_fetches"] = n.nonceFetches.Load()
	for _, u := range bootbind.Refusals() {
		m["sb_unbound_"+u.String()] = n.unbound[u].Load()
	}
	if a.sb != nil {
		k := a.sb.keys.Stats()
		m["sb_keys_issued"], m["sb_keys_activated"], m["sb_keys_dropped"], m["sb_keys_busy"] = k.Issued, k.Activated, k.Dropped, k.Busy
	}
}

var (
	descSBAnswers = prometheus.NewDesc("siteboot_secureboot_answers_total",
		"Proxy DHCP answers naming the signed chain (shim over TFTP, or the RAM disk of UEFI HTTP boot), by kind.", []string{"kind"}, nil)
	descSBRefused = prometheus.NewDesc("siteboot_secureboot_refused_total",
		"Secure Boot machines proxy DHCP stayed silent to, by reason.", []string{"reason"}, nil)
	descSBUnbound = prometheus.NewDesc("siteboot_secureboot_unbound_total",
		"GRUB configuration requests refused any secret for not presenting the machine's boot key, by reason.", []string{"reason"}, nil)
	descSBKeys = prometheus.NewDesc("siteboot_secureboot_keys_total",
		"Boot keys of the signed chain, by event.", []string{"event"}, nil)
	descSBOther = prometheus.NewDesc("siteboot_secureboot_fetch_other_address_total",
		"Fetches under a machine's nonce from an address other than the first one.", nil, nil)
)

// collectSB exports the signed chain's counters (/metrics).
func (a *Agent) collectSB(ch chan<- prometheus.Metric) {
	m := map[string]uint64{}
	a.sbStats(m)
	c := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	c(descSBAnswers, m["sb_answers_pxe"], "pxe")
	c(descSBAnswers, m["sb_answers_http"], "http")
	for _, r := range sbRefusedNames {
		c(descSBRefused, m["sb_refused_"+r], r)
	}
	for _, u := range bootbind.Refusals() {
		c(descSBUnbound, m["sb_unbound_"+u.String()], u.String())
	}
	for _, e := range []string{"issued", "activated", "dropped", "busy"} {
		c(descSBKeys, m["sb_keys_"+e], e)
	}
	c(descSBOther, m["sb_fetch_other_address"])
}

// memFile is an fs.File of bytes held in memory.
type memFileT struct {
	*bytes.Reader
	name string
	size int64
}

func memFile(name string, b []byte) fs.File {
	return &memFileT{Reader: bytes.NewReader(b), name: name, size: int64(len(b))}
}

func (f *memFileT) Stat() (fs.FileInfo, error) { return fileInfo{name: f.name, size: f.size}, nil }
func (f *memFileT) Close() error               { return nil }

type fileInfo struct {
	name string
	size int64
}

func (i fileInfo) Name() string       { return filepath.Base(i.name) }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }

// bufferWriter is an http.ResponseWriter that keeps the answer.
type bufferWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *bufferWriter) Header() http.Header { return w.header }
func (w *bufferWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
func (w *bufferWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// remoteAddrOf is the address of the connection a request came on.
func remoteAddrOf(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}
