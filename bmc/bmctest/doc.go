// Package bmctest serves a fake Redfish BMC for tests, the way net/http/httptest serves
// a fake web server: real DMTF mockup data (public-rackmount1) over a loopback
// httptest.Server, with sessions, ETags, PATCHes and actions applied to an in-memory copy,
// every request recorded, and options that make it behave like BMCs seen in the field
// (HPE iLO, Supermicro, Lenovo XCC, 412 on If-Match, VirtualMedia without actions, NICs
// only under NetworkAdapters).
//
// # Use
//
//	srv := bmctest.NewServer(bmctest.Options{Vendor: bmctest.HPEiLO})
//	defer srv.Close()
//	// point a driver at srv.URL with bmctest.DefaultUsername / DefaultPassword, then check
//	// srv.Requests() (what was sent) and srv.Resource(bmctest.SystemPath) (what changed).
//
// # What it models
//
// Login with POST /redfish/v1/SessionService/Sessions (X-Auth-Token and Location) or
// HTTP basic auth; DELETE of the session logs out. Every resource carries a weak ETag; a
// PATCH with a stale If-Match gets 412. ComputerSystem.Reset changes PowerState and, on
// a power-on or restart, consumes a one-time boot override and records the boot (Boots).
// VirtualMedia InsertMedia/EjectMedia and PATCH; UpdateService.SimpleUpdate answers 202
// with a task monitor that stays running for Options.TaskPolls polls;
// ManagerAccount.ChangePassword and PATCH of Password change the account's password.
//
// It is a test double: it holds one lock per request, trusts its client, and keeps
// everything in memory.
package bmctest
