package secureboot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// fatFile is one file of a FAT image: its path of 8.3 names ("EFI/BOOT/BOOTX64.EFI") and
// its contents.
type fatFile struct {
	path string
	data []byte
}

// fatImage is a FAT16 file system without a partition table (a "superfloppy"), the form
// UEFI HTTP boot mounts as a RAM disk when the answer's type is application/vnd.efi-img
// (EDK2's HttpBootDxe; the firmware then boots \EFI\BOOT\BOOT<ARCH>.EFI from it).
type fatImage struct {
	data    []byte
	offsets map[string]int // byte offset of each file's contents, by path
}

const (
	fatSector   = 512 // bytes per sector, and per cluster (one sector each)
	fatRootEnts = 512 // entries of the fixed root directory
	// fatMinClusters keeps the count of clusters where FAT16 begins (4085, Microsoft's
	// FAT specification, "FAT type determination"), with a margin.
	fatMinClusters = 4200
	fatMaxClusters = 65524
)

// file is the contents of the file at path, size bytes, where they lie in the image (a
// file's clusters are contiguous); nil when there is no such file.
func (m *fatImage) file(path string, size int) []byte {
	off, ok := m.offsets[path]
	if !ok || off+size > len(m.data) {
		return nil
	}
	return m.data[off : off+size : off+size]
}

type fatNode struct {
	name     string // upper case 8.3
	dir      bool
	data     []byte
	children []*fatNode
	parent   *fatNode
	cluster  int
	clusters int
}

var errFATName = errors.New("secureboot: not an 8.3 file name")

// fatName is the directory entry's name field of an 8.3 name.
func fatName(s string) ([11]byte, error) {
	var out [11]byte
	for i := range out {
		out[i] = ' '
	}
	if s == "." || s == ".." {
		copy(out[:], s)
		return out, nil
	}
	base, ext, _ := strings.Cut(strings.ToUpper(s), ".")
	if base == "" || len(base) > 8 || len(ext) > 3 || strings.Contains(ext, ".") {
		return out, fmt.Errorf("%w: %q", errFATName, s)
	}
	for _, c := range base + ext {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return out, fmt.Errorf("%w: %q", errFATName, s)
		}
	}
	copy(out[:8], base)
	copy(out[8:], ext)
	return out, nil
}

