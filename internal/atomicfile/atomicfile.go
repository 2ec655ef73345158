// Package atomicfile writes files that must survive a crash: the new content goes to a
// temporary file in the same directory, is fsynced, renamed over the old name, and the
// directory is fsynced. A crash at any point leaves either the old file or the new one,
// never a mix, and once Write returns the new content is durable.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts the names of temporary files Write makes: ".tmp-NAME-RANDOM" beside
// NAME, RANDOM being decimal digits. Sweep and SweepDir remove the ones a crash left.
const TempPrefix = ".tmp-"

// Write replaces path with data, atomically and durably, with the given permissions.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix+base+"-*")
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("atomicfile: write %s: %w", tmp, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("atomicfile: fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("atomicfile: close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that a rename into it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("atomicfile: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("atomicfile: fsync %s: %w", dir, err)
	}
	return nil
}

// Sweep removes the temporary files that interrupted Writes of path left beside it
// (".tmp-NAME-RANDOM" for path DIR/NAME) and returns their names. Call it on start, before
// any Write of path: a Write in progress would lose its temporary file. A file that merely
// looks alike (".tmp-NAME-x", ".tmp-NAME.bak-1", a directory) is left alone.
func Sweep(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return sweep(dir, func(name string) bool {
		rest, ok := strings.CutPrefix(name, TempPrefix+base+"-")
		return ok && isDigits(rest)
	})
}

// SweepDir removes every temporary file of an interrupted Write in dir (any
// ".tmp-NAME-RANDOM") and returns their names. For a directory whose files are all written
// by one owner that holds it alone; otherwise use Sweep for each path.
func SweepDir(dir string) ([]string, error) {
	return sweep(dir, func(name string) bool {
		rest, ok := strings.CutPrefix(name, TempPrefix)
		if !ok {
			return false
		}
		i := strings.LastIndexByte(rest, '-')
		return i > 0 && isDigits(rest[i+1:])
	})
}

func sweep(dir string, match func(string) bool) ([]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("atomicfile: sweep: %w", err)
	}
	var removed []string
	var errs []error
	for _, de := range des {
		if !de.Type().IsRegular() || !match(de.Name()) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("atomicfile: sweep: %w", err))
			}
			continue
		}
		removed = append(removed, de.Name())
	}
	if len(removed) > 0 {
		if err := SyncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
