package imagecache

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bettercompute/siteboot/internal/atomicfile"
)

// Names in the cache directory besides the images (64 hex digits) and the lock. None of
// them is ever served: the handler opens only names of 64 hex digits.
const (
	// tempPrefix starts the names of pull files: ".pull-DIGEST" is the partial copy of a pull
	// and ".pull-DIGEST.meta" what is needed to resume it. Any other name with the prefix
	// (an older version's ".pull-DIGEST-RANDOM") is removed by Open.
	tempPrefix = ".pull-"
	metaSuffix = ".meta"
	// stampPrefix starts ".stamp-DIGEST": the file's identity when it was last verified.
	stampPrefix = ".stamp-"
	lockName    = ".lock"
)

func (c *Cache) partialPath(d Digest) string { return filepath.Join(c.dir, tempPrefix+d.String()) }
func (c *Cache) metaPath(d Digest) string {
	return filepath.Join(c.dir, tempPrefix+d.String()+metaSuffix)
}
func (c *Cache) stampPath(d Digest) string { return filepath.Join(c.dir, stampPrefix+d.String()) }

// partialMeta is what a later process needs to resume a pull: the URL, the validator the
// source sent with the bytes the partial file holds, and the full size when known.
type partialMeta struct {
	URL       string    `json:"url"`
	Validator validator `json:"validator"`
	Total     int64     `json:"total"`
}

func readMeta(path string) (partialMeta, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return partialMeta{}, false
	}
	var m partialMeta
	if err := json.Unmarshal(b, &m); err != nil || m.Total < -1 {
		return partialMeta{}, false
	}
	m.Validator = cleanValidator(m.Validator)
	return m, true
}

func writeMeta(path string, m partialMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return writeError(atomicfile.Write(path, b, 0o600))
}

// fileStamp identifies a file as the file system knows it. A stamp written when the bytes
// were last hashed and matching the file's current one says the file was not replaced or
// written since: a new inode, any write (mtime), a truncation (size), and any change of
// its times or attributes (ctime, which only the kernel sets) all change it.
type fileStamp struct {
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime_ns"`
	Ctime int64  `json:"ctime_ns"`
	Ino   uint64 `json:"ino"`
	Dev   uint64 `json:"dev"`
}

func readStamp(path string) (fileStamp, bool) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 4096 {
		return fileStamp{}, false
	}
	var s fileStamp
	if err := json.Unmarshal(b, &s); err != nil {
		return fileStamp{}, false
	}
	return s, true
}

// writeStamp records the identity of the verified image file d, atomically.
func (c *Cache) writeStamp(d Digest) error {
	fi, err := os.Stat(c.path(d))
	if err != nil {
		return err
	}
	s, ok := stampOf(fi)
	if !ok {
		return nil // no identity on this system: the image is hashed again at every start
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return atomicfile.Write(c.stampPath(d), b, 0o600)
}

// removeQuiet removes a file, ignoring one that is already gone.
func removeQuiet(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// dirName classifies a name found in the cache directory.
type dirName int

const (
	nameOther dirName = iota
	nameImage
	namePartial
	nameMeta
	nameStamp
	nameStaleTemp // a temp file nobody resumes: removed
	nameLock
)

func classify(name string) (dirName, Digest) {
	var d Digest
	switch {
	case name == lockName:
		return nameLock, d
	case parseLowerHex(d[:], name):
		return nameImage, d
	case strings.HasPrefix(name, tempPrefix):
		rest := name[len(tempPrefix):]
		if parseLowerHex(d[:], rest) {
			return namePartial, d
		}
		if r, ok := strings.CutSuffix(rest, metaSuffix); ok && parseLowerHex(d[:], r) {
			return nameMeta, d
		}
		return nameStaleTemp, d
	case strings.HasPrefix(name, stampPrefix):
		if parseLowerHex(d[:], name[len(stampPrefix):]) {
			return nameStamp, d
		}
		return nameStaleTemp, d
	case strings.HasPrefix(name, atomicfile.TempPrefix):
		// The temp file of a stamp or meta write that a crash interrupted.
		return nameStaleTemp, d
	}
	return nameOther, d
}
