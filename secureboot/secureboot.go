package secureboot

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/clock"
	"github.com/bettercompute/siteboot/grubcfg"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/ipxe"
)

// The signed chain's files, as Debian's packages ship them (dpkg -L shim-signed
// grub-efi-amd64-signed): the defaults of [Config.Shim] and [Config.GRUB].
const (
	DefaultShim = "/usr/lib/shim/shimx64.efi.signed"
	DefaultGRUB = "/usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"
)

// Where the chain is served: TFTP names (without the leading slash) and HTTP paths.
const (
	// PathConfig is the machine's own configuration, PathConfig?mac=MAC&uuid=UUID&n=KEY:
	// over TFTP as boot/grub.cfg?..., over HTTP as /boot/grub.cfg?....
	PathConfig = "/boot/grub.cfg"
	// PathChain is where GRUB looks first (its built-in prefix /grub): the [grubcfg.Chain]
	// that leads it to its key file and its configuration. Served over TFTP, also as
	// grub/x86_64-efi/grub.cfg.
	PathChain = "/grub/grub.cfg"
	// PathSB holds shim and GRUB (sb/shimx64.efi, sb/grubx64.efi, and the same under a
	// nonce, sb/NONCE/shimx64.efi), the key file (sb/key?mac=MAC) over TFTP, and the RAM disk
	// of UEFI HTTP boot over HTTP (/sb/NONCE/boot.img). Mount [Chain] at this path.
	PathSB = "/sb/"
	// ImageName is the RAM disk's file name under a nonce.
	ImageName = "boot.img"
	// DefaultTFTPCacheDir is the default of [Config.TFTPCacheDir]: the image cache's
	// granted names over TFTP are cache/t/GRANT/SHA256.
	DefaultTFTPCacheDir = "cache"
	// LoaderName is set as [ipxe.Query.Loader] on every question to the [Decider], so a
	// host's entry rule can tell a GRUB configuration from an iPXE script.
	LoaderName = "grub"
)

// Defaults used when the corresponding Config field is zero, and fixed bounds.
const (
	// DefaultRenderWait bounds how long a TFTP request for a machine's configuration waits
	// for the decision. tftpd opens files on its reading loop: a slower decision (a discovery
	// token on its way from the control plane) is sent to the machine's next request, which
	// a short wait configuration makes it send.
	DefaultRenderWait = 100 * time.Millisecond
	// DefaultRetryDelay is how long that wait configuration makes GRUB sleep.
	DefaultRetryDelay = time.Second
	// DefaultDecideTimeout bounds one decision.
	DefaultDecideTimeout = 30 * time.Second
	// MaxRenders bounds the configurations being made, or made and waiting for their
	// machine to ask again; a request beyond it is refused (ErrBusy).
	MaxRenders = 256
	// RenderKeep is how long a made configuration waits for its machine to ask again.
	RenderKeep = time.Minute
	// ConfigSpace is the room the RAM disk keeps for its GRUB configuration, padded with
	// new lines, so that the image's layout does not depend on it.
	ConfigSpace = 4096
)

// Decider makes the boot decision for a machine: what /boot/ipxe would answer it, as an
// [ipxe.Answer]. The chain asks it only for a request that presented the machine's boot key
// from the address the key went to, with [ipxe.Query.Remote] set to that address and
// [ipxe.Query.Loader] to LoaderName. *ipxe.Handler implements it.
type Decider interface {
	Decide(ctx context.Context, q ipxe.Query) ipxe.Answer
}

// DeciderFunc adapts a function to a Decider.
type DeciderFunc func(ctx context.Context, q ipxe.Query) ipxe.Answer

// Decide calls f.
func (f DeciderFunc) Decide(ctx context.Context, q ipxe.Query) ipxe.Answer { return f(ctx, q) }

