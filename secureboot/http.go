package secureboot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/grubcfg"
	"github.com/bettercompute/siteboot/ipxe"
)

// ServeHTTP answers the chain's HTTP paths; mount it at PathSB ("/sb/") and PathConfig
// ("/boot/grub.cfg", a pattern more specific than the ipxe handler's "/boot/"):
//
//   - GET and HEAD /sb/NONCE/boot.img, UEFI HTTP boot's RAM disk: the image with shim, GRUB
//     and a configuration carrying a fresh boot key for the machine the nonce was handed to,
//     bound to the first connection that fetches it; another address gets 404. HEAD tells
//     the size and hands out nothing.
//   - GET /boot/grub.cfg?QUERY, the machine's configuration, for a GRUB that has an http
//     module: the Decider's answer for a request that presents the machine's key from the
//     address it was delivered to (a give-up is the exit configuration, as a 200); 404 for
//     any other key or address, so that the Chain's back-off asks again; a query that does
//     not parse gets the exit configuration.
//
// Requests that came over IPv6 get 404: the signed GRUB's network is IPv4.
func (s *Chain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if viaIPv6(r) {
		http.NotFound(w, r)
		return
	}
	if r.URL.Path == PathConfig {
		s.serveConfig(w, r)
		return
	}
	n, file, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, PathSB), "/")
	if !ok || !strings.HasPrefix(r.URL.Path, PathSB) || file != ImageName || !validNonce(n) ||
		!s.cfg.Nonces.Live(n, bootbind.KindImage) {
		http.NotFound(w, r)
		return
	}
	s.serveImage(w, r, n)
}

// viaIPv6 reports whether r came to an IPv6 address of this host.
func viaIPv6(r *http.Request) bool {
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	ap, err := netip.ParseAddrPort(la.String())
	return err == nil && ap.Addr().Is6() && !ap.Addr().Is4In6()
}

// remoteAddr is the address of the connection a request came on.
func remoteAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

func (s *Chain) serveImage(w http.ResponseWriter, r *http.Request, n string) {
	f, err := s.files()
	if err != nil {
		s.n.errors.Add(1)
		s.log.Error("secureboot: no RAM disk", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	switch r.Method {
	case http.MethodHead:
		hd.Set("Content-Type", "application/vnd.efi-img")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Content-Length", strconv.Itoa(len(f.image.data)))
		return
	case http.MethodGet:
	default:
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	remote := remoteAddr(r)
	mac, u := s.cfg.Nonces.Fetched(n, bootbind.KindImage, remote)
	if u != bootbind.Bound {
		if u == bootbind.OtherAddress {
			s.n.otherAddress.Add(1)
			s.log.Warn("secureboot: a second address fetched a machine's RAM disk", "mac", mac.String(), "remote", remote.String())
		}
		http.NotFound(w, r)
		return
	}
	if s.cfg.OnFetch != nil {
		s.cfg.OnFetch(mac)
	}
	k, err := s.keys.Issue(mac, remote)
	var cfg []byte
	if err == nil {
		cfg, err = grubcfg.Chain{URL: s.tftpURL(PathConfig), Key: k, MAC: mac.String()}.Render()
	}
	if err == nil && len(cfg) > ConfigSpace {
		err = fmt.Errorf("%w: the RAM disk's configuration is %d bytes, over %d", ErrUnavailable, len(cfg), ConfigSpace)
	}
	if err != nil {
		s.n.errors.Add(1)
		s.log.Error("secureboot: no RAM disk", "mac", mac.String(), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	s.n.images.Add(1)
	hd.Set("Content-Type", "application/vnd.efi-img")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", strconv.Itoa(len(f.image.data)))
	img, at := f.image.data, f.cfgOffset
	pad := bytes.Repeat([]byte("\n"), ConfigSpace-len(cfg))
	_, _ = io.Copy(w, io.MultiReader(bytes.NewReader(img[:at]), bytes.NewReader(cfg), bytes.NewReader(pad),
		bytes.NewReader(img[at+ConfigSpace:])))
}

// serveConfig answers GET /boot/grub.cfg?QUERY.
func (s *Chain) serveConfig(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q, err := parseConfigQuery(r.URL.RawQuery)
	if len(r.URL.RawQuery) > ipxe.MaxQueryLen || err != nil {
		body, err := s.badQuery()
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		writeConfig(w, http.StatusOK, body)
		return
	}
	q.Remote, q.Loader = remoteAddr(r), LoaderName
	if err := s.claim(q); err != nil {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if closing {
		http.NotFound(w, r)
		return
	}
	defer s.wg.Done()
	// The request's context, ended by Close too, and by DecideTimeout.
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.DecideTimeout)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	status, body := s.decide(ctx, q)
	writeConfig(w, status, body)
}

// writeConfig sends a configuration for GRUB.
func writeConfig(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
