package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strings"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/stmcginnis/gofish"
)

// Bounds on what one operation reads, whatever the BMC lists: members of one collection,
// chassis, and resources in all.
const (
	maxMembers = 64
	maxChassis = 8
	maxReads   = 512
)

// budget counts the resources one operation reads, so that a BMC listing without end
// (or a hostile one) costs a bounded number of requests.
type budget struct{ left int }

func newBudget() *budget { return &budget{left: maxReads} }

var errTooMany = errors.New("redfish: the BMC lists more resources than one operation reads")

func (b *budget) get(c *gofish.APIClient, p string, v any) (string, error) {
	if b.left <= 0 {
		return "", errTooMany
	}
	b.left--
	return getRaw(c, p, v)
}

type odataID struct {
	ID string `json:"@odata.id"`
}

type collection struct {
	Members []odataID
}

type rfSystem struct {
	UUID               string
	Manufacturer       string
	Model              string
	SerialNumber       string
	EthernetInterfaces odataID
	VirtualMedia       odataID
	Storage            odataID
	SimpleStorage      odataID
	Links              struct {
		Chassis   []odataID
		ManagedBy []odataID
	}
}

type ipAddr struct {
	Address string
}

type ethernetInterface struct {
	ID                    string `json:"Id"`
	Name                  string
	Description           string
	EthernetInterfaceType string
	MACAddress            string
	PermanentMACAddress   string
	InterfaceEnabled      *bool
	IPv4Addresses         []ipAddr
	IPv6Addresses         []ipAddr
	Links                 struct {
		HostInterface *odataID
	}
}

// members reads a collection's member ids (at most maxMembers). An empty id is no
// collection.
func (b *budget) members(c *gofish.APIClient, id string) ([]string, error) {
	if id == "" {
		return nil, nil
	}
	var coll collection
	if _, err := b.get(c, id, &coll); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range coll.Members {
		if m.ID != "" && len(out) < maxMembers {
			out = append(out, m.ID)
		}
	}
	return out, nil
}

func addrs(e ethernetInterface) []netip.Addr {
	var out []netip.Addr
	for _, a := range append(slices.Clone(e.IPv4Addresses), e.IPv6Addresses...) {
		ip, err := netip.ParseAddr(a.Address)
		if err != nil || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.Zone() != "" {
			continue
		}
		out = append(out, ip)
	}
	return out
}

func mac(e ethernetInterface) (hwid.MAC, bool) {
	for _, s := range []string{e.MACAddress, e.PermanentMACAddress} {
		if m, err := hwid.ParseMAC(s); err == nil && !m.IsZero() {
			return m, true
		}
	}
	return hwid.MAC{}, false
}

// placeholders are what BMCs put in SMBIOS strings nobody filled in.
var placeholders = []string{
	"to be filled by o.e.m.", "default string", "not specified", "not available", "not applicable",
	"system serial number", "system product name", "system manufacturer", "0123456789", "none", "n/a",
	"unknown", "invalid", "empty", "0", "00000000", "123456789", "xxxxxxxx",
}

// clean trims a BMC string of padding and drops placeholders.
func clean(s string) string {
	s = strings.TrimSpace(strings.Trim(s, "\x00"))
	if slices.Contains(placeholders, strings.ToLower(s)) || strings.Trim(s, ".-_ ") == "" {
		return ""
	}
	return s
}

// knownUUID reports whether u is a real system UUID: not all zeros and not all ones,
// the values firmware leaves when none was programmed.
func knownUUID(u hwid.UUID) bool {
	allZero, allFF := true, true
	for _, b := range u {
		allZero = allZero && b == 0
		allFF = allFF && b == 0xff
	}
	return !allZero && !allFF
}

// inspection collects what an inspection read and which parts failed.
type inspection struct {
	d     *Driver
	c     *gofish.APIClient
	b     *budget
	inv   bmc.Inventory
	seen  map[hwid.MAC]bool
	parts []bmc.PartError
}

func (in *inspection) fail(part string, err error) {
	in.parts = append(in.parts, bmc.PartError{Part: part, Err: in.d.classify("inspect", err)})
}

