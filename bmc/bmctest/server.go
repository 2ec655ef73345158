package bmctest

import (
	"crypto/sha256"
	"crypto/x509"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed testdata/public-rackmount1 testdata/hpe-dl325-ilo5 testdata/openbmc
var mockup embed.FS

// Mockup names a Redfish tree the fake serves (testdata/NAME; sources and licences in
// testdata/README.md).
type Mockup string

// Mockups.
const (
	// PublicRackmount1 is DMTF's public-rackmount1 mockup (the default).
	PublicRackmount1 Mockup = "public-rackmount1"
	// HPEDL325 is a Mockup Creator capture of an HPE ProLiant DL325 Gen10 Plus with iLO 5,
	// published by HPE in Cray-HPE/csm-redfish-interface-emulator (BSD-3-Clause).
	HPEDL325 Mockup = "hpe-dl325-ilo5"
	// OpenBMC is a Mockup Creator capture of a stock OpenBMC (bmcweb) service, from the
	// same repository.
	OpenBMC Mockup = "openbmc"
)

// Vendor selects a BMC's known deviations from the standard.
type Vendor string

// Vendors the fake can imitate.
const (
	// Generic follows the Redfish standard as the DMTF mockup does.
	Generic Vendor = ""
	// HPEiLO rejects BootSourceOverrideMode in a Boot PATCH (400
	// iLO.2.14.PropertyNotWritableOrUnknown), as an iLO 5 was seen to do (HPE documents
	// the property writable from iLO 5 v3.00: testdata/README.md). Combine it with
	// Mockup: HPEDL325 for the captured iLO 5 tree.
	HPEiLO Vendor = "hpe-ilo"
	// Supermicro rejects a Boot PATCH without BootSourceOverrideMode (400 PropertyMissing).
	Supermicro Vendor = "supermicro"
	// LenovoXCC rejects BootSourceOverrideEnabled "Continuous" (400 PropertyValueNotInList)
	// and caps sessions at 16 unless Options.MaxSessions says otherwise.
	LenovoXCC Vendor = "lenovo-xcc"
)

// Defaults.
const (
	DefaultUsername = "Administrator" // account 1 of the mockup
	DefaultPassword = "bmctest-password"
	// DefaultTaskPolls is how many task-monitor polls a firmware update stays running.
	DefaultTaskPolls = 2
	// XCCMaxSessions is LenovoXCC's session cap.
	XCCMaxSessions = 16
)

// Paths of the mockup's resources.
const (
	Root       = "/redfish/v1"
	SystemPath = "/redfish/v1/Systems/437XR1138R2"
	ManagerURI = "/redfish/v1/Managers/BMC"
	ChassisURI = "/redfish/v1/Chassis/1U"
	CD1Path    = SystemPath + "/VirtualMedia/CD1"
	CD2Path    = SystemPath + "/VirtualMedia/CD2"
	Account1   = "/redfish/v1/AccountService/Accounts/1"
	Account2   = "/redfish/v1/AccountService/Accounts/2"
)

// Options configure the fake. The zero value is a standards-following BMC with the DMTF
// data, the default credentials and VirtualMedia actions.
type Options struct {
	// Mockup is the tree served; empty means PublicRackmount1. The path constants below
	// (SystemPath, CD1Path, ...) are public-rackmount1's; Server.SystemPath works for all.
	Mockup Mockup
	Vendor Vendor
	// Username and Password of account 1; defaults DefaultUsername and DefaultPassword.
	// Account 2 (contoso_employee457) has the password "employee-password".
	Username string
	Password string
	// MaxSessions caps open sessions (a login beyond it is refused with 503); 0 means no
	// cap, or XCCMaxSessions for LenovoXCC.
	MaxSessions int
	// IfMatch412 answers 412 Precondition Failed to every action POST carrying If-Match.
	IfMatch412 bool
	// PatchIfMatch412 answers 412 to every PATCH carrying If-Match, whatever its value.
	PatchIfMatch412 bool
	// NoMediaActions serves VirtualMedia without InsertMedia/EjectMedia actions, as the DMTF
	// mockup file itself does; a client must PATCH the resource instead.
	NoMediaActions bool
	// NetworkAdapters adds a NetworkAdapter with two Ethernet NetworkDeviceFunctions to the
	// chassis (MACs 12:44:6A:3B:04:11, shared with EthernetInterfaces, and
	// B0:26:28:00:00:02, only listed there).
	NetworkAdapters bool
	// NoSystemEthernetInterfaces empties the system's EthernetInterfaces collection, so NICs
	// are found only through NetworkAdapters.
	NoSystemEthernetInterfaces bool
	// AllowHTTPBoot adds "UefiHttp" to the allowed BootSourceOverrideTarget values (the
	// mockup does not list it).
	AllowHTTPBoot bool
	// PowerOffPolls keeps the system "PoweringOff" for this many reads of it after a
	// ForceOff or GracefulShutdown, before it reports "Off".
	PowerOffPolls int
	// TaskPolls is how many task-monitor polls a firmware update stays running; 0 means
	// DefaultTaskPolls.
	TaskPolls int
	// FailUpdate makes firmware update tasks end in Exception.
	FailUpdate bool
	// TLS serves HTTPS with httptest's self-signed certificate.
	TLS bool

	// Patch200ErrorBody answers a Boot PATCH of the system with 200 and a Redfish error
	// body, and applies nothing: what an iDRAC was seen to do (no iDRAC capture is here).
	Patch200ErrorBody bool
	// OnceStoredAsContinuous answers a Boot PATCH that asks BootSourceOverrideEnabled Once with
	// 200, stores Continuous, and adds an @Message.ExtendedInfo note, as DSP0266 lets a
	// service that did not apply a property answer.
	OnceStoredAsContinuous bool
	// RequireIfMatch answers 428 Precondition Required to a PATCH without If-Match
	// (DSP0266 lets a service require it).
	RequireIfMatch bool
	// ModeDependentTargets lists UefiHttp among the allowed boot targets only while
	// BootSourceOverrideMode is UEFI, as sushy-emulator does.
	ModeDependentTargets bool
	// MediaInsertFails makes InsertMedia record the image as inserted and then answer
	// 500, as sushy-emulator did when attaching failed after the download.
	MediaInsertFails bool
	// FirmwareNoContent answers SimpleUpdate with 204 and the Location of the task
	// resource (sushy-emulator's answer) instead of 202 and a task monitor.
	FirmwareNoContent bool
	// TaskMonitorGone makes a task monitor answer 404 from the poll on which its task
	// ends, as a service that deletes monitors of finished tasks does; the task resource
	// stays.
	TaskMonitorGone bool
	// NoBootMode serves the system's Boot without BootSourceOverrideMode (nor its allowed
	// values) and answers a Boot PATCH that carries it with 400 PropertyUnknown, as OpenBMC
	// on NVIDIA GB200 does: such a BMC neither reports nor accepts a mode.
	NoBootMode bool
	// NoSessionService serves a service root without SessionService or Links.Sessions,
	// as sushy-emulator does: only basic auth logs in.
	NoSessionService bool

	// BootSettingsObject, when set, is the path of a settings object (DSP0266
	// @Redfish.Settings) that holds the system's pending boot override: the system carries
	// "@Redfish.Settings" pointing there, its own Boot is read-only (a Boot PATCH of the
	// system is 400 PropertyNotWritable, as on iDRAC10: bmclib #461), and the override
	// written there applies at the next boot of the host. IDRAC10Settings and AMIFutureState
	// are the two paths vendors use.
	BootSettingsObject string
	// ForgetBootAfterReads makes the system forget an accepted boot override (back to
	// Disabled) after this many reads of the system that follow the PATCH, as a
	// Supermicro AMI BMC did a few seconds after answering 200 (bmclib #459).
	ForgetBootAfterReads int

	// Virtual media variants (sushy's release notes name the vendors).

	// MediaActions405 advertises InsertMedia and EjectMedia on the drives but answers
	// them 405 Method Not Allowed; only a PATCH of the drive works.
	MediaActions405 bool
	// EjectNeedsBody answers an EjectMedia POST without a body 400 MalformedJSON: iLO wants
	// an empty JSON object, {}.
	EjectNeedsBody bool
	// RequireTransferProtocolType answers an insert (action or PATCH) without
	// TransferProtocolType 400 ActionParameterMissing, as Nokia's BMC does.
	RequireTransferProtocolType bool
	// DVDOnlyMedia makes CD1's MediaTypes ["DVD"] and CD2's ["USBStick"], as Cisco UCS
	// lists its slots.
	DVDOnlyMedia bool
	// UsbCdTarget lists UsbCd instead of Cd among the allowed boot targets, and boots a
	// virtual CD only from UsbCd, as Supermicro does.
	UsbCdTarget bool
	// IDRAC10MediaSlots lists the system's virtual media as iDRAC10 does, the second CD
	// slot before the first (Floppy1, CD2, CD1; both CDs take CD and DVD), where only the
	// first slot boots (dell/iDRAC-Redfish-Scripting #324).
	IDRAC10MediaSlots bool

	// RefuseWrites answers the next this many PATCHes and action POSTs (not logins) with
	// RefuseStatus and a Redfish error whose MessageId is RefuseID, acting on none of them:
	// a BMC that refuses for a while (iDRAC SYS518 while reloading, iLO's
	// InvalidOperationForSystemState right after a power change).
	RefuseWrites int
	RefuseID     string
	RefuseStatus int

	// Firmware tasks that vanish or lie.

	// UpdateVersion is the Version a completed firmware update gives the inventory's BMC
	// entry (UpdateService/FirmwareInventory/BMC on public-rackmount1).
	UpdateVersion string
	// TaskVanishes deletes a firmware task and its monitor as it completes, as iDRAC
	// below 5.00 does a minute after a task ends: the next poll is 404.
	TaskVanishes bool
	// TaskStaysRunning applies the update when the task would complete but leaves the task
	// reading Running, as iDRAC has shown a finished update still processing.
	TaskStaysRunning bool
	// NoTaskMonitor answers SimpleUpdate 202 with neither a Location nor a body, as iLO
	// does; the update applies at once.
	NoTaskMonitor bool

	// Faults add latency, busy answers and power changes that revert (faults.go).
	Faults Faults

	// Storage, when set, gives the system a RAID controller with drives and volumes
	// (storage.go).
	Storage *StorageOptions
}

// Settings-object paths for Options.BootSettingsObject (relative to the system for
// IDRAC10Settings; absolute for AMIFutureState, which some AMI/ASRock BMCs serve as
// /redfish/v1/Systems/Self/SD: Redfish-Tacklebox #144).
const (
	IDRAC10Settings = "Settings"
	AMIFutureState  = "/redfish/v1/Systems/Self/SD"
)

// Request is one request the fake received.
type Request struct {
	Method string
	Path   string
	// Body is the request body as received (at most 1 MiB).
	Body string
	// IfMatch is the If-Match header, if any.
	IfMatch string
	// Auth is "session", "basic" or "" (none, or not accepted).
	Auth string
	// Status is the HTTP status the fake answered.
	Status int
}

// JSON decodes Body into a map (nil if it is not a JSON object).
func (r Request) JSON() map[string]any {
	var m map[string]any
	if json.Unmarshal([]byte(r.Body), &m) != nil {
		return nil
	}
	return m
}

// Boot is one boot of the host the fake simulated (a power-on or restart).
type Boot struct {
	// Target and Mode are the boot override that applied ("None" when disabled).
	Target string
	Mode   string
}

type session struct {
	user string
	path string
}

type task struct {
	id    string
	polls int
	image string
}

// Server is a fake Redfish BMC over httptest.
type Server struct {
	// URL is the base URL (http://127.0.0.1:PORT or https://...).
	URL string

	srv  *httptest.Server
	opts Options

	mu        sync.Mutex
	res       map[string]map[string]any
	passwords map[string]string
	sessions  map[string]session // token -> session
	nextID    int
	tasks     map[string]*task
	reqs      []Request
	boots     []Boot
	updates   []string
	offPolls  int // reads of the system left before PoweringOff becomes Off
	// forget counts the reads of the system left before a boot override is forgotten
	// (ForgetBootAfterReads); negative means none is pending.
	forget   int
	settings string // the settings object's path (BootSettingsObject)
	sysPath  string
	faults   faultState
	erasures []string
}

// SystemPath returns the path of the ComputerSystem the fake serves (the first one).
func (s *Server) SystemPath() string { return s.sysPath }

// Delete removes the resource at p (and its listing in the collection at coll, when
// given), so that reading it answers 404: a part of the BMC that has gone away.
func (s *Server) Delete(p, coll string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.res, clean(p))
	if c := s.res[clean(coll)]; c != nil {
		removeMember(c, clean(p))
	}
}

