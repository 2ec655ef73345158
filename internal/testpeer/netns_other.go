//go:build !linux

package testpeer

import (
	"errors"
	"fmt"
)

// namespaces: this system has no network namespaces; NewNetns skips.
const namespaces = false

func (n *Netns) do(func() error) error {
	return fmt.Errorf("testpeer: enter namespace %s: %w", n.name, errors.ErrUnsupported)
}