// buildFAT lays files out in one FAT16 file system: the boot sector, two copies of the FAT,
// the root directory, then each directory and file in contiguous clusters. Dates are fixed,
// so the same files give the same image.
func buildFAT(files []fatFile) (*fatImage, error) {
	root := &fatNode{dir: true}
	for _, f := range files {
		n := root
		parts := strings.Split(f.path, "/")
		for i, p := range parts {
			if _, err := fatName(p); err != nil {
				return nil, err
			}
			p = strings.ToUpper(p)
			var next *fatNode
			for _, c := range n.children {
				if c.name == p {
					next = c
				}
			}
			if next == nil {
				next = &fatNode{name: p, dir: i < len(parts)-1, parent: n}
				n.children = append(n.children, next)
			} else if next.dir != (i < len(parts)-1) {
				return nil, fmt.Errorf("secureboot: %s is both a file and a directory", f.path)
			}
			n = next
		}
		n.data = f.data
	}
	var order []*fatNode
	var walk func(n *fatNode)
	walk = func(n *fatNode) {
		slices.SortFunc(n.children, func(a, b *fatNode) int { return strings.Compare(a.name, b.name) })
		order = append(order, n.children...)
		for _, c := range n.children {
			if c.dir {
				walk(c)
			}
		}
	}
	walk(root)
	if len(root.children) > fatRootEnts {
		return nil, errors.New("secureboot: too many files in the image's root")
	}
	next := 2 // the first data cluster
	for _, n := range order {
		size := len(n.data)
		if n.dir {
			size = (len(n.children) + 2) * 32
		}
		n.clusters = (size + fatSector - 1) / fatSector
		if n.dir {
			n.clusters = max(1, n.clusters)
		}
		if n.clusters > 0 { // an empty file has no cluster (first cluster 0)
			n.cluster = next
		}
		next += n.clusters
	}
	clusters := max(next-2, fatMinClusters)
	if clusters > fatMaxClusters {
		return nil, errors.New("secureboot: files too large for a FAT16 image")
	}
	fatSectors := ((clusters+2)*2 + fatSector - 1) / fatSector
	rootSectors := fatRootEnts * 32 / fatSector
	dataStart := 1 + 2*fatSectors + rootSectors
	total := dataStart + clusters
	img := make([]byte, total*fatSector)

	// The boot sector's BIOS parameter block.
	bs := img[:fatSector]
	copy(bs, []byte{0xEB, 0x3C, 0x90})
	copy(bs[3:11], "SITEBOOT")
	binary.LittleEndian.PutUint16(bs[11:], fatSector)
	bs[13] = 1                                // sectors per cluster
	binary.LittleEndian.PutUint16(bs[14:], 1) // reserved sectors: the boot sector
	bs[16] = 2                                // FATs
	binary.LittleEndian.PutUint16(bs[17:], fatRootEnts)
	if total < 1<<16 {
		binary.LittleEndian.PutUint16(bs[19:], uint16(total))
	} else {
		binary.LittleEndian.PutUint32(bs[32:], uint32(total))
	}
	bs[21] = 0xF8 // fixed media
	binary.LittleEndian.PutUint16(bs[22:], uint16(fatSectors))
	binary.LittleEndian.PutUint16(bs[24:], 32) // sectors per track
	binary.LittleEndian.PutUint16(bs[26:], 64) // heads
	bs[36] = 0x80                              // drive number
	bs[38] = 0x29                              // extended boot signature
	binary.LittleEndian.PutUint32(bs[39:], 0x517eb007)
	copy(bs[43:54], "NO NAME    ") // no volume label (the root directory has none)
	copy(bs[54:62], "FAT16   ")
	bs[510], bs[511] = 0x55, 0xAA

	fat := make([]byte, fatSectors*fatSector)
	binary.LittleEndian.PutUint16(fat[0:], 0xFFF8)
	binary.LittleEndian.PutUint16(fat[2:], 0xFFFF)
	for _, n := range order {
		for i := range n.clusters {
			v := uint16(n.cluster + i + 1)
			if i == n.clusters-1 {
				v = 0xFFFF // end of the chain
			}
			binary.LittleEndian.PutUint16(fat[(n.cluster+i)*2:], v)
		}
	}
	copy(img[fatSector:], fat)
	copy(img[(1+fatSectors)*fatSector:], fat)

	const date = (2024-1980)<<9 | 1<<5 | 1 // 2024-01-01
	entry := func(dst []byte, name [11]byte, attr byte, cluster int, size int) {
		copy(dst[:11], name[:])
		dst[11] = attr
		binary.LittleEndian.PutUint16(dst[16:], date) // created
		binary.LittleEndian.PutUint16(dst[18:], date) // accessed
		binary.LittleEndian.PutUint16(dst[24:], date) // written
		binary.LittleEndian.PutUint16(dst[26:], uint16(cluster))
		binary.LittleEndian.PutUint32(dst[28:], uint32(size))
	}
	at := func(cluster int) int { return (dataStart + cluster - 2) * fatSector }
	list := func(dst []byte, n *fatNode) {
		for i, c := range n.children {
			name, _ := fatName(c.name)
			if c.dir {
				entry(dst[i*32:], name, 0x10, c.cluster, 0)
			} else {
				entry(dst[i*32:], name, 0x20, c.cluster, len(c.data))
			}
		}
	}
	list(img[(1+2*fatSectors)*fatSector:], root)
	out := &fatImage{data: img, offsets: map[string]int{}}
	pathOf := func(n *fatNode) string {
		var parts []string
		for ; n != root; n = n.parent {
			parts = append(parts, n.name)
		}
		slices.Reverse(parts)
		return strings.Join(parts, "/")
	}
	for _, n := range order {
		if n.clusters == 0 {
			continue
		}
		dst := img[at(n.cluster):]
		if !n.dir {
			copy(dst, n.data)
			out.offsets[pathOf(n)] = at(n.cluster)
			continue
		}
		dot, _ := fatName(".")
		dotdot, _ := fatName("..")
		entry(dst, dot, 0x10, n.cluster, 0)
		parent := 0 // the root directory
		if n.parent != root {
			parent = n.parent.cluster
		}
		entry(dst[32:], dotdot, 0x10, parent, 0)
		list(dst[64:], n)
	}
	return out, nil
}