// NewServer starts a fake BMC on a loopback port. Close it when done.
func NewServer(opts Options) *Server {
	if opts.Username == "" {
		opts.Username = DefaultUsername
	}
	if opts.Password == "" {
		opts.Password = DefaultPassword
	}
	if opts.TaskPolls <= 0 {
		opts.TaskPolls = DefaultTaskPolls
	}
	if opts.MaxSessions == 0 && opts.Vendor == LenovoXCC {
		opts.MaxSessions = XCCMaxSessions
	}
	s := &Server{
		opts:      opts,
		res:       make(map[string]map[string]any),
		passwords: map[string]string{opts.Username: opts.Password, "contoso_employee457": "employee-password"},
		sessions:  make(map[string]session),
		tasks:     make(map[string]*task),
		nextID:    1000,
		forget:    -1,
	}
	s.faults.init(opts.Faults)
	if err := s.load(); err != nil {
		panic("bmctest: embedded mockup: " + err.Error())
	}
	s.addStorage()
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are what TLS tests provoke
	if opts.TLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	s.URL = s.srv.URL
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Client returns an HTTP client that trusts the server's certificate.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Certificate returns the server's TLS certificate, or nil without TLS.
func (s *Server) Certificate() *x509.Certificate { return s.srv.Certificate() }

// CertificateSHA256 returns the SHA-256 of the server's TLS certificate (DER), or nil
// without TLS.
func (s *Server) CertificateSHA256() []byte {
	c := s.srv.Certificate()
	if c == nil {
		return nil
	}
	sum := sha256.Sum256(c.Raw)
	return sum[:]
}

// Requests returns the requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = nil
}

