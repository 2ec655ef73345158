// Package bmctest serves a fake Redfish BMC for tests, the way net/http/httptest serves
// a fake web server: real Redfish trees over a loopback httptest.Server (DMTF's
// public-rackmount1 mockup, and Mockup Creator captures of an HPE DL325 with iLO 5 and of
// a stock OpenBMC: Options.Mockup), with sessions, ETags, PATCHes and actions applied to an
// in-memory copy, every request recorded, and options that make it behave like BMCs seen in
// the field (HPE iLO, Supermicro, Lenovo XCC, iDRAC's 200 with an error body,
// sushy-emulator's answers, 412 and 428 on If-Match, task monitors that vanish,
// VirtualMedia without actions, NICs only under NetworkAdapters). testdata/README.md names
// each tree's source and licence and where each modelled behaviour comes from.
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
// Reset types are read from the action's AllowableValues or its ActionInfo resource
// (OpenBMC). Server.Delete removes a resource, so that a test can make a part of the BMC
// answer 404.
//
// It is a test double: it holds one lock per request, trusts its client, and keeps
// everything in memory.
package bmctest
