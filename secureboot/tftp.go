package secureboot

import (
	"bytes"
	"io/fs"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/grubcfg"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/tftpd"
)

// FS returns the TFTP root of a site whose machines boot through the chain, for
// tftpd.Server.FS: grub/grub.cfg (the Chain), sb/ (shim, GRUB, the key file),
// boot/grub.cfg?... (the machine's configuration), cache/t/GRANT/SHA256 (Config.Cache) and
// Config.Root for every other name. It is a tftpd.PeerFS: tftpd opens with OpenFrom and the
// request's source, and a machine's configuration goes only to the address its key was
// delivered to. Its Open, which does not know who asks, answers no configuration.
func (s *Chain) FS() tftpd.PeerFS { return chainFS{s} }

type chainFS struct{ s *Chain }

func (f chainFS) Open(name string) (fs.File, error) { return f.s.OpenFrom(name, netip.AddrPort{}) }

func (f chainFS) OpenFrom(name string, peer netip.AddrPort) (fs.File, error) {
	return f.s.OpenFrom(name, peer)
}

// Name is what a TFTP name of the chain asks for, as [ParseName] reads it.
type Name struct {
	Kind NameKind
	// Nonce is the nonce of sb/NONCE/FILE; "" for shim and GRUB outside a nonce.
	Nonce string
	// File is shim's or GRUB's file name (NameLoader), or the path under Config.Cache or
	// Config.Root (NameCache without DefaultTFTPCacheDir, NameRoot).
	File string
	// MAC is the key file's MAC (NameKey), or the MAC a per-MAC name of the Chain spells
	// (NameChain: grub.cfg-01-MAC, MAC.conf).
	MAC hwid.MAC
	// Query is the raw query of the machine's configuration (NameConfig), which
	// ipxe.ParseQuery reads.
	Query string
}

// NameKind says which of the chain's files a TFTP name asks for.
type NameKind uint8

// Kinds of name.
const (
	NameRoot   NameKind = iota // anything else: Config.Root
	NameChain                  // grub/grub.cfg, grub/x86_64-efi/grub.cfg, grub/grub.cfg-01-MAC, grub/MAC.conf: the Chain
	NameLoader                 // sb/FILE, sb/NONCE/FILE: shim or GRUB
	NameKey                    // sb/key?mac=MAC: the key file
	NameConfig                 // boot/grub.cfg?QUERY: the machine's configuration
	NameCache                  // cache/t/GRANT/SHA256: the image cache (under DefaultTFTPCacheDir)
)

// MaxNameLen bounds a name ParseName reads: tftpd's own bound (DefaultMaxNameLen) is
// larger than any name of the chain.
const MaxNameLen = 512