// Resource returns a deep copy of the resource at p (nil if there is none).
func (s *Server) Resource(p string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.res[clean(p)]
	if r == nil {
		return nil
	}
	return deepCopy(r).(map[string]any)
}

// Sessions returns how many sessions are open.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Password returns the current password of user ("" if there is no such user).
func (s *Server) Password(user string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.passwords[user]
}

// ExpireSessions ends every session, as a BMC's session timeout does; the session
// resources disappear and their tokens get 401.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, ss := range s.sessions {
		delete(s.res, ss.path)
		removeMember(s.res["/redfish/v1/SessionService/Sessions"], ss.path)
		delete(s.sessions, tok)
	}
}

// Boots returns the host boots simulated so far.
func (s *Server) Boots() []Boot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.boots)
}

// Updates returns the image URIs of firmware updates that completed.
func (s *Server) Updates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.updates)
}

// SetPowerState sets the system's PowerState ("On" or "Off") without recording a boot.
func (s *Server) SetPowerState(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res[s.sysPath]["PowerState"] = state
}

// Put adds or replaces the resource at p (its "@odata.id" is set to p), and lists it in
// the collection at coll when coll is not empty. Tests use it to give the BMC resources
// the mockup lacks.
func (s *Server) Put(p, coll string, v map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := deepCopy(v).(map[string]any)
	r["@odata.id"] = clean(p)
	s.res[clean(p)] = r
	if c := s.res[clean(coll)]; c != nil && !slices.Contains(memberIDs(c), clean(p)) {
		addMember(c, clean(p))
	}
}

// Patch merges v into the resource at p, as if the BMC had changed it by itself.
func (s *Server) Patch(p string, v map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.res[clean(p)]; r != nil {
		merge(r, deepCopy(v).(map[string]any))
	}
}

