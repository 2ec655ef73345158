package bootserver

import (
	"net/http"
	"strings"

	"github.com/bettercompute/siteboot/ipxe"
)

// refusedPlain is the body of a plain HTTP request refused under RefusePlainHTTP.
const refusedPlain = "plain http refused: this site boots over https\n"

// refusePlain answers requests that did not come over TLS with 403, except the iPXE builds
// (Config.RefusePlainHTTP).
func (s *Server) refusePlain(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil || strings.HasPrefix(r.URL.Path, ipxe.PathFiles) {
			next.ServeHTTP(w, r)
			return
		}
		s.plain.Add(1)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(refusedPlain))
	})
}