// ParseName reads a TFTP name as tftpd hands it to an fs.FS (fs.ValidPath: no leading
// slash, no "..", no empty element). It returns an error wrapping ErrNotServed for a name
// under sb/ that is not one of the chain's and for a key file's query without exactly one
// MAC; fs.ErrInvalid for a name that is no valid path. It checks neither nonces nor keys.
func ParseName(name string) (Name, error) {
	if len(name) > MaxNameLen || !fs.ValidPath(name) {
		return Name{}, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	sb := strings.TrimPrefix(PathSB, "/")
	switch {
	case name == strings.TrimPrefix(PathChain, "/") || name == "grub/x86_64-efi/grub.cfg":
		return Name{Kind: NameChain}, nil
	case strings.HasPrefix(name, "grub/"):
		if mac, ok := perMACConfig(strings.TrimPrefix(name, "grub/")); ok {
			return Name{Kind: NameChain, MAC: mac}, nil
		}
	case strings.HasPrefix(name, sb):
		rest := strings.TrimPrefix(name, sb)
		if q, ok := strings.CutPrefix(rest, "key?"); ok {
			mac, ok := macOfQuery(q)
			if !ok {
				return Name{}, ErrNotServed
			}
			return Name{Kind: NameKey, MAC: mac}, nil
		}
		n := Name{Kind: NameLoader, File: rest}
		if dir, f, ok := strings.Cut(rest, "/"); ok {
			if !validNonce(dir) {
				return Name{}, ErrNotServed
			}
			n.Nonce, n.File = dir, f
		}
		if n.File == "" || strings.ContainsAny(n.File, "/?") {
			return Name{}, ErrNotServed
		}
		return n, nil
	case strings.HasPrefix(name, strings.TrimPrefix(PathConfig, "/")+"?"):
		return Name{Kind: NameConfig, Query: strings.TrimPrefix(name, strings.TrimPrefix(PathConfig, "/")+"?")}, nil
	case strings.HasPrefix(name, DefaultTFTPCacheDir+"/t/"):
		return Name{Kind: NameCache, File: strings.TrimPrefix(name, DefaultTFTPCacheDir+"/")}, nil
	}
	return Name{Kind: NameRoot, File: name}, nil
}

// perMACConfig reads the per-MAC configuration names GRUB versions and their installers ask
// for under the prefix (optionally in its platform directory): grub.cfg-01-MAC (GRUB 2.04 and
// later search it before grub.cfg: net.c grub_net_search_config_file, MAC in lower-case hex
// separated by '-') and MAC.conf (the name a network GRUB configuration sources from
// $net_default_mac, as Ironic's does, MAC separated by ':').
func perMACConfig(rest string) (hwid.MAC, bool) {
	rest = strings.TrimPrefix(rest, "x86_64-efi/")
	var m string
	if v, ok := strings.CutPrefix(rest, "grub.cfg-01-"); ok {
		m = v
	} else if v, ok := strings.CutSuffix(rest, ".conf"); ok {
		m = v
	} else {
		return hwid.MAC{}, false
	}
	if len(m) != 17 {
		return hwid.MAC{}, false
	}
	mac, err := hwid.ParseMAC(m)
	return mac, err == nil
}

// validNonce reports whether s may be a nonce: 1 to 64 of [A-Za-z0-9_-].
func validNonce(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func macOfQuery(raw string) (hwid.MAC, bool) {
	vals, err := url.ParseQuery(raw)
	if err != nil || len(vals) != 1 || len(vals["mac"]) != 1 {
		return hwid.MAC{}, false
	}
	mac, err := hwid.ParseMAC(vals.Get("mac"))
	return mac, err == nil
}

// OpenFrom opens a TFTP name for the request's source peer (tftpd.PeerFS); see [Chain.FS].
// A refusal is an *fs.PathError whose error wraps fs.ErrNotExist (and ErrNotServed,
// ErrUnbound, ErrBusy or ErrClosed), which tftpd answers "file not found".
func (s *Chain) OpenFrom(name string, peer netip.AddrPort) (fs.File, error) {
	f, err := s.openFrom(name, peer.Addr().Unmap())
	if err != nil {
		if _, ok := err.(*fs.PathError); !ok {
			err = &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return nil, err
	}
	return f, nil
}

func (s *Chain) openFrom(name string, from netip.Addr) (fs.File, error) {
	n, err := ParseName(name)
	if err != nil {
		return nil, err
	}
	if n.Kind == NameCache || n.Kind == NameRoot {
		// The cache's names are wherever TFTPCacheDir puts them; the rest is Root's.
		if rest, ok := strings.CutPrefix(name, s.cachePrefix); ok && strings.HasPrefix(rest, "t/") {
			if s.cfg.Cache == nil {
				return nil, ErrNotServed
			}
			return s.cfg.Cache.Open(rest)
		}
		if s.cfg.Root == nil {
			return nil, ErrNotServed
		}
		return s.cfg.Root.Open(name)
	}
	switch n.Kind {
	case NameChain:
		return memFile(name, s.chainBody), nil
	case NameLoader:
		return s.openLoader(name, n)
	case NameKey:
		return s.openKey(name, n.MAC)
	}
	return s.openConfig(name, n.Query, from) // NameConfig
}

// Mounts returns the chain's TFTP names by their top directory, for a host whose TFTP file
// system mounts other loaders' files under directories of their own (bootserver.FS.Mounts,
// which hands a mount the name without its directory): "sb" (shim, GRUB, the key files),
// "grub" (the Chain GRUB reads first) and "boot" (the machines' configurations). Each is a
// tftpd.PeerFS that puts its directory back and opens as [Chain.FS] does; tftpd's reports
// name the whole file, so OnTransfer reads them as they are. With bootserver.FS serving an
// image cache's grants at t/, set TFTPCacheDir to ".".
func (s *Chain) Mounts() map[string]fs.FS {
	return map[string]fs.FS{
		strings.Trim(PathSB, "/"):                     mount{s, strings.Trim(PathSB, "/")},
		path.Dir(strings.TrimPrefix(PathChain, "/")):  mount{s, path.Dir(strings.TrimPrefix(PathChain, "/"))},
		path.Dir(strings.TrimPrefix(PathConfig, "/")): mount{s, path.Dir(strings.TrimPrefix(PathConfig, "/"))},
	}
}

// mount is the chain's names under one top directory, opened without it.
type mount struct {
	s   *Chain
	dir string
}

var _ tftpd.PeerFS = mount{}

func (m mount) Open(name string) (fs.File, error) { return m.OpenFrom(name, netip.AddrPort{}) }

func (m mount) OpenFrom(name string, peer netip.AddrPort) (fs.File, error) {
	if !fs.ValidPath(name) || name == "." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return m.s.OpenFrom(m.dir+"/"+name, peer)
}

// openLoader answers shim and GRUB: under sb/ (the name of a PXE answer on 67, and where
// shim then finds GRUB), and under a nonce of a PXE answer on 4011 while it lives.
func (s *Chain) openLoader(name string, n Name) (fs.File, error) {
	if n.Nonce != "" && !s.cfg.Nonces.Live(n.Nonce, bootbind.KindShim) {
		return nil, ErrNotServed
	}
	if n.File != s.shimName && n.File != s.grubName {
		return nil, ErrNotServed // shim's optional files (revocations, certificates), and anything else
	}
	f, err := s.files()
	if err != nil {
		s.n.errors.Add(1)
		s.log.Error("secureboot: the signed chain cannot be served", "err", err)
		return nil, err
	}
	if n.File == s.shimName {
		return memFile(name, f.shim), nil
	}
	return memFile(name, f.grub), nil
}

// openKey answers the key file sb/key?mac=MAC: a fresh key, pending until tftpd reports its
// transfer (OnTransfer), for a MAC whose shim was fetched under one of its nonces.
func (s *Chain) openKey(name string, mac hwid.MAC) (fs.File, error) {
	if !s.cfg.Nonces.FetchedAny(mac, bootbind.KindShim) {
		return nil, ErrNotServed
	}
	k, err := s.keys.Issue(mac, netip.Addr{})
	if err != nil {
		return nil, ErrNotServed
	}
	body, err := grubcfg.KeyFile{Key: k}.Render()
	if err != nil {
		return nil, err
	}
	return memFile(name, body), nil
}

// OnTransfer reads tftpd's report of each transfer (set it as tftpd.Server.OnTransfer, or
// call it from the host's own hook): a file fetched under a nonce binds the nonce to the
// fetching address (the first one); a key file's transfer activates its key when it
// completed to the address the MAC's shim went to, and drops it otherwise.
func (s *Chain) OnTransfer(t tftpd.Transfer) {
	name := t.File
	if name == "" {
		name = strings.TrimLeft(strings.ReplaceAll(t.Requested, "\\", "/"), "/")
	}
	n, err := ParseName(name)
	if err != nil {
		return
	}
	peer := t.Peer.Addr().Unmap()
	switch n.Kind {
	case NameKey:
		switch t.Outcome {
		case tftpd.OutcomeNotFound, tftpd.OutcomeDenied, tftpd.OutcomeRefused:
			return // a request refused at open: not the pending key's transfer
		}
		delivered := t.Outcome == tftpd.OutcomeOK && s.cfg.Nonces.Owns(n.MAC, bootbind.KindShim, peer)
		if pending, active := s.keys.Resolve(n.MAC, peer, delivered); pending && !active {
			s.log.Warn("secureboot: key file not delivered to the machine; key dropped", "mac", n.MAC.String(),
				"peer", peer.String(), "outcome", string(t.Outcome))
		}
	case NameLoader:
		if n.Nonce == "" {
			return
		}
		switch mac, u := s.cfg.Nonces.Fetched(n.Nonce, bootbind.KindShim, peer); u {
		case bootbind.Bound:
			s.n.nonceFetches.Add(1)
			if s.cfg.OnFetch != nil {
				s.cfg.OnFetch(mac)
			}
		case bootbind.OtherAddress:
			s.n.otherAddress.Add(1)
			s.log.Warn("secureboot: a second address fetched under a machine's nonce", "mac", mac.String(), "peer", peer.String())
		}
	}
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

func (i fileInfo) Name() string       { return path.Base(i.name) }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return 0o444 }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return false }
func (i fileInfo) Sys() any           { return nil }