func (s *Server) load() error {
	if s.opts.Mockup == "" {
		s.opts.Mockup = PublicRackmount1
	}
	base := "testdata/" + string(s.opts.Mockup)
	err := fs.WalkDir(mockup, base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Base(p) != "index.json" {
			return err
		}
		b, err := mockup.ReadFile(p)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(path.Dir(p), base), "/")
		s.res[clean(Root+rel)] = m
		return nil
	})
	if err != nil {
		return err
	}
	if len(s.res) == 0 {
		return fmt.Errorf("no mockup %q", s.opts.Mockup)
	}
	systems := memberIDs(s.res["/redfish/v1/Systems"])
	if len(systems) == 0 || s.res[systems[0]] == nil {
		return fmt.Errorf("mockup %q lists no ComputerSystem", s.opts.Mockup)
	}
	s.sysPath = systems[0]
	// No sessions exist until someone logs in.
	if ss := s.res["/redfish/v1/SessionService/Sessions"]; ss != nil {
		setMembers(ss, nil)
	}
	if s.opts.NoSessionService {
		root := s.res[Root]
		delete(root, "SessionService")
		if l, ok := root["Links"].(map[string]any); ok {
			delete(l, "Sessions")
		}
		delete(s.res, "/redfish/v1/SessionService")
		delete(s.res, "/redfish/v1/SessionService/Sessions")
	}
	if s.opts.NoBootMode {
		if boot, ok := s.res[s.sysPath]["Boot"].(map[string]any); ok {
			delete(boot, "BootSourceOverrideMode")
			delete(boot, "BootSourceOverrideMode@Redfish.AllowableValues")
		}
	}
	if so := s.opts.BootSettingsObject; so != "" {
		if !strings.HasPrefix(so, "/") {
			so = s.sysPath + "/" + so
		}
		s.settings = clean(so)
		sys := s.res[s.sysPath]
		sys["@Redfish.Settings"] = map[string]any{
			"@odata.type":    "#Settings.v1_3_5.Settings",
			"SettingsObject": map[string]any{"@odata.id": s.settings},
		}
		boot := map[string]any{}
		for k, v := range sys["Boot"].(map[string]any) {
			if !strings.Contains(k, "@") {
				boot[k] = v
			}
		}
		s.res[s.settings] = map[string]any{"@odata.id": s.settings, "@odata.type": sys["@odata.type"],
			"Id": path.Base(s.settings), "Name": "Pending settings", "Boot": boot}
	}
	if s.opts.Mockup != PublicRackmount1 {
		return nil
	}
	// The mockup lists one account in the collection though two exist; list both.
	setMembers(s.res["/redfish/v1/AccountService/Accounts"], []string{Account1, Account2})
	// Task collection: the mockup's count is stale; keep its members and fix the count.
	tasks := s.res["/redfish/v1/TaskService/Tasks"]
	setMembers(tasks, memberIDs(tasks))

	sys := s.res[SystemPath]
	if s.opts.AllowHTTPBoot {
		boot := sys["Boot"].(map[string]any)
		allowed := boot["BootSourceOverrideTarget@Redfish.AllowableValues"].([]any)
		boot["BootSourceOverrideTarget@Redfish.AllowableValues"] = append(allowed, "UefiHttp")
	}
	if !s.opts.NoMediaActions {
		for _, id := range []string{"CD1", "CD2", "Floppy1"} {
			p := SystemPath + "/VirtualMedia/" + id
			s.res[p]["Actions"] = map[string]any{
				"#VirtualMedia.InsertMedia": map[string]any{"target": p + "/Actions/VirtualMedia.InsertMedia"},
				"#VirtualMedia.EjectMedia":  map[string]any{"target": p + "/Actions/VirtualMedia.EjectMedia"},
			}
		}
	}
	if s.opts.DVDOnlyMedia {
		s.res[CD1Path]["MediaTypes"] = []any{"DVD"}
		s.res[CD2Path]["MediaTypes"] = []any{"USBStick"}
	}
	if s.opts.IDRAC10MediaSlots {
		setMembers(s.res[SystemPath+"/VirtualMedia"], []string{SystemPath + "/VirtualMedia/Floppy1", CD2Path, CD1Path})
	}
	if s.opts.UsbCdTarget {
		boot := sys["Boot"].(map[string]any)
		var out []any
		for _, t := range boot["BootSourceOverrideTarget@Redfish.AllowableValues"].([]any) {
			if t == "Cd" {
				t = "UsbCd"
			}
			out = append(out, t)
		}
		boot["BootSourceOverrideTarget@Redfish.AllowableValues"] = out
	}
	if s.opts.NoSystemEthernetInterfaces {
		setMembers(s.res[SystemPath+"/EthernetInterfaces"], nil)
	}
	if s.opts.NetworkAdapters {
		s.addNetworkAdapters()
	}
	return nil
}

// addNetworkAdapters adds a two-port adapter to the chassis. This data is ours, shaped like
// the DMTF NetworkAdapter and NetworkDeviceFunction schemas.
func (s *Server) addNetworkAdapters() {
	nas := ChassisURI + "/NetworkAdapters"
	s.res[ChassisURI]["NetworkAdapters"] = map[string]any{"@odata.id": nas}
	s.res[nas] = map[string]any{
		"@odata.type": "#NetworkAdapterCollection.NetworkAdapterCollection",
		"@odata.id":   nas,
		"Name":        "Network Adapter Collection",
	}
	na := nas + "/NIC1"
	setMembers(s.res[nas], []string{na})
	s.res[na] = map[string]any{
		"@odata.type":            "#NetworkAdapter.v1_9_0.NetworkAdapter",
		"@odata.id":              na,
		"Id":                     "NIC1",
		"Name":                   "Dual-port 25GbE adapter",
		"Manufacturer":           "Contoso",
		"Model":                  "CX-25G2",
		"NetworkDeviceFunctions": map[string]any{"@odata.id": na + "/NetworkDeviceFunctions"},
	}
	fns := na + "/NetworkDeviceFunctions"
	s.res[fns] = map[string]any{
		"@odata.type": "#NetworkDeviceFunctionCollection.NetworkDeviceFunctionCollection",
		"@odata.id":   fns,
		"Name":        "Network Device Function Collection",
	}
	setMembers(s.res[fns], []string{fns + "/1", fns + "/2"})
	for i, mac := range []string{"12:44:6A:3B:04:11", "B0:26:28:00:00:02"} {
		id := strconv.Itoa(i + 1)
		s.res[fns+"/"+id] = map[string]any{
			"@odata.type":            "#NetworkDeviceFunction.v1_9_0.NetworkDeviceFunction",
			"@odata.id":              fns + "/" + id,
			"Id":                     id,
			"Name":                   "Port " + id,
			"NetDevFuncType":         "Ethernet",
			"NetDevFuncCapabilities": []any{"Ethernet"},
			"BootMode":               "PXE",
			"Ethernet":               map[string]any{"MACAddress": mac, "PermanentMACAddress": mac},
		}
	}
}

func setMembers(coll map[string]any, ids []string) {
	members := make([]any, 0, len(ids))
	for _, id := range ids {
		members = append(members, map[string]any{"@odata.id": id})
	}
	coll["Members"] = members
	coll["Members@odata.count"] = float64(len(ids))
}

