package sitelink

import (
	"reflect"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
)

func TestSiteSection(t *testing.T) {
	d := func(c byte) string { return strings.Repeat(string(c), 64) }
	mac := func(s string) hwid.MAC {
		m, err := hwid.ParseMAC(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	kernel := ImageReport{SHA256: d('a'), State: ImageReady, Bytes: 10}
	initrd := ImageReport{SHA256: d('b'), State: ImageReady, Bytes: 20}
	pinned := []CacheImage{{SHA256: d('a'), Format: "kernel"}, {SHA256: d('b'), Format: "initrd"}, {SHA256: d('c'), Format: "iso"}}
	ramdisk := ProxyDhcpEntry{MAC: mac("52:54:00:00:00:01"), Arch: ArchBIOS}
	isoEntry := ProxyDhcpEntry{MAC: mac("52:54:00:00:00:02"), Arch: ArchBIOS, SanbootSHA256: d('c')}
	for _, tc := range []struct {
		name    string
		images  []ImageReport
		entries []ProxyDhcpEntry
		want    SectionStatus
	}{
		{"all ready", []ImageReport{kernel, initrd, {SHA256: d('c'), State: ImageReady}}, []ProxyDhcpEntry{ramdisk, isoEntry},
			SectionStatus{State: SectionReady}},
		{"warming", []ImageReport{kernel, {SHA256: d('b'), State: ImageWarming}}, []ProxyDhcpEntry{ramdisk},
			SectionStatus{State: SectionProgressing, Warming: []string{d('b')}}},
		{"bytes did not match", []ImageReport{{SHA256: d('b'), State: ImageWarming}, {SHA256: d('a'), State: ImageFailed, Reason: "digest-mismatch"}}, nil,
			SectionStatus{State: SectionFailed, Warming: []string{d('b')}, Failures: []SectionFailure{{SHA256: d('a'), Reason: "digest-mismatch"}}}},
		{"sanboot ISO still warming", []ImageReport{kernel, initrd, {SHA256: d('c'), State: ImageWarming}}, []ProxyDhcpEntry{isoEntry, ramdisk},
			SectionStatus{State: SectionFailed, Warming: []string{d('c')}, Failures: []SectionFailure{{SHA256: d('c'), MAC: "52:54:00:00:00:02", Reason: SectionISONotCached}}}},
		{"sanboot ISO not pinned", []ImageReport{kernel, initrd}, []ProxyDhcpEntry{{MAC: mac("52:54:00:00:00:03"), SanbootSHA256: d('e')}},
			SectionStatus{State: SectionFailed, Failures: []SectionFailure{{SHA256: d('e'), MAC: "52:54:00:00:00:03", Reason: SectionISONotPinned}}}},
		{"a raw image is not an ISO", []ImageReport{kernel, initrd}, []ProxyDhcpEntry{{MAC: mac("52:54:00:00:00:04"), SanbootSHA256: d('a')}},
			SectionStatus{State: SectionFailed, Failures: []SectionFailure{{SHA256: d('a'), MAC: "52:54:00:00:00:04", Reason: SectionISONotPinned}}}},
		{"images before entries, each sorted",
			[]ImageReport{{SHA256: d('b'), State: ImageFailed, Reason: "http-404"}, {SHA256: d('a'), State: ImageFailed, Reason: "digest-mismatch"}},
			[]ProxyDhcpEntry{{MAC: mac("52:54:00:00:00:09"), SanbootSHA256: d('c')}, {MAC: mac("52:54:00:00:00:05"), SanbootSHA256: d('c')}},
			SectionStatus{State: SectionFailed, Failures: []SectionFailure{
				{SHA256: d('a'), Reason: "digest-mismatch"}, {SHA256: d('b'), Reason: "http-404"},
				{SHA256: d('c'), MAC: "52:54:00:00:00:05", Reason: SectionISONotCached}, {SHA256: d('c'), MAC: "52:54:00:00:00:09", Reason: SectionISONotCached}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SiteSection(tc.images, pinned, tc.entries); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("SiteSection =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}