// Config configures a [Chain]. Server, Nonces and Decider are required; every other zero
// field means its default.
type Config struct {
	// Shim is Debian's signed shim (shim-signed). Default DefaultShim.
	Shim string
	// GRUB is Debian's signed network GRUB (grub-efi-amd64-signed). Default DefaultGRUB.
	GRUB string
	// Server is the IPv4 address of this host that every TFTP URL names (the Chain's, the
	// machine's configuration, the kernel and initrds); GRUB fetches over TFTP only.
	Server netip.Addr
	// HTTPPort is the port of the HTTP server the chain is mounted on, named in the RAM
	// disk URL of an answer to UEFI HTTP boot. Default 80.
	HTTPPort int

	// Nonces are the boot nonces the DHCP answers name (bootbind): shim's directory of a
	// PXE answer, the RAM disk's of an HTTP boot answer. Usually the store proxy DHCP binds
	// its answers to iPXE with.
	Nonces *bootbind.Nonces
	// Keys are the machines' boot keys. Nil: a store of the chain's own, on Clock.
	Keys *bootbind.Keys
	// Decider makes the boot decision (an *ipxe.Handler).
	Decider Decider

	// CacheURLs are the HTTP base URLs of the image cache ("http://192.0.2.1/cache", no
	// trailing slash) that the Decider's boot answers name their kernel and initrds under
	// (BASE/t/GRANT/SHA256); each becomes its TFTP name ([TFTPCacheURL]). Empty: a boot
	// answer whose images are elsewhere cannot be spelled, and the machine waits.
	CacheURLs []string
	// TFTPCacheDir is the TFTP directory the image cache's granted names t/GRANT/SHA256
	// are under: the kernel and initrds of a machine's configuration are named
	// tftp://SERVER/DIR/t/GRANT/SHA256, and [Chain.FS] serves Cache there. "." names them
	// at the root (t/GRANT/SHA256), where bootserver.FS serves an image cache's grants.
	// Default DefaultTFTPCacheDir.
	TFTPCacheDir string
	// Cache serves the image cache's granted names "t/GRANT/SHA256" ((*imagecache.Cache).
	// GrantFS) under TFTPCacheDir. Nil: not served by [Chain.FS] (a host whose own TFTP
	// file system serves them, as bootserver.FS does, leaves it nil).
	Cache fs.FS
	// Root serves every other TFTP name (the iPXE builds of machines that do not boot
	// through the chain); use (*os.Root).FS. Nil: none.
	Root fs.FS

	// OnFetch, when set, is called with the MAC whose nonce a file of the chain was fetched
	// under by its owner: the machine is booting. Called synchronously; keep it short.
	OnFetch func(hwid.MAC)
	// OnIssue, when set, is called after each nonce the chain issues for a DHCP answer (a
	// host that persists its Nonces saves them then).
	OnIssue func()

	RenderWait    time.Duration // 0 means DefaultRenderWait
	RetryDelay    time.Duration // 0 means DefaultRetryDelay; whole seconds
	DecideTimeout time.Duration // 0 means DefaultDecideTimeout

	Clock  clock.Clock  // nil means clock.Real
	Logger *slog.Logger // nil discards
}

func (c *Config) shim() string {
	if c.Shim != "" {
		return c.Shim
	}
	return DefaultShim
}

func (c *Config) grub() string {
	if c.GRUB != "" {
		return c.GRUB
	}
	return DefaultGRUB
}

// Validate reports settings that cannot work: a missing Server (or one that is not IPv4),
// Nonces or Decider, relative file paths, negative durations or port, a cache URL that is
// not an http(s) base. It reads no file: see [Config.CheckFiles].
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case !c.Server.Is4():
		return bad("Server is not an IPv4 address (the signed GRUB's network is IPv4)")
	case c.Nonces == nil:
		return bad("Nonces is nil")
	case c.Decider == nil:
		return bad("Decider is nil")
	case c.HTTPPort < 0 || c.HTTPPort > 65535:
		return bad("HTTPPort %d is out of range", c.HTTPPort)
	case c.RenderWait < 0 || c.RetryDelay < 0 || c.DecideTimeout < 0:
		return bad("negative RenderWait, RetryDelay or DecideTimeout")
	case c.RetryDelay%time.Second != 0:
		return bad("RetryDelay is not whole seconds")
	case c.TFTPCacheDir != "" && c.TFTPCacheDir != "." && (!fs.ValidPath(c.TFTPCacheDir) || strings.ContainsAny(c.TFTPCacheDir, "?")):
		return bad("TFTPCacheDir %q is not a path of the TFTP root", c.TFTPCacheDir)
	}
	if err := c.CheckPaths(); err != nil {
		return err
	}
	for i, u := range c.CacheURLs {
		if !(strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) || strings.HasSuffix(u, "/") ||
			strings.ContainsAny(u, "?# ") {
			return bad("CacheURLs[%d]: want http(s)://HOST[:PORT]/PATH without a trailing slash", i)
		}
	}
	return nil
}