func memberIDs(coll map[string]any) []string {
	var ids []string
	ms, _ := coll["Members"].([]any)
	for _, m := range ms {
		if mm, ok := m.(map[string]any); ok {
			if id, ok := mm["@odata.id"].(string); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

func addMember(coll map[string]any, id string) { setMembers(coll, append(memberIDs(coll), id)) }

func removeMember(coll map[string]any, id string) {
	setMembers(coll, slices.DeleteFunc(memberIDs(coll), func(m string) bool { return m == id }))
}

func clean(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	p = path.Clean("/" + p)
	return p
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	arrived := time.Now()
	s.delay(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.arrived = arrived
	req := Request{Method: r.Method, Path: r.URL.Path, Body: string(body), IfMatch: r.Header.Get("If-Match")}
	user, auth := s.authenticate(r)
	req.Auth = auth
	if !s.transient(rec, r) {
		s.serve(rec, r, clean(r.URL.Path), body, user)
	}
	req.Status = rec.status
	s.reqs = append(s.reqs, req)
}

type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) authenticate(r *http.Request) (user, how string) {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		if ss, ok := s.sessions[tok]; ok {
			return ss.user, "session"
		}
		return "", ""
	}
	if u, p, ok := r.BasicAuth(); ok {
		if pw, ok := s.passwords[u]; ok && pw == p {
			return u, "basic"
		}
	}
	return "", ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, p string, body []byte, user string) {
	public := (r.Method == http.MethodGet && (p == Root || p == "/redfish")) ||
		(r.Method == http.MethodPost && p == "/redfish/v1/SessionService/Sessions")
	if user == "" && !public {
		writeError(w, http.StatusUnauthorized, "Base.1.8.InsufficientPrivilege", "authentication required")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.get(w, p)
	case http.MethodPatch, http.MethodPost:
		if s.opts.RefuseWrites > 0 && p != "/redfish/v1/SessionService/Sessions" {
			s.opts.RefuseWrites--
			writeError(w, s.opts.RefuseStatus, s.opts.RefuseID, "The request was refused for now ("+s.opts.RefuseID+").")
			return
		}
		if r.Method == http.MethodPatch {
			s.patch(w, r, p, body)
		} else {
			s.post(w, r, p, body, user)
		}
	case http.MethodDelete:
		s.delete(w, p)
	default:
		writeError(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", "method not allowed")
	}
}

func (s *Server) get(w http.ResponseWriter, p string) {
	if p == "/redfish" {
		writeJSON(w, http.StatusOK, map[string]any{"v1": "/redfish/v1/"}, "")
		return
	}
	if strings.HasPrefix(p, "/redfish/v1/TaskService/TaskMonitors/") {
		s.pollTask(w, path.Base(p))
		return
	}
	res := s.res[p]
	if res == nil {
		writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no resource at "+p)
		return
	}
	s.countRevert(p)
	if p == s.sysPath && s.forget >= 0 {
		if s.forget--; s.forget < 0 {
			res["Boot"].(map[string]any)["BootSourceOverrideEnabled"] = "Disabled"
		}
	}
	if p == s.sysPath && res["PowerState"] == "PoweringOff" {
		if s.offPolls--; s.offPolls < 0 {
			res["PowerState"] = "Off"
		}
	}
	if p == s.sysPath && s.opts.ModeDependentTargets {
		out := deepCopy(res).(map[string]any)
		boot := out["Boot"].(map[string]any)
		boot["BootSourceOverrideTarget@Redfish.AllowableValues"] = s.allowedTargets(boot)
		writeJSON(w, http.StatusOK, out, etag(res))
		return
	}
	writeJSON(w, http.StatusOK, res, etag(res))
}

// allowedTargets are the system's allowed boot targets in its current mode: without
// UefiHttp unless the mode is UEFI (ModeDependentTargets).
func (s *Server) allowedTargets(boot map[string]any) []any {
	allowed, _ := boot["BootSourceOverrideTarget@Redfish.AllowableValues"].([]any)
	out := []any{}
	for _, t := range allowed {
		if t != "UefiHttp" || boot["BootSourceOverrideMode"] == "UEFI" {
			out = append(out, t)
		}
	}
	if boot["BootSourceOverrideMode"] == "UEFI" && !slices.Contains(out, any("UefiHttp")) {
		out = append(out, "UefiHttp")
	}
	return out
}

func (s *Server) patch(w http.ResponseWriter, r *http.Request, p string, body []byte) {
	res := s.res[p]
	if res == nil {
		writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no resource at "+p)
		return
	}
	if s.opts.RequireIfMatch && r.Header.Get("If-Match") == "" {
		writeError(w, http.StatusPreconditionRequired, "Base.1.8.PreconditionRequired", "If-Match is required")
		return
	}
	if im := r.Header.Get("If-Match"); im != "" && (s.opts.PatchIfMatch412 || (im != "*" && im != etag(res))) {
		writeError(w, http.StatusPreconditionFailed, "Base.1.8.PreconditionFailed", "ETag does not match")
		return
	}
	var in map[string]any
	if err := json.Unmarshal(body, &in); err != nil || in == nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "malformed JSON body")
		return
	}
	switch {
	case p == s.sysPath:
		if bad := s.checkSystemPatch(w, res, in); bad {
			return
		}
		if b, ok := in["Boot"].(map[string]any); ok {
			if s.settings != "" {
				writeError(w, http.StatusBadRequest, "Base.1.8.PropertyNotWritable",
					"The property Boot is a read only property and cannot be assigned a value.", "Boot")
				return
			}
			if s.opts.ForgetBootAfterReads > 0 {
				s.forget = s.opts.ForgetBootAfterReads
			}
			if s.opts.Patch200ErrorBody {
				writeJSON(w, http.StatusOK, map[string]any{"error": map[string]any{
					"code": "Base.1.8.GeneralError", "message": "A general error has occurred.",
					"@Message.ExtendedInfo": []any{map[string]any{"MessageId": "IDRAC.2.8.SYS403",
						"Message": "The boot override could not be applied.", "Severity": "Critical"}},
				}}, "")
				return
			}
			if s.opts.OnceStoredAsContinuous && b["BootSourceOverrideEnabled"] == "Once" {
				b["BootSourceOverrideEnabled"] = "Continuous"
				merge(res, in)
				out := deepCopy(res).(map[string]any)
				out["@Message.ExtendedInfo"] = []any{map[string]any{"MessageId": "Base.1.8.PropertyValueModified",
					"Message":  "The property BootSourceOverrideEnabled was assigned the value Continuous due to modification by the service.",
					"Severity": "Warning"}}
				writeJSON(w, http.StatusOK, out, etag(res))
				return
			}
		}
	case strings.HasPrefix(p, "/redfish/v1/AccountService/Accounts/"):
		if pw, ok := in["Password"].(string); ok {
			s.passwords[res["UserName"].(string)] = pw
			delete(in, "Password")
		}
	case strings.Contains(p, "/VirtualMedia/"):
		if ins, ok := in["Inserted"].(bool); ok && !ins {
			in["Image"] = nil
			in["ImageName"] = nil
			in["ConnectedVia"] = "NotConnected"
		} else if img, ok := in["Image"].(string); ok && img != "" {
			if s.opts.RequireTransferProtocolType && in["TransferProtocolType"] == nil {
				writeError(w, http.StatusBadRequest, "Base.1.8.PropertyMissing", "TransferProtocolType is required",
					"TransferProtocolType")
				return
			}
			in["ConnectedVia"] = "URI"
			in["ImageName"] = path.Base(img)
		}
	}
	merge(res, in)
	writeJSON(w, http.StatusOK, res, etag(res))
}

// checkSystemPatch applies the vendor rules to a ComputerSystem PATCH and answers the
// error itself when one applies.
func (s *Server) checkSystemPatch(w http.ResponseWriter, sys, in map[string]any) bool {
	b, ok := in["Boot"].(map[string]any)
	if !ok {
		return false
	}
	_, hasMode := b["BootSourceOverrideMode"]
	if hasMode && s.opts.NoBootMode {
		writeError(w, http.StatusBadRequest, "Base.1.8.PropertyUnknown",
			"The property BootSourceOverrideMode is not in the list of valid properties for the resource.",
			"BootSourceOverrideMode")
		return true
	}
	switch s.opts.Vendor {
	case HPEiLO:
		if hasMode {
			writeError(w, http.StatusBadRequest, "iLO.2.14.PropertyNotWritableOrUnknown",
				"The property BootSourceOverrideMode is read-only or unknown.", "BootSourceOverrideMode")
			return true
		}
	case Supermicro:
		if !hasMode {
			writeError(w, http.StatusBadRequest, "Base.1.8.PropertyMissing",
				"The property BootSourceOverrideMode is a required property and must be included in the request.",
				"BootSourceOverrideMode")
			return true
		}
	case LenovoXCC:
		if b["BootSourceOverrideEnabled"] == "Continuous" {
			writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList",
				"The value Continuous for the property BootSourceOverrideEnabled is not in the list of acceptable values.",
				"Continuous", "BootSourceOverrideEnabled")
			return true
		}
	}
	cur := sys["Boot"].(map[string]any)
	if t, ok := b["BootSourceOverrideTarget"]; ok {
		allowed, _ := cur["BootSourceOverrideTarget@Redfish.AllowableValues"].([]any)
		if s.opts.ModeDependentTargets {
			allowed = s.allowedTargets(cur)
			if m, ok := b["BootSourceOverrideMode"]; ok && m == "UEFI" {
				allowed = append(allowed, "UefiHttp")
			}
		}
		if !slices.Contains(allowed, t) {
			writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList",
				fmt.Sprintf("The value %v for the property BootSourceOverrideTarget is not in the list of acceptable values.", t),
				fmt.Sprint(t), "BootSourceOverrideTarget")
			return true
		}
	}
	if e, ok := b["BootSourceOverrideEnabled"]; ok && e != "Once" && e != "Continuous" && e != "Disabled" {
		writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList",
			fmt.Sprintf("The value %v for the property BootSourceOverrideEnabled is not in the list of acceptable values.", e),
			fmt.Sprint(e), "BootSourceOverrideEnabled")
		return true
	}
	if m, ok := b["BootSourceOverrideMode"]; ok && m != "UEFI" && m != "Legacy" {
		writeError(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList",
			fmt.Sprintf("The value %v for the property BootSourceOverrideMode is not in the list of acceptable values.", m),
			fmt.Sprint(m), "BootSourceOverrideMode")
		return true
	}
	return false
}