// Inspect implements bmc.Inspector. NICs are the system's physical EthernetInterfaces
// (virtual ones, such as VLANs, and the Redfish host interface to the BMC are left out)
// and the Ethernet functions of the chassis' NetworkAdapters (InfiniBand, Fibre Channel and
// untyped functions without an Ethernet capability are not PXE NICs), one entry per MAC.
// Strings are trimmed and SMBIOS placeholders dropped; an all-zero UUID is no UUID. BMC
// addresses are de-duplicated, without the USB and host-interface links to the host.
//
// Only the ComputerSystem is essential: when another part fails (a manager, a NIC, a
// chassis), the inventory holds what was read and the error is a *bmc.PartialError
// naming each failed part. NICsKnown is false when the system lists no interfaces at all
// or its interface collection could not be read.
func (d *Driver) Inspect(ctx context.Context) (bmc.Inventory, error) {
	var in *inspection
	err := d.do(ctx, "inspect", func(c *gofish.APIClient) error {
		in = &inspection{d: d, c: c, b: newBudget(), seen: map[hwid.MAC]bool{}}
		var sys rfSystem
		if _, err := in.b.get(c, d.sysPath, &sys); err != nil {
			return err
		}
		if u, err := hwid.ParseUUID(strings.TrimSpace(sys.UUID)); err == nil && knownUUID(u) {
			in.inv.UUID, in.inv.UUIDRaw, in.inv.HasUUID = u, u, true
		}
		in.inv.Manufacturer, in.inv.Model, in.inv.Serial = clean(sys.Manufacturer), clean(sys.Model), clean(sys.SerialNumber)

		in.inv.NICsKnown = sys.EthernetInterfaces.ID != ""
		ids, err := in.b.members(c, sys.EthernetInterfaces.ID)
		if err != nil {
			in.inv.NICsKnown = false
			in.fail("nics "+sys.EthernetInterfaces.ID, err)
		}
		for _, id := range ids {
			var e ethernetInterface
			if _, err := in.b.get(c, id, &e); err != nil {
				in.fail("nic "+id, err)
				continue
			}
			if e.Links.HostInterface != nil {
				continue // the host's side of the link to the BMC, not a boot NIC
			}
			a := addrs(e)
			in.inv.HostAddrs = appendNew(in.inv.HostAddrs, a...)
			m, ok := mac(e)
			if !ok || e.EthernetInterfaceType == "Virtual" || in.seen[m] {
				continue
			}
			in.seen[m] = true
			in.inv.NICs = append(in.inv.NICs, bmc.NIC{MAC: m, Name: e.ID, Source: "EthernetInterfaces", Addrs: a})
		}
		adapters := false
		for i, ch := range sys.Links.Chassis {
			if i >= maxChassis {
				break
			}
			if in.adapterNICs(ch.ID) {
				adapters = true
			}
		}
		if adapters && !in.inv.NICsKnown && sys.EthernetInterfaces.ID == "" {
			in.inv.NICsKnown = true // the adapters list the NICs
		}
		for i, m := range sys.Links.ManagedBy {
			if i >= 1 {
				break
			}
			in.bmcAddrs(m.ID)
		}
		return nil
	})
	if err != nil {
		return bmc.Inventory{}, err
	}
	if len(in.parts) > 0 {
		return in.inv, &bmc.PartialError{Driver: Name, Op: "inspect", Addr: d.target.Address, Parts: in.parts}
	}
	return in.inv, nil
}

func appendNew(dst []netip.Addr, add ...netip.Addr) []netip.Addr {
	for _, a := range add {
		if !slices.Contains(dst, a) {
			dst = append(dst, a)
		}
	}
	return dst
}