// FileError is a problem with one of the chain's files, Shim or GRUB: a relative path
// (wrapping ErrInvalid, from [Config.CheckPaths]) or a file that is not there or not a
// regular file (wrapping ErrUnavailable, from [Config.CheckFiles]). A host maps Field to
// its own name of the setting.
type FileError struct {
	Field string // "Shim" or "GRUB"
	Path  string // the path checked (the default when the field is empty)
	Err   error
}

var _ error = &FileError{}

func (e *FileError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// CheckPaths reports a Shim or GRUB path that is set and not absolute, as a *FileError
// wrapping ErrInvalid. Validate calls it; a host checks its own settings with it before
// it has the rest of a Config.
func (c Config) CheckPaths() error {
	for _, f := range []struct{ field, path string }{{"Shim", c.Shim}, {"GRUB", c.GRUB}} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			return &FileError{Field: f.field, Path: f.path, Err: fmt.Errorf("%w: want an absolute path, got %q", ErrInvalid, f.path)}
		}
	}
	return nil
}

// CheckFiles reports, without reading them, whether shim and GRUB are regular files: a
// *FileError wrapping ErrUnavailable names the file at fault and, when it is missing, the
// Debian package that has it.
func (c Config) CheckFiles() error {
	for _, f := range []struct{ field, path, pkg string }{
		{"Shim", c.shim(), "shim-signed"}, {"GRUB", c.grub(), "grub-efi-amd64-signed"},
	} {
		st, err := os.Stat(f.path)
		if err != nil {
			return &FileError{Field: f.field, Path: f.path, Err: fmt.Errorf("%w: %w (Debian's package %s has it)", ErrUnavailable, err, f.pkg)}
		}
		if !st.Mode().IsRegular() {
			return &FileError{Field: f.field, Path: f.path, Err: fmt.Errorf("%w: %s is not a regular file", ErrUnavailable, f.path)}
		}
	}
	return nil
}

// Chain is the Secure Boot chain of one site agent: proxy DHCP's answers to the firmware
// of a Secure Boot machine ([Chain.AnswerDHCP]), the TFTP file system that serves shim,
// GRUB, the key files and the machines' configurations ([Chain.FS]), the HTTP handler of
// the RAM disk of UEFI HTTP boot and of the configurations ([Chain.ServeHTTP]), and the hook
// that binds what tftpd delivered ([Chain.OnTransfer]). Create it with [New]; it is safe for
// concurrent use.
type Chain struct {
	cfg       Config
	log       *slog.Logger
	clock     clock.Clock
	keys      *bootbind.Keys
	shimName  string // shimx64.efi
	grubName  string // grubx64.efi
	chainBody []byte // grub/grub.cfg
	// cachePrefix is TFTPCacheDir as a name prefix: "cache/", or "" for the root.
	cachePrefix string
	n           counters

	filesMu sync.Mutex
	built   *files // nil until the first machine asks, or Load

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closing bool
	renders map[string]*render
}

// files is the chain's bytes: the RAM disk of UEFI HTTP boot, and shim and GRUB, served over
// TFTP from where they lie whole inside it.
type files struct {
	shim, grub []byte
	image      *fatImage
	cfgOffset  int // where the RAM disk's GRUB configuration begins
}

