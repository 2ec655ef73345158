package bmctest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// StorageOptions give the fake's system a RAID controller whose volumes can be created,
// read and deleted and whose drives can be erased (Options.Storage).
type StorageOptions struct {
	// Drives is the number of drives (Disk.0, Disk.1, ...), each DriveCapacity bytes;
	// zero means 4.
	Drives int
	// NoSecureErase leaves the drives without a Drive.SecureErase action; the volumes
	// then offer Volume.Initialize, as controllers that erase only by initializing a
	// volume do.
	NoSecureErase bool
	// KeepRAIDType makes the controller create every volume with this RAIDType, whatever
	// was asked, and still answer 201: a BMC that took the request and kept something
	// else.
	KeepRAIDType string
	// NoLocation answers a volume's creation 201 without a Location header, as some
	// BMCs do: the new volume is found by listing.
	NoLocation bool
}

// The controller Options.Storage adds (its path relative to the system's) and the
// capacity of each of its drives.
const (
	StorageController = "/Storage/RAID1"
	DriveCapacity     = int64(960197124096)
)

// StoragePath returns the path of the controller Options.Storage added.
func (s *Server) StoragePath() string { return s.sysPath + StorageController }

// Erasures returns the paths of the drives and volumes erased (SecureErase, Initialize),
// in order.
func (s *Server) Erasures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.erasures)
}

// addStorage gives the system its controller (Options.Storage). Called by NewServer.
func (s *Server) addStorage() {
	o := s.opts.Storage
	if o == nil {
		return
	}
	n := o.Drives
	if n <= 0 {
		n = 4
	}
	coll := s.sysPath + "/Storage"
	if s.res[coll] == nil {
		s.res[coll] = map[string]any{"@odata.id": coll, "Name": "Storage Collection", "Members": []any{}, "Members@odata.count": 0}
	}
	s.res[s.sysPath]["Storage"] = map[string]any{"@odata.id": coll}
	ctl := s.StoragePath()
	var drives []any
	for i := range n {
		p := fmt.Sprintf("%s/Drives/Disk.%d", ctl, i)
		d := map[string]any{"@odata.id": p, "Id": fmt.Sprintf("Disk.%d", i), "Name": fmt.Sprintf("Disk %d", i),
			"Model": "FAKE-SSD", "SerialNumber": fmt.Sprintf("S%04d", i), "CapacityBytes": DriveCapacity,
			"MediaType": "SSD", "Status": map[string]any{"State": "Enabled", "Health": "OK"}}
		if !o.NoSecureErase {
			d["Actions"] = map[string]any{"#Drive.SecureErase": map[string]any{"target": p + "/Actions/Drive.SecureErase"}}
		}
		s.res[p] = d
		drives = append(drives, map[string]any{"@odata.id": p})
	}
	s.res[ctl] = map[string]any{"@odata.id": ctl, "Id": "RAID1", "Name": "RAID controller", "Drives": drives,
		"Volumes": map[string]any{"@odata.id": ctl + "/Volumes"}, "Status": map[string]any{"State": "Enabled", "Health": "OK"}}
	s.res[ctl+"/Volumes"] = map[string]any{"@odata.id": ctl + "/Volumes", "Name": "Volume Collection", "Members": []any{},
		"Members@odata.count": 0}
	addMember(s.res[coll], ctl)
}