func (s *Server) post(w http.ResponseWriter, r *http.Request, p string, body []byte, user string) {
	var in map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "malformed JSON body")
			return
		}
	}
	if in == nil {
		in = map[string]any{}
	}
	if p == "/redfish/v1/SessionService/Sessions" {
		s.login(w, in)
		return
	}
	if s.storagePost(w, p, body) {
		return
	}
	i := strings.Index(p, "/Actions/")
	if i < 0 {
		writeError(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", "POST not allowed at "+p)
		return
	}
	resPath, action := p[:i], p[i+len("/Actions/"):]
	res := s.res[resPath]
	if res == nil || !hasAction(res, action) {
		writeError(w, http.StatusNotFound, "Base.1.8.ActionNotSupported", "action "+action+" not supported")
		return
	}
	if s.opts.IfMatch412 && r.Header.Get("If-Match") != "" {
		writeError(w, http.StatusPreconditionFailed, "Base.1.8.PreconditionFailed", "If-Match is not supported on actions")
		return
	}
	if s.opts.MediaActions405 && strings.HasPrefix(action, "VirtualMedia.") {
		writeError(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", "POST not allowed at "+p)
		return
	}
	if s.opts.RequireTransferProtocolType && action == "VirtualMedia.InsertMedia" && in["TransferProtocolType"] == nil {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterMissing", "TransferProtocolType is required",
			"TransferProtocolType")
		return
	}
	if s.opts.EjectNeedsBody && action == "VirtualMedia.EjectMedia" && len(body) == 0 {
		writeError(w, http.StatusBadRequest, "Base.1.8.MalformedJSON", "The request body submitted was malformed JSON.")
		return
	}
	switch action {
	case "ComputerSystem.Reset":
		s.reset(w, res, in)
	case "VirtualMedia.InsertMedia":
		img, _ := in["Image"].(string)
		if img == "" {
			writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterMissing", "Image is required", "Image")
			return
		}
		if res["Inserted"] == true && res["Image"] != nil && res["Image"] != "" {
			writeError(w, http.StatusConflict, "Base.1.8.ResourceInUse", "media already inserted")
			return
		}
		res["Image"], res["ImageName"], res["Inserted"], res["ConnectedVia"] = img, path.Base(img), true, "URI"
		if wp, ok := in["WriteProtected"].(bool); ok {
			res["WriteProtected"] = wp
		}
		if s.opts.MediaInsertFails {
			writeError(w, http.StatusInternalServerError, "Base.1.8.InternalError",
				"The request failed due to an internal service error.")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "VirtualMedia.EjectMedia":
		res["Image"], res["ImageName"], res["Inserted"], res["ConnectedVia"] = nil, nil, false, "NotConnected"
		w.WriteHeader(http.StatusNoContent)
	case "UpdateService.SimpleUpdate":
		s.simpleUpdate(w, in)
	case "ManagerAccount.ChangePassword":
		np, _ := in["NewPassword"].(string)
		sp, _ := in["SessionAccountPassword"].(string)
		if np == "" {
			writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterMissing", "NewPassword is required", "NewPassword")
			return
		}
		if sp != s.passwords[user] {
			writeError(w, http.StatusForbidden, "Base.1.8.InsufficientPrivilege", "SessionAccountPassword does not match")
			return
		}
		s.passwords[res["UserName"].(string)] = np
		w.WriteHeader(http.StatusNoContent)
	default:
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionNotSupported", "action "+action+" not supported by the fake")
	}
}

func hasAction(res map[string]any, action string) bool {
	acts, _ := res["Actions"].(map[string]any)
	_, ok := acts["#"+action]
	return ok
}

func (s *Server) login(w http.ResponseWriter, in map[string]any) {
	u, _ := in["UserName"].(string)
	p, _ := in["Password"].(string)
	if pw, ok := s.passwords[u]; !ok || pw != p || u == "" {
		writeError(w, http.StatusUnauthorized, "Base.1.8.NoValidSession", "invalid username or password")
		return
	}
	if s.opts.MaxSessions > 0 && len(s.sessions) >= s.opts.MaxSessions {
		writeError(w, http.StatusServiceUnavailable, "Base.1.8.SessionLimitExceeded", "the session limit has been exceeded")
		return
	}
	s.nextID++
	id := strconv.Itoa(s.nextID)
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%p", u, s.nextID, s)))
	tok := hex.EncodeToString(sum[:16])
	sp := "/redfish/v1/SessionService/Sessions/" + id
	s.sessions[tok] = session{user: u, path: sp}
	s.notePeak()
	res := map[string]any{
		"@odata.type": "#Session.v1_7_0.Session",
		"@odata.id":   sp,
		"Id":          id,
		"Name":        "User Session",
		"UserName":    u,
	}
	s.res[sp] = res
	addMember(s.res["/redfish/v1/SessionService/Sessions"], sp)
	w.Header().Set("X-Auth-Token", tok)
	w.Header().Set("Location", sp)
	writeJSON(w, http.StatusCreated, res, "")
}

func (s *Server) delete(w http.ResponseWriter, p string) {
	if s.storageDelete(w, p) {
		return
	}
	if !strings.HasPrefix(p, "/redfish/v1/SessionService/Sessions/") || s.res[p] == nil {
		writeError(w, http.StatusMethodNotAllowed, "Base.1.8.OperationNotAllowed", "DELETE not allowed at "+p)
		return
	}
	for tok, ss := range s.sessions {
		if ss.path == p {
			delete(s.sessions, tok)
		}
	}
	delete(s.res, p)
	removeMember(s.res["/redfish/v1/SessionService/Sessions"], p)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) reset(w http.ResponseWriter, sys map[string]any, in map[string]any) {
	rt, _ := in["ResetType"].(string)
	acts := sys["Actions"].(map[string]any)["#ComputerSystem.Reset"].(map[string]any)
	allowed, _ := acts["ResetType@Redfish.AllowableValues"].([]any)
	if info, _ := acts["@Redfish.ActionInfo"].(string); allowed == nil && info != "" {
		params, _ := s.res[clean(info)]["Parameters"].([]any)
		for _, p := range params {
			if pm, ok := p.(map[string]any); ok && pm["Name"] == "ResetType" {
				allowed, _ = pm["AllowableValues"].([]any)
			}
		}
	}
	if !slices.Contains(allowed, any(rt)) {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterValueNotInList",
			fmt.Sprintf("The value %s for the parameter ResetType is not in the list of acceptable values.", rt), rt, "ResetType")
		return
	}
	on := sys["PowerState"] == "On"
	switch rt {
	case "On", "ForceOn":
		if !on {
			s.boot(sys)
		}
	case "ForceOff", "GracefulShutdown":
		sys["PowerState"] = "Off"
		if s.opts.PowerOffPolls > 0 {
			sys["PowerState"], s.offPolls = "PoweringOff", s.opts.PowerOffPolls
		}
	case "ForceRestart", "GracefulRestart", "PowerCycle":
		s.boot(sys)
	case "PushPowerButton":
		if on {
			sys["PowerState"] = "Off"
		} else {
			s.boot(sys)
		}
	}
	s.armRevert(sys)
	w.WriteHeader(http.StatusNoContent)
}

