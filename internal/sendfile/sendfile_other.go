//go:build !linux

package sendfile

import "os"

// sendFile leaves the copy to net's ReadFrom on systems other than Linux.
func (c *conn) sendFile(f *os.File, remain int64) (int64, error, bool) { return 0, nil, false }
