package redfish

import (
	"context"
	"errors"
	"net/netip"
	"slices"

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

// Inspect implements bmc.Inspector. NICs are the system's physical EthernetInterfaces
// (virtual ones, such as VLANs, and the Redfish host interface to the BMC are left out)
// and the Ethernet functions of the chassis' NetworkAdapters, one entry per MAC.
func (d *Driver) Inspect(ctx context.Context) (bmc.Inventory, error) {
	var inv bmc.Inventory
	err := d.do(ctx, "inspect", func(c *gofish.APIClient) error {
		inv = bmc.Inventory{NICsKnown: true}
		b := newBudget()
		var sys rfSystem
		if _, err := b.get(c, d.sysPath, &sys); err != nil {
			return err
		}
		if u, err := hwid.ParseUUID(sys.UUID); err == nil {
			inv.UUID, inv.UUIDRaw, inv.HasUUID = u, u, true
		}
		inv.Manufacturer, inv.Model, inv.Serial = sys.Manufacturer, sys.Model, sys.SerialNumber

		seen := map[hwid.MAC]bool{}
		ids, err := b.members(c, sys.EthernetInterfaces.ID)
		if err != nil && !isStatus(err, 404) {
			return err
		}
		for _, id := range ids {
			var e ethernetInterface
			if _, err := b.get(c, id, &e); err != nil {
				return err
			}
			if e.Links.HostInterface != nil {
				continue // the host's side of the link to the BMC, not a boot NIC
			}
			a := addrs(e)
			inv.HostAddrs = append(inv.HostAddrs, a...)
			m, ok := mac(e)
			if !ok || e.EthernetInterfaceType == "Virtual" || seen[m] {
				continue
			}
			seen[m] = true
			inv.NICs = append(inv.NICs, bmc.NIC{MAC: m, Name: e.ID, Source: "EthernetInterfaces", Addrs: a})
		}
		for i, ch := range sys.Links.Chassis {
			if i >= maxChassis {
				break
			}
			if err := d.adapterNICs(c, b, ch.ID, seen, &inv); err != nil {
				return err
			}
		}
		if len(sys.Links.ManagedBy) > 0 {
			if err := d.bmcAddrs(c, b, sys.Links.ManagedBy[0].ID, &inv); err != nil {
				return err
			}
		}
		return nil
	})
	return inv, err
}

func (d *Driver) adapterNICs(c *gofish.APIClient, b *budget, chassis string, seen map[hwid.MAC]bool, inv *bmc.Inventory) error {
	var ch struct{ NetworkAdapters odataID }
	if _, err := b.get(c, chassis, &ch); err != nil {
		if isStatus(err, 404) {
			return nil
		}
		return err
	}
	adapters, err := b.members(c, ch.NetworkAdapters.ID)
	if err != nil {
		if isStatus(err, 404) {
			return nil
		}
		return err
	}
	for _, na := range adapters {
		var a struct{ NetworkDeviceFunctions odataID }
		if _, err := b.get(c, na, &a); err != nil {
			return err
		}
		fns, err := b.members(c, a.NetworkDeviceFunctions.ID)
		if err != nil && !isStatus(err, 404) {
			return err
		}
		for _, fn := range fns {
			var f struct {
				ID             string `json:"Id"`
				NetDevFuncType string
				Ethernet       struct{ MACAddress, PermanentMACAddress string }
			}
			if _, err := b.get(c, fn, &f); err != nil {
				return err
			}
			if f.NetDevFuncType != "" && f.NetDevFuncType != "Ethernet" {
				continue
			}
			m, ok := mac(ethernetInterface{MACAddress: f.Ethernet.MACAddress, PermanentMACAddress: f.Ethernet.PermanentMACAddress})
			if !ok || seen[m] {
				continue
			}
			seen[m] = true
			inv.NICs = append(inv.NICs, bmc.NIC{MAC: m, Name: f.ID, Source: "NetworkAdapters"})
		}
	}
	return nil
}

func (d *Driver) bmcAddrs(c *gofish.APIClient, b *budget, manager string, inv *bmc.Inventory) error {
	var mgr struct{ EthernetInterfaces odataID }
	if _, err := b.get(c, manager, &mgr); err != nil {
		return err
	}
	ids, err := b.members(c, mgr.EthernetInterfaces.ID)
	if err != nil {
		if isStatus(err, 404) {
			return nil
		}
		return err
	}
	for _, id := range ids {
		var e ethernetInterface
		if _, err := b.get(c, id, &e); err != nil {
			return err
		}
		if e.Links.HostInterface != nil || (e.InterfaceEnabled != nil && !*e.InterfaceEnabled) {
			continue
		}
		if m, ok := mac(e); ok && inv.BMCMAC.IsZero() {
			inv.BMCMAC = m
		}
		inv.BMCAddrs = append(inv.BMCAddrs, addrs(e)...)
	}
	return nil
}