// New validates c and returns the chain. It checks that shim and GRUB are there
// ([Config.CheckFiles]) but reads them only when the first machine asks, or on [Chain.Load].
func New(c Config) (*Chain, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := c.CheckFiles(); err != nil {
		return nil, err
	}
	s := &Chain{cfg: c, log: c.Logger, clock: clock.Or(c.Clock), keys: c.Keys, renders: map[string]*render{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.keys == nil {
		s.keys = bootbind.NewKeys(bootbind.Config{Clock: s.clock})
	}
	if s.cfg.RenderWait == 0 {
		s.cfg.RenderWait = DefaultRenderWait
	}
	if s.cfg.RetryDelay == 0 {
		s.cfg.RetryDelay = DefaultRetryDelay
	}
	if s.cfg.DecideTimeout == 0 {
		s.cfg.DecideTimeout = DefaultDecideTimeout
	}
	switch s.cfg.TFTPCacheDir {
	case "":
		s.cachePrefix = DefaultTFTPCacheDir + "/"
	case ".":
		s.cachePrefix = ""
	default:
		s.cachePrefix = s.cfg.TFTPCacheDir + "/"
	}
	var ok bool
	if s.shimName, s.grubName, ok = hwid.ArchX86_64EFI.ShimFile(); !ok {
		return nil, fmt.Errorf("%w: no file names for x86-64 UEFI", ErrInvalid)
	}
	var err error
	if s.chainBody, err = (grubcfg.Chain{URL: s.tftpURL(PathConfig), KeyURL: s.tftpURL(PathSB + "key")}).Render(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// tftpURL is the URL of path (with its leading slash) on this host's TFTP server.
func (s *Chain) tftpURL(path string) string { return "tftp://" + s.cfg.Server.String() + path }

// cacheBase is the TFTP URL the image cache's t/ directory is under.
func (s *Chain) cacheBase() string { return strings.TrimSuffix(s.tftpURL("/"+s.cachePrefix), "/") }

// Load reads shim and GRUB and builds the RAM disk now, rather than when the first machine
// asks: a site that boots through the chain fails at start, not at a machine's boot. What
// it read is kept for the chain's life, as after a first machine's ask; the files are read
// once.
func (s *Chain) Load() error {
	_, err := s.files()
	return err
}

// files reads shim and GRUB and builds the RAM disk, on the first call that succeeds; the
// result is kept. Built at start, it would hold 9.5 MB (Debian's shim and GRUB read, then
// copied into the RAM disk) for the life of an agent whose machines may never boot the
// chain.
func (s *Chain) files() (*files, error) {
	s.filesMu.Lock()
	defer s.filesMu.Unlock()
	if s.built != nil {
		return s.built, nil
	}
	shim, err := os.ReadFile(s.cfg.shim())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	grub, err := os.ReadFile(s.cfg.grub())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	f, err := s.buildFiles(shim, grub)
	if err != nil {
		return nil, err
	}
	s.built = f
	return f, nil
}

// imageShimPath and the others are where the RAM disk holds its files: shim as the
// removable-media loader, GRUB beside it, and the configuration where grubnetx64's
// built-in prefix /grub finds it ((hd0)/grub/grub.cfg).
const (
	imageShimPath   = "EFI/BOOT/BOOTX64.EFI"
	imageGRUBPath   = "EFI/BOOT/GRUBX64.EFI"
	imageConfigPath = "GRUB/GRUB.CFG"
)

func (s *Chain) buildFiles(shim, grub []byte) (*files, error) {
	img, err := buildFAT([]fatFile{
		{imageShimPath, shim},
		{imageGRUBPath, grub},
		{imageConfigPath, bytes.Repeat([]byte("\n"), ConfigSpace)},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return &files{
		shim:      img.file(imageShimPath, len(shim)),
		grub:      img.file(imageGRUBPath, len(grub)),
		image:     img,
		cfgOffset: img.offsets[imageConfigPath],
	}, nil
}

// TFTPCacheDir returns the TFTP directory the chain names the image cache's grants under:
// Config.TFTPCacheDir, DefaultTFTPCacheDir when it was empty, "." for the root.
func (s *Chain) TFTPCacheDir() string {
	if s.cachePrefix == "" {
		return "."
	}
	return strings.TrimSuffix(s.cachePrefix, "/")
}

// Keys returns the chain's boot key store (Config.Keys, or its own).
func (s *Chain) Keys() *bootbind.Keys { return s.keys }

// Bind is the chain's binding rule, for a host whose own entry rule is asked about a
// request for a GRUB configuration (Query.Loader == LoaderName): nil when q presents a boot
// key handed to q.MAC and delivered to q.Remote; otherwise an error wrapping ErrUnbound,
// [ipxe.ErrUnbound] and a [*bootbind.RefusedError]. The chain asks it itself before it asks
// the Decider, so a host need not; asking again is harmless.
func (s *Chain) Bind(q ipxe.Query) error {
	u := s.keys.Claim(q.Nonce, q.MAC, q.Remote)
	if u == bootbind.Bound {
		return nil
	}
	return fmt.Errorf("%w: %w: %w", ErrUnbound, ipxe.ErrUnbound, u.Err())
}

// claim is Bind, counted.
func (s *Chain) claim(q ipxe.Query) error {
	err := s.Bind(q)
	if err != nil {
		var u bootbind.Reason = bootbind.NoNonce
		if re := refusalOf(err); re != nil {
			u = re.Reason
		}
		s.n.unbound(u)
	}
	return err
}

// Shutdown stops making configurations and waits until those being made are done, or ctx
// is; then it cancels what remains. No goroutine of the chain outlives it. A request that
// comes later is refused (ErrClosed); shim, GRUB and the RAM disk are still served.
func (s *Chain) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.cancel()
	<-done
	return err
}

// Close is Shutdown without the wait: the decisions being made are cancelled.
func (s *Chain) Close() error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}
