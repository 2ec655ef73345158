// Package sitelink is the protocol between a site agent and its control plane: the
// messages they exchange, their binding to HTTP and JSON over mutual TLS (DESIGN.md G3), a
// [Client] for the agent, a [Handler] for the control plane, and the specification
// ([OpenAPI], openapi.yaml) a control plane written in another language implements.
//
// # Operations
//
// Every operation is a POST of a JSON body under the control plane's base URL, answered
// 200 with a JSON body, or with another status and an [Error] carrying a code only:
//
//	POST /v1/sync            StatusReport      -> SyncResponse (SiteSpec and Commands)
//	POST /v1/token           TokenRequest      -> TokenResponse; 409 until the token exists
//	POST /v1/bmc/claim       ClaimRequest      -> Grant
//	POST /v1/bmc/report      ClaimRequest+Outcome -> {}
//	POST /v1/bmc/credential  CredentialRequest -> Credential
//
// 400 is a body that does not decode or lacks a field, 403 a caller that may not ask
// (below), 404 nothing under that reference (or no BMC access), 409 not ready yet, 503 the
// control plane cannot answer now. The agent heartbeats with /v1/sync and applies the
// SiteSpec that comes back (the boot lease word, DESIGN.md L3, and the images to pre-warm)
// and the Commands (boot.prepareRamdisk, boot.cleanUp and the bmc.* kinds, DESIGN.md G2);
// it acknowledges a command in a later report, and until then the control plane sends it
// again. [Heartbeat] paces those reports (every interval, sooner when woken) and counts and
// logs a broken link, so a host writes only the report and what it does with the answer.
//
// # Who is calling
//
// The caller is the node named by its verified client certificate ([sitetls.NodeFrom]),
// never by the body. [Handler] refuses, with 403, a request without such a certificate and
// a request whose body names another node (or, in a report, another site); it calls
// [Handler.OnRefused] so a host can count refusals. What the Server decides on top is the
// control plane's, and [BMCServer] says what it must hold: a discovery token only for the
// agent its entry was sent to; a BMC credential only to the node a live command naming it
// is routed to; a claim granted only to that node. A secret (a token, a credential) never
// goes into an error, a log line or a printed value ([Credential] prints redacted).
// [Handler.Insecure] trusts the node each request names, for a lab on plain http only.
//
// # The agent's boot entries
//
// [EntryStore] is an agent's crash-safe copy of the entries the control plane sent
// (boot.prepareRamdisk, boot.cleanUp: [EntryStore.Apply]), by MAC: a change returns only
// once it is on disk, a lapsed entry is never answered, and a damaged file is set aside,
// never deleted, keeping what could be read ([EntryStore.Damage]). [ParsedEntry.Match] is
// the one rule of whether the machine asking (its option 93 arch and option 97 UUID) is
// the one its entry names; a host counts refusals by [Mismatch].String. [EntryApplier]
// applies a heartbeat's boot commands to the store off the heartbeat, one write per batch,
// and keeps their acknowledgements until a report has carried them.
//
// # BMC commands
//
// A bmc.* command becomes the typed operation of package bmc with [BMCOp] (its target with
// [BMCTarget.Ref]; the image of bmc.firmware and bmc.mediaInsert through the host's
// [BMCImageFunc], since only the agent knows its cache), and the [bmc.Result] of running
// it becomes the report's [BMCResult] with [BMCResultOf], or [NotSentResult] for a command
// refused before anything was sent. [BMCClient] is the agent's side of the claim protocol
// and of credentials by reference over a [Client] (or any [BMCLink], such as an in-process
// link), in its node's name: a bmc.Claimer and bmc.Credentials for a bmc.Executor. This package imports bmc's core package only, never
// a driver.
//
// bmc.storage is destructive, as the seed lists it: its StorageAction picks the listing
// (which only reads and is not claimed) or a volume created, a volume deleted or a drive
// erased (bmc.CreateVolume, bmc.DeleteVolume, bmc.EraseDrive), each claimed; a created
// volume comes back in [BMCResult.Volume].
//
// # Power transitions
//
// A bmc.transition ([TransitionCommand]) is one power transition over many machines:
// [BMCTransition] makes the bmc.Transition a bmc.TransitionRunner runs under the command's
// id, each step claimed as "ID/machine/step/attempt" (a control plane grants those only to
// the node the transition is routed to, for its machines). The agent reports its
// [TransitionProgress] on each heartbeat ([StatusReport.Transitions]), each machine's
// result as it ends ([TransitionResultOf]: id "ID/MACHINE", status ok, failed, unknown or
// [StatusAborted]) in [StatusReport.BMC], and the transition's own result once every
// machine ended ([TransitionSummary]). A bmc.transitionAbort names the transition in
// [Command.Abort]. Each field is optional on the wire: a peer that knows none of them
// sends and reads the messages as before.
//
// # Why OpenAPI and not protobuf
//
// The wire is HTTP with JSON bodies, and agents in the field already speak it; this package
// describes it byte for byte, so adopting it changes nothing on the wire. An OpenAPI 3.1
// document describes exactly that: paths, methods, status codes and JSON Schemas of the
// bodies, and any language has generators and validators for it. A protobuf package would
// describe another encoding: proto3's JSON mapping writes 64-bit integers (Beat, Epoch,
// the counters) as strings and field names in lowerCamelCase, so either the wire would
// change or the .proto would not say what is sent. The messages keep the seed's names
// (StatusReport, SiteSpec, ProxyDhcpEntry, BootLeaseState) so that they map one to one
// onto the seed's bettercompute.site.v1 package should a gRPC binding be added later.
// DiscoveryAssertion is not on this link: the ramdisk carries it to the control plane, in
// the encoding of package assertion.
//
// A few JSON keys are capitalised (CacheImage, Grant, Outcome, Disk, FirmwareResult): that
// is what agents and control planes send today, and the specification keeps it.
//
// # Wiring
//
// An agent:
//
//	id := sitetls.Identity{Site: "site-a", Node: "agent-1"}
//	creds, _ := sitetls.LoadNode(sitetls.Config{CertFile: cert, KeyFile: key, CAFile: ca}, id, nodeKey.Public())
//	c, _ := sitelink.NewClient(sitelink.ClientConfig{URL: "https://cp.example:8443", Credentials: creds})
//	spec, err := c.Sync(ctx, sitelink.StatusReport{Site: "site-a", Node: "agent-1", Beat: beat})
//
// [NewClient] dials the control plane directly (no proxy from the environment) and refuses
// a plain http URL unless [ClientConfig.InsecurePlainHTTP] allows it.
//
// An agent that reads its link from a configuration file fills a [LinkConfig] (URL, the
// site certificate's files, Insecure, Timeout): [LinkConfig.Validate] names the field at
// fault ([LinkConfigError]), and [LinkConfig.Open] loads the certificate for the node
// ([LinkNode]) and returns the Client with the credentials a sitetls.Monitor checks.
// [ReportStats] turns the samples of the agent's components into the report's Counters
// under the names control planes read ([ReportKey]).
//
// An agent's BMC side is a [BMCService] ([NewBMCService] from a [BMCServiceConfig]: an
// Opener of drivers, the journal's directory, the link, [BMCLimits]): each heartbeat hands
// it the desired state's commands ([BMCService.Start] takes the bmc.* ones and runs them
// off the heartbeat), puts [BMCService.Pending] in the report and passes what the answered
// report carried to [BMCService.Delivered].
//
// A control plane:
//
//	srv := &http.Server{Handler: &sitelink.Handler{Server: plane, BMC: plane}, TLSConfig: creds.ServerConfig()}
//	srv.ServeTLS(ln, "", "")
package sitelink