// boot powers the host on and consumes a one-time boot override, as firmware does.
func (s *Server) boot(sys map[string]any) {
	sys["PowerState"] = "On"
	b := sys["Boot"].(map[string]any)
	if s.settings != "" { // pending settings apply at boot
		if pb, ok := s.res[s.settings]["Boot"].(map[string]any); ok {
			merge(b, pb)
			s.res[s.settings]["Boot"] = map[string]any{}
		}
	}
	rec := Boot{Target: "None"}
	if b["BootSourceOverrideEnabled"] != "Disabled" {
		rec.Target, _ = b["BootSourceOverrideTarget"].(string)
		rec.Mode, _ = b["BootSourceOverrideMode"].(string)
	}
	if b["BootSourceOverrideEnabled"] == "Once" {
		b["BootSourceOverrideEnabled"] = "Disabled"
	}
	s.boots = append(s.boots, rec)
}

func (s *Server) simpleUpdate(w http.ResponseWriter, in map[string]any) {
	img, _ := in["ImageURI"].(string)
	if img == "" {
		writeError(w, http.StatusBadRequest, "Base.1.8.ActionParameterMissing", "ImageURI is required", "ImageURI")
		return
	}
	s.nextID++
	id := strconv.Itoa(s.nextID)
	tp := "/redfish/v1/TaskService/Tasks/" + id
	s.res[tp] = map[string]any{
		"@odata.type":     "#Task.v1_7_4.Task",
		"@odata.id":       tp,
		"Id":              id,
		"Name":            "Firmware update " + id,
		"TaskState":       "Running",
		"TaskStatus":      "OK",
		"PercentComplete": float64(0),
		"Messages":        []any{},
	}
	if tc := s.res["/redfish/v1/TaskService/Tasks"]; tc != nil {
		addMember(tc, tp)
	}
	s.tasks[id] = &task{id: id, image: img}
	if s.opts.FirmwareNoContent {
		// The task runs to its end at once, as sushy-emulator's does.
		s.tasks[id].polls = s.opts.TaskPolls
		s.finishTask(id)
		w.Header().Set("Location", tp)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if s.opts.NoTaskMonitor {
		s.tasks[id].polls = s.opts.TaskPolls
		s.finishTask(id)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Location", "/redfish/v1/TaskService/TaskMonitors/"+id)
	writeJSON(w, http.StatusAccepted, s.res[tp], "")
}

func (s *Server) pollTask(w http.ResponseWriter, id string) {
	t := s.tasks[id]
	if t == nil {
		writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no task monitor "+id)
		return
	}
	res := s.res["/redfish/v1/TaskService/Tasks/"+id]
	if s.opts.TaskMonitorGone && res["TaskState"] != "Running" {
		writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no task monitor "+id)
		return
	}
	t.polls++
	if t.polls < s.opts.TaskPolls {
		res["PercentComplete"] = float64(100 * t.polls / s.opts.TaskPolls)
		writeJSON(w, http.StatusAccepted, res, "")
		return
	}
	s.finishTask(id)
	if s.opts.TaskVanishes {
		delete(s.tasks, id)
		delete(s.res, "/redfish/v1/TaskService/Tasks/"+id)
		if tc := s.res["/redfish/v1/TaskService/Tasks"]; tc != nil {
			removeMember(tc, "/redfish/v1/TaskService/Tasks/"+id)
		}
		writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no task monitor "+id)
		return
	}
	if s.opts.TaskStaysRunning {
		res["TaskState"], res["PercentComplete"] = "Running", float64(99)
		writeJSON(w, http.StatusAccepted, res, "")
		return
	}
	if s.opts.TaskMonitorGone {
		writeError(w, http.StatusNotFound, "Base.1.8.ResourceMissingAtURI", "no task monitor "+id)
		return
	}
	writeJSON(w, http.StatusOK, res, "")
}

// finishTask ends a running task, in Exception with FailUpdate, else Completed.
func (s *Server) finishTask(id string) {
	t := s.tasks[id]
	res := s.res["/redfish/v1/TaskService/Tasks/"+id]
	if res["TaskState"] == "Running" {
		res["PercentComplete"] = float64(100)
		if s.opts.FailUpdate {
			res["TaskState"], res["TaskStatus"] = "Exception", "Critical"
			res["Messages"] = []any{map[string]any{"MessageId": "Update.1.0.ApplyFailed",
				"Message": "The image at " + t.image + " failed to apply: signature verification failed.", "Severity": "Critical"}}
		} else {
			res["TaskState"] = "Completed"
			res["Messages"] = []any{map[string]any{"MessageId": "Update.1.0.UpdateSuccessful",
				"Message": "The update of " + t.image + " completed.", "Severity": "OK"}}
			s.updates = append(s.updates, t.image)
			if inv := s.res["/redfish/v1/UpdateService/FirmwareInventory/BMC"]; inv != nil && s.opts.UpdateVersion != "" {
				inv["Version"] = s.opts.UpdateVersion
			}
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any, tag string) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("OData-Version", "4.0")
	if tag != "" {
		w.Header().Set("ETag", tag)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, id, msg string, args ...string) {
	ext := map[string]any{"MessageId": id, "Message": msg, "Severity": "Warning", "MessageArgs": args}
	if args == nil {
		ext["MessageArgs"] = []string{}
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": id, "message": msg, "@Message.ExtendedInfo": []any{ext},
	}}, "")
}

func etag(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return `W/"` + base64.RawURLEncoding.EncodeToString(sum[:9]) + `"`
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				merge(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}
