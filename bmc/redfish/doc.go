// Package redfish is the bmc driver for DMTF Redfish, built on
// github.com/stmcginnis/gofish (v0.26, package schemas).
//
// # Wiring
//
//	reg.Register("redfish", redfish.Config{RootCAs: pool})
//	d, err := reg.Open(ctx, bmc.Target{Driver: "redfish", Address: "https://10.0.0.5",
//		Username: u, Password: p, CertSHA256: pin})
//	defer d.Close() // DELETE of the session: BMCs cap sessions (Lenovo XCC at 16)
//
// Dial logs in with a session (POST SessionService/Sessions) unless Config.BasicAuth, and
// binds the driver to the first ComputerSystem. A BMC without a SessionService
// (sushy-emulator) gets HTTP basic auth instead, unless Config.SessionOnly, which makes it
// an ErrUnsupported error. A session the BMC expired is replaced once, transparently, on
// the 401 it causes. Close always logs out.
//
// # Every write is read back
//
// A 2xx proves only that the BMC took the request. After each write the driver reads the
// resource again and compares: the boot override's target, persistence and (when one was
// asked for) mode; the virtual drive's inserted flag and image; the power state, polled
// every PollInterval for at most PowerTimeout. A mismatch is an error that says what the
// BMC kept ("kept BootSourceOverrideEnabled Continuous (asked Once)"; of kind ErrDiffers
// for a boot override, ErrTimeout for power); a 2xx whose body is a Redfish error (iDRAC)
// is that error.
//
// # What the driver learns about a BMC
//
// Refusals that are properties of the BMC are remembered for the life of the Open (see
// Driver.Learned), so no later call pays for them again: no SessionService (basic auth),
// BootSourceOverrideMode refused or required, Continuous refused, If-Match refused on PATCH
// or on actions, VirtualMedia without actions (PATCHed instead).
//
// # TLS
//
// Each Driver has its own http.Transport; nothing it sets reaches another client or the
// process-wide transport. Verification is on: against Config.RootCAs (or the system roots),
// or, when Target.CertSHA256 is set, against that pinned leaf certificate alone.
// Target.Insecure turns verification off for that target only. An http:// address whose
// port speaks TLS (found by a handshake after the plain request failed), or an https://
// address whose port speaks plain HTTP, is ErrScheme saying which scheme to use, not
// ErrUnreachable.
//
// # Vendor behaviours handled
//
//   - BootSourceOverrideMode: sent (requested, or the system's current mode) because
//     Supermicro needs it; a BMC that rejects it (older HPE iLO 5 firmware) is sent Target
//     and Enabled only, and a mode asked for explicitly (UEFI, Legacy, or UEFI for UEFI
//     HTTP) that differs from the system's current one, or any explicit mode on a BMC that
//     does not report its mode (OpenBMC on GB200), is then ErrUnsupported, never silently
//     dropped. A BMC that demands it when none was known gets UEFI.
//   - What the BMC lists decides first: a mode, target or persistence missing from its
//     @Redfish.AllowableValues is ErrUnsupported with nothing written.
//   - UEFI HTTP while the system is in Legacy mode: the mode is PATCHed first and the
//     allowed targets read again (sushy-emulator lists UefiHttp only in UEFI mode). If
//     UefiHttp is still not offered (Lenovo XCC, OpenBMC, DMTF's mockup), or the override
//     is then refused, the Legacy mode is put back and the error says so.
//   - A read-back that differs from what was asked (sushy-emulator keeps a one-time
//     override as Continuous) is ErrDiffers: the operation is done, differently, and a
//     journal never sends it again.
//   - BootSourceOverrideEnabled "Continuous" refused (Lenovo XCC), or absent from the
//     allowed values: ErrUnsupported, nothing changed.
//   - Graceful power-off: GracefulShutdown, else PushPowerButton (some iLO 5). No
//     PowerCycle reset type: a cycle is ForceOff, a wait for Off, then On. Reset types are
//     read from the action's annotation or its ActionInfo (OpenBMC).
//   - If-Match: PATCHes and actions carry the resource's ETag (header, or @odata.etag); on
//     412 the ETag is fetched again and the PATCH retried, then sent without If-Match (and
//     that learned); a 428 fetches the ETag and retries with it.
//   - Virtual media: the system's drive or the first manager's (iLO); actions, or a PATCH
//     where the drive has none. After a failed insert the drive is read back and, if it
//     claims the image anyway (sushy-emulator), ejected; that image is not trusted as
//     "already inserted" again on this Open.
//   - Volumes: created by a POST to the controller's Volumes (RAIDType, Links.Drives, Name,
//     CapacityBytes), read back from the Location or, without one (or a 202 job), by
//     listing until a new member appears; a 501 or 405 to the POST is ErrUnsupported. A
//     volume of VolumeType only (before Volume 1.3.1) reads as its RAIDType where one is
//     implied. A drive without Drive.SecureErase is erased by its volume's
//     Volume.Initialize (Slow where offered) only where the volume holds that drive
//     alone.
//   - Power-ons (On, ForceOn, PowerCycle, the On of ForceOff-then-On) wait at the
//     context's power-on gate (bmc.AwaitPowerOn) immediately before each POST, retries
//     included.
//   - Firmware: SimpleUpdate's task is followed where DSP0266 puts it: 202 + Location (a
//     task monitor), 204 or 200 + Location (sushy-emulator), a Task body; a monitor that
//     answers 404 once its task ended is replaced by the task resource. An UpdateService
//     without SimpleUpdate (OpenBMC) is ErrUnsupported, nothing sent. The image URL (which
//     may carry an image cache grant) is redacted from the BMC's messages returned.
//   - Inspection: NICs from the system's EthernetInterfaces (physical only) and the
//     chassis' NetworkAdapters functions of type Ethernet (InfiniBand and untyped functions
//     without an Ethernet capability are left out). BMC addresses de-duplicated, without
//     host-interface and USB links; an interface a host interface names is the host's
//     side only where the manager has another (iDRAC names its management port, NIC.1). Strings trimmed, SMBIOS placeholders dropped, an
//     all-zero UUID is no UUID. Only the ComputerSystem is essential: another part that
//     fails (a manager, a NIC, a chassis, a drive for Storage) leaves the rest, and the
//     error is a *bmc.PartialError naming each failed part. A system without an
//     EthernetInterfaces collection (OpenBMC) has NICsKnown false.
//
// # Vendor quirks, their sources and tests
//
// Each quirk has one test named after it (quirks_test.go, or bmc/ipmi for IPMI); where no
// emulator shows it, the test runs a bmctest profile of the vendor's behaviour as its
// source describes it, and says so.
//
//	quirk                                    source                              test (profile)
//	write accepted, then silently reverted   Supermicro AMI, bmclib #459         TestQuirkWriteAcceptedThenSilentlyReverted
//	                                                                             (ForgetBootAfterReads)
//	Boot read-only, override via             iDRAC10: bmclib #461, sushy's       TestQuirkIDRAC10BootIsReadOnlyOverrideThroughSettings
//	@Redfish.Settings                        iDRAC10 release note                (BootSettingsObject IDRAC10Settings)
//	override in a FutureState resource       AMI/ASRock /Systems/Self/SD,        TestQuirkFutureStateFollowsRedfishSettings
//	                                         Redfish-Tacklebox #144              (BootSettingsObject AMIFutureState)
//	persistent boot not supported            Lenovo XCC; Ironic's workaround     TestQuirkPersistentBootNotSupported (LenovoXCC)
//	  re-armed once before each power-on                                         bmc TestQuirkPersistentBootNotSupportedRearmedOnEachPowerOn
//	  (bmc.BootKeeper)                                                           (LenovoXCC)
//	IPMI boot device ignored, read back as   iDRAC10: bmclib #461, sushy's       TestQuirkIDRAC10IgnoresIPMIBootDevice (bmc/ipmi,
//	the old one (ErrDiffers, names Redfish)  iDRAC10 release note                pyghmi IgnoreBootDevice)
//	virtual media by PATCH only              Lenovo (sushy's release notes)      TestQuirkVirtualMediaPatchOnly (NoMediaActions)
//	boot target UsbCd, not Cd                Supermicro (sushy)                  TestQuirkVirtualMediaUsbCdBootTarget (UsbCdTarget)
//	DVD-only slots                           Cisco UCS (sushy)                   TestQuirkVirtualMediaDVDOnlySlot (DVDOnlyMedia)
//	slot 2 listed first, only slot 1 boots:  iDRAC10: dell/iDRAC-Redfish-        TestQuirkIDRAC10VirtualMediaSlot (IDRAC10MediaSlots)
//	  the lowest-numbered CD slot is used    Scripting #324, dell/terraform-
//	                                         provider-redfish #329
//	InsertMedia listed but 405               sushy's release notes               TestQuirkVirtualMediaActions405 (MediaActions405)
//	eject needs an empty {} body             iLO (sushy)                         TestQuirkVirtualMediaEjectNeedsEmptyObject (EjectNeedsBody)
//	TransferProtocolType required            Nokia (sushy)                       TestQuirkVirtualMediaTransferProtocolTypeRequired
//	                                                                             (RequireTransferProtocolType)
//	session pools run out                    iDRAC RAC0218; Foreman              TestQuirkSessionPoolOneSessionPerBMCReused
//	                                         smart-proxy #895/#896               (LenovoXCC with MaxSessions 2)
//	transient refusals retried by id         iDRAC SYS518, iLO                   TestQuirkTransientErrorsRetriedByMessageID
//	                                         InvalidOperationForSystemState      (RefuseWrites)
//	404 SYS403 creating a job, retried       iDRAC (dell/iDRAC-Redfish-          TestQuirkDellJobCreation404RetriedByMessageID
//	  by id (another 404 is not)             Scripting #383)                     (RefuseWrites, RefuseStatus 404)
//	refused connections while open          iDRAC 5.x gaps of about 20 s        TestQuirkIDRACGapRefusedConnectionsAreRetried
//	                                                                             (the fake's port closed, then opened)
//	no retry when the outcome is unknown     DSP0266 (a POST is not idempotent)  TestQuirkDestructiveOperationWithUnknownOutcomeIsNotRetried
//	tasks that vanish or lie                 iDRAC < 5.00, iDRAC "processing",   TestQuirkTasksThatVanishOrLie (TaskVanishes,
//	                                         iLO without TaskMonitor             TaskStaysRunning, NoTaskMonitor)
//	IPMI user set-up order, "(Empty User)",  Dell R420, Supermicro, HPE,         TestQuirkIPMIUserSetupOrder (bmc/ipmi, ipmi_sim)
//	user 1 anonymous, password policies      Huawei (no repeated characters)     TestNewPasswordMeetsEveryPolicy (bmc)
//
// A boot override is read back twice: at once, and again after Config.SettleTime. One
// that reads back as asked and is gone at the second read is ErrDiffers, saying it was
// reverted. Where the system refuses its Boot as read-only (400 PropertyNotWritable, or
// 405) and carries @Redfish.Settings, the override is written to and read back from the
// settings object wherever it points, and that is learned (boot-settings-object); the
// system's own Boot shows the override in force until the next boot. A request the BMC refuses with one of the
// passing MessageIds (transient in retry.go: SYS518, InvalidOperationForSystemState,
// ServiceTemporarilyUnavailable, and iDRAC's 404 SYS403), or whose connection it refuses once the
// driver is open, is sent again up to Config.Retries times, Config.RetryWait apart; one
// whose answer was lost is not.
// A firmware task that vanished, still reads running, or was never given is settled by
// finding FirmwareUpdate.Version in the firmware inventory; without a Version it is
// ErrOutcomeUnknown.
//
// # Services tested, by capability
//
// From the tests (TestSushyEmulator, TestDMTFMockupServer, TestCaptureCapabilities and
// the vendor tests); milliseconds per operation from
// `go test -run '^$' -bench Peers -benchtime 20x ./bmc/redfish/` on a loaded 2-core
// machine (two runs; loopback, the Python services single-threaded, sushy checking a
// bcrypt password on every request). sushy = sushy-emulator 2.2.0, fake driver; dmtf =
// DMTF Redfish-Mockup-Server 1.2.6 serving public-rackmount1; ilo5 and openbmc = bmctest
// serving the DL325/iLO 5 and OpenBMC captures (bmctest/testdata/README.md).
//
//	capability       sushy                       dmtf                        ilo5 capture        openbmc capture
//	open + close     works (basic auth) 15 ms    works (session) 5.6-7 ms    works 1.4-10 ms     works 1.2 ms
//	power state      works 20 ms                 works 1.4-3.2 ms            works 0.4-3.5 ms    works 0.2-0.25 ms
//	power on/off     works, 1-11 s (sushy's      fails: 204, state never     works               works (ActionInfo)
//	                 own random delay)           changes (ErrTimeout)
//	one-time PXE     differs: kept Continuous    works 4.4-5.6 ms            works 1.6-8.2 ms    works 0.7-0.8 ms
//	persistent boot  works 250 ms                works                       works               works
//	UEFI HTTP        differs: stored as Pxe      not offered                 works               not offered
//	                 (no HttpBootUri)
//	inspection       works 69 ms                 works 14-20 ms              works 3.5-17 ms     works 1.0-1.1 ms,
//	                                                                                             NICs not known
//	virtual media    works 347 ms (insert +      works by PATCH 18 ms        works 3.5-3.8 ms    not offered
//	                 eject, image fetched)
//	firmware         fails: fake driver has no   "Completed": 204, no task   works               not offered (push
//	                 versions (500)              (nothing to read back)                          only)
//	storage          works 181 ms                works 3.7 ms                works 0.7 ms        works 0.36 ms
//	volumes, erase   listed; creation 501 (its   no Storage (SimpleStorage   -                   -
//	                 fake driver creates none:   only): ErrUnsupported
//	                 libvirt only), no DELETE,
//	                 no SecureErase:
//	                 ErrUnsupported
//	Secure Boot      works (fake driver keeps    linked, not served:         -                   -
//	                 SecureBootEnable; libvirt   ErrUnsupported
//	                 driver: enforced by OVMF)
//
// Volume creation, deletion and erasure are tested against bmctest's RAID controller
// (Options.Storage: Location or none, a RAID level kept other than asked, drives without
// SecureErase): TestVolumeCreatedReadBackAndDeleted, TestVolumeKeptDifferentlyIsErrDiffers,
// TestVolumeRefusedBeforeSending, TestEraseDrive; no emulator here creates a volume.
//
// Secure Boot through sushy-emulator's libvirt driver, on a domain with OVMF's Secure Boot
// build that then refuses an unsigned loader, is e2e's
// TestE2E_SushyLibvirtSecureBootRefusesUnsigned.
//
// Dell iDRAC, Lenovo XCC and Supermicro have no capture here: their behaviours are
// modelled in bmctest on DMTF's mockup and tested in the vendor tests.
package redfish
