package ipxe

import (
	"context"
	"strconv"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

type cachedToken struct {
	workflow string
	notAfter time.Time
	token    string
	expires  time.Time
}

// token returns the entry's discovery token, asking the host only the first time.
func (h *Handler) token(ctx context.Context, e Entry, now time.Time) (string, error) {
	h.mu.Lock()
	c, ok := h.tokens[e.MAC]
	h.mu.Unlock()
	if ok && c.workflow == e.Workflow && c.notAfter.Equal(e.NotAfter) && now.Before(c.expires) {
		return c.token, nil
	}
	key := e.MAC.String() + "\x00" + strconv.FormatInt(e.NotAfter.UnixNano(), 10) + "\x00" + e.Workflow
	v, err, _ := h.sf.Do(key, func() (any, error) {
		h.n.tokenFetches.Add(1)
		tok, err := h.cfg.Tokens.Token(ctx, e)
		if err != nil {
			return "", err
		}
		if err := checkWord(ParamToken, tok); err != nil {
			return "", err
		}
		if tok == "" {
			return "", invalidErr(ParamToken, "empty token")
		}
		expires := e.NotAfter
		if expires.IsZero() {
			expires = now.Add(DefaultEntryLifetime)
		}
		h.storeToken(e, cachedToken{workflow: e.Workflow, notAfter: e.NotAfter, token: tok, expires: expires}, now)
		return tok, nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (h *Handler) storeToken(e Entry, c cachedToken, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.tokens[e.MAC]; !ok && len(h.tokens) >= h.cfg.MaxTokens {
		var oldest hwid.MAC
		var oldestAt time.Time
		for m, t := range h.tokens {
			if !now.Before(t.expires) {
				delete(h.tokens, m)
				continue
			}
			if oldestAt.IsZero() || t.expires.Before(oldestAt) {
				oldest, oldestAt = m, t.expires
			}
		}
		if len(h.tokens) >= h.cfg.MaxTokens {
			delete(h.tokens, oldest)
		}
	}
	h.tokens[e.MAC] = c
}