// postVolume creates a volume in the collection at p. Called under s.mu.
func (s *Server) postVolume(w http.ResponseWriter, p string, body []byte) {
	var in struct {
		Name          string
		RAIDType      string
		CapacityBytes *int64
		Links         struct {
			Drives []struct {
				ID string `json:"@odata.id"`
			}
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "malformed JSON body")
		return
	}
	if len(in.Links.Drives) == 0 {
		writeError(w, http.StatusBadRequest, "Base.1.8.PropertyMissing", "Links/Drives is required", "Links/Drives")
		return
	}
	min := map[string]int{"RAID0": 1, "RAID1": 2, "RAID5": 3, "RAID6": 4, "RAID10": 4}
	if in.RAIDType == "" || min[in.RAIDType] == 0 {
		writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", "RAIDType "+in.RAIDType+" is not supported", in.RAIDType, "RAIDType")
		return
	}
	if len(in.Links.Drives) < min[in.RAIDType] {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterValueError", in.RAIDType+" needs more drives", "Links/Drives")
		return
	}
	var links []any
	used := s.usedDrives()
	for _, d := range in.Links.Drives {
		dp := clean(d.ID)
		if s.res[dp] == nil || !strings.HasPrefix(dp, strings.TrimSuffix(p, "/Volumes")+"/Drives/") {
			writeError(w, http.StatusBadRequest, "Base.1.8.ResourceMissingAtURI", "no drive at "+d.ID, d.ID)
			return
		}
		if used[dp] {
			writeError(w, http.StatusConflict, "Base.1.8.ResourceInUse", "drive "+d.ID+" is in another volume")
			return
		}
		links = append(links, map[string]any{"@odata.id": dp})
	}
	raid := in.RAIDType
	if k := s.opts.Storage.KeepRAIDType; k != "" {
		raid = k
	}
	data := map[string]int{"RAID0": len(links), "RAID1": len(links) / 2, "RAID5": len(links) - 1, "RAID6": len(links) - 2, "RAID10": len(links) / 2}[raid]
	capacity := int64(data) * DriveCapacity
	if in.CapacityBytes != nil && *in.CapacityBytes > 0 && *in.CapacityBytes < capacity {
		capacity = *in.CapacityBytes
	}
	s.nextID++
	id := fmt.Sprintf("%d", s.nextID)
	vp := p + "/" + id
	v := map[string]any{"@odata.id": vp, "Id": id, "Name": in.Name, "RAIDType": raid, "CapacityBytes": capacity,
		"Links": map[string]any{"Drives": links}, "Status": map[string]any{"State": "Enabled", "Health": "OK"}}
	if s.opts.Storage.NoSecureErase {
		v["Actions"] = map[string]any{"#Volume.Initialize": map[string]any{"target": vp + "/Actions/Volume.Initialize",
			"InitializeType@Redfish.AllowableValues": []any{"Fast", "Slow"}}}
	}
	s.res[vp] = v
	addMember(s.res[p], vp)
	if !s.opts.Storage.NoLocation {
		w.Header().Set("Location", vp)
	}
	w.WriteHeader(http.StatusCreated)
}

// usedDrives returns the drives volumes hold. Called under s.mu.
func (s *Server) usedDrives() map[string]bool {
	used := map[string]bool{}
	for _, vp := range memberIDs(s.res[s.StoragePath()+"/Volumes"]) {
		links, _ := s.res[vp]["Links"].(map[string]any)
		ds, _ := links["Drives"].([]any)
		for _, d := range ds {
			if m, ok := d.(map[string]any); ok {
				id, _ := m["@odata.id"].(string)
				used[id] = true
			}
		}
	}
	return used
}

// storagePost answers a POST the storage handles (a volume's creation, an erase); false
// when p is none of its. Called under s.mu.
func (s *Server) storagePost(w http.ResponseWriter, p string, body []byte) bool {
	if s.opts.Storage == nil {
		return false
	}
	switch {
	case p == s.StoragePath()+"/Volumes":
		s.postVolume(w, p, body)
	case strings.HasSuffix(p, "/Actions/Drive.SecureErase") || strings.HasSuffix(p, "/Actions/Volume.Initialize"):
		rp := p[:strings.Index(p, "/Actions/")]
		if s.res[rp] == nil || !hasAction(s.res[rp], p[strings.Index(p, "/Actions/")+len("/Actions/"):]) {
			writeError(w, http.StatusNotFound, "Base.1.8.ActionNotSupported", "action not supported at "+p)
			return true
		}
		s.erasures = append(s.erasures, rp)
		w.WriteHeader(http.StatusNoContent)
	default:
		return false
	}
	return true
}

// storageDelete deletes a volume; false when p is none. Called under s.mu.
func (s *Server) storageDelete(w http.ResponseWriter, p string) bool {
	coll := s.StoragePath() + "/Volumes"
	if s.opts.Storage == nil || !strings.HasPrefix(p, coll+"/") || s.res[p] == nil {
		return false
	}
	delete(s.res, p)
	removeMember(s.res[coll], p)
	w.WriteHeader(http.StatusNoContent)
	return true
}
