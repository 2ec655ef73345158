package agent

import (
	"crypto/ed25519"

	"github.com/bettercompute/siteboot/sitetls"
)

// LoadOrCreateKey reads the agent's Ed25519 node key (PKCS#8 PEM) from path, creating a new
// one (mode 0600) when the file does not exist (sitetls.LoadOrCreateNodeKey).
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	return sitetls.LoadOrCreateNodeKey(path)
}
