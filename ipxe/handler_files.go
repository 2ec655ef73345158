package ipxe

import (
	"io"
	"net/http"
	"strconv"
)

// serveFile answers GET and HEAD /boot/files/NAME from Config.Files: the iPXE builds UEFI
// HTTP boot fetches. One level, no dot files; ranges when the file can seek.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, name string) {
	notFound := func() {
		h.n.notFound.Add(1)
		plain(w, http.StatusNotFound, "not found\n")
	}
	if h.cfg.Files == nil || !validFileName(name) {
		notFound()
		return
	}
	f, err := h.cfg.Files.Open(name)
	if err != nil {
		notFound()
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		notFound()
		return
	}
	h.n.files.Add(1)
	w.Header().Set("Content-Type", "application/octet-stream")
	if rs, ok := f.(io.ReadSeeker); ok {
		http.ServeContent(w, r, name, st.ModTime(), rs)
		return
	}
	// An fs.FS whose files cannot seek: the whole file, no ranges.
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = io.Copy(w, io.LimitReader(f, st.Size()))
	}
}

// validFileName accepts one path element of [A-Za-z0-9._-], not starting with '.'.
func validFileName(s string) bool {
	if s == "" || len(s) > 128 || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}