// adapterNICs adds the Ethernet functions of a chassis' NetworkAdapters and reports
// whether the chassis lists adapters at all.
func (in *inspection) adapterNICs(chassis string) bool {
	c, b := in.c, in.b
	var ch struct{ NetworkAdapters odataID }
	if _, err := b.get(c, chassis, &ch); err != nil {
		in.fail("chassis "+chassis, err)
		return false
	}
	if ch.NetworkAdapters.ID == "" {
		return false
	}
	adapters, err := b.members(c, ch.NetworkAdapters.ID)
	if err != nil {
		if !isStatus(err, 404) {
			in.fail("network-adapters "+ch.NetworkAdapters.ID, err)
		}
		return false
	}
	for _, na := range adapters {
		var a struct{ NetworkDeviceFunctions odataID }
		if _, err := b.get(c, na, &a); err != nil {
			in.fail("network-adapter "+na, err)
			continue
		}
		fns, err := b.members(c, a.NetworkDeviceFunctions.ID)
		if err != nil {
			if !isStatus(err, 404) {
				in.fail("network-functions "+a.NetworkDeviceFunctions.ID, err)
			}
			continue
		}
		for _, fn := range fns {
			var f struct {
				ID                     string `json:"Id"`
				NetDevFuncType         string
				NetDevFuncCapabilities []string
				Ethernet               *struct{ MACAddress, PermanentMACAddress string }
				InfiniBand             *json.RawMessage
			}
			if _, err := b.get(c, fn, &f); err != nil {
				in.fail("network-function "+fn, err)
				continue
			}
			ethernet := f.NetDevFuncType == "Ethernet" ||
				(f.NetDevFuncType == "" && slices.Contains(f.NetDevFuncCapabilities, "Ethernet") && f.InfiniBand == nil)
			if !ethernet || f.Ethernet == nil {
				continue
			}
			m, ok := mac(ethernetInterface{MACAddress: f.Ethernet.MACAddress, PermanentMACAddress: f.Ethernet.PermanentMACAddress})
			if !ok || in.seen[m] {
				continue
			}
			in.seen[m] = true
			in.inv.NICs = append(in.inv.NICs, bmc.NIC{MAC: m, Name: f.ID, Source: "NetworkAdapters"})
		}
	}
	return len(adapters) > 0
}

// hostLink reports whether a manager interface is a link to the host rather than the
// management network: one that links its Redfish host interface, or a USB gadget NIC
// (OpenBMC's usb0). An interface a host interface names as its ManagerEthernetInterface,
// without either, is not taken for one here: iDRAC names its management port (NIC.1)
// there (see bmcAddrs).
func hostLink(e ethernetInterface) bool {
	if e.Links.HostInterface != nil {
		return true
	}
	id := strings.ToLower(e.ID + " " + e.Name + " " + e.Description)
	return strings.Contains(id, "usb") || strings.Contains(id, "host interface")
}

func (in *inspection) bmcAddrs(manager string) {
	c, b := in.c, in.b
	var mgr struct {
		EthernetInterfaces odataID
		HostInterfaces     odataID
	}
	if _, err := b.get(c, manager, &mgr); err != nil {
		in.fail("manager "+manager, err)
		return
	}
	// The manager side of each host interface is named by the host interface itself.
	var hostIfaces []string
	if his, err := b.members(c, mgr.HostInterfaces.ID); err == nil {
		for _, hi := range his {
			var h struct {
				ManagerEthernetInterface odataID
			}
			if _, err := b.get(c, hi, &h); err == nil && h.ManagerEthernetInterface.ID != "" {
				hostIfaces = append(hostIfaces, h.ManagerEthernetInterface.ID)
			}
		}
	}
	ids, err := b.members(c, mgr.EthernetInterfaces.ID)
	if err != nil {
		if !isStatus(err, 404) {
			in.fail("manager-interfaces "+mgr.EthernetInterfaces.ID, err)
		}
		return
	}
	// An interface a host interface names is the host's side only where the manager has
	// another one: iDRAC's HostInterfaces/Host.1 names NIC.1, its only, management port.
	var named []ethernetInterface
	found := false
	for _, id := range ids {
		var e ethernetInterface
		if _, err := b.get(c, id, &e); err != nil {
			in.fail("manager-interface "+id, err)
			continue
		}
		if hostLink(e) || (e.InterfaceEnabled != nil && !*e.InterfaceEnabled) {
			continue
		}
		if slices.Contains(hostIfaces, id) {
			named = append(named, e)
			continue
		}
		found = in.bmcInterface(e) || found
	}
	if !found {
		for _, e := range named {
			in.bmcInterface(e)
		}
	}
}

// bmcInterface records a management interface's MAC (the first one's) and addresses, and
// reports whether it had either.
func (in *inspection) bmcInterface(e ethernetInterface) bool {
	m, ok := mac(e)
	if ok && in.inv.BMCMAC.IsZero() {
		in.inv.BMCMAC = m
	}
	a := addrs(e)
	in.inv.BMCAddrs = appendNew(in.inv.BMCAddrs, a...)
	return ok || len(a) > 0
}
