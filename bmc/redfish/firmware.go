package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

type taskBody struct {
	ID        string `json:"Id"`
	ODataID   string `json:"@odata.id"`
	TaskState string
	Messages  []struct{ Message string }
}

// maxTaskPolls bounds polls of one task whatever the clock says.
const maxTaskPolls = 100000

func terminal(state string) bool {
	return slices.Contains([]string{"Completed", "Exception", "Killed", "Cancelled"}, state)
}

// grantPath matches an image cache grant in a path, /cache/t/GRANT: the grant is a
// secret that lets its holder fetch the image.
var grantPath = regexp.MustCompile(`/cache/t/[^/\s"'<>?#]+`)

// Redacted stands for the image URL (or a grant) in what the driver returns of a BMC's
// messages.
const Redacted = "[image URL]"

// redactor returns a function that removes the image URL from a BMC's message: the URL
// as given, its escaped forms, its path and query, and any image cache grant.
func redactor(raw string, u *url.URL) func(string) string {
	forms := []string{raw, u.String(), url.QueryEscape(raw), url.PathEscape(raw)}
	if ru := u.RequestURI(); len(ru) > 1 {
		forms = append(forms, ru)
	}
	if u.RawQuery != "" {
		forms = append(forms, u.RawQuery)
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) }) // longest first
	return func(s string) string {
		for _, f := range forms {
			if f != "" {
				s = strings.ReplaceAll(s, f, Redacted)
			}
		}
		return redactGrants(s)
	}
}

// redactGrants replaces every image cache grant in s.
func redactGrants(s string) string { return grantPath.ReplaceAllString(s, "/cache/t/[grant]") }

// redactResult applies redact to everything UpdateFirmware (or a virtual media
// operation) returns of the BMC's words.
func redactResult(redact func(string) string, res bmc.FirmwareResult, err error) (bmc.FirmwareResult, error) {
	for i, m := range res.Messages {
		res.Messages[i] = redact(m)
	}
	var oe *bmc.OpError
	if errors.As(err, &oe) {
		if oe.Message == "" && oe.Err != nil {
			oe.Message = oe.Err.Error()
		}
		oe.Message, oe.Code = redact(oe.Message), redact(oe.Code)
	}
	return res, err
}

// UpdateFirmware implements bmc.FirmwareUpdater with UpdateService.SimpleUpdate and
// follows the task the BMC starts until it ends, polling every PollInterval (or the
// BMC's shorter Retry-After) for at most TaskTimeout. The task is found where DSP0266
// puts it: a 202's Location (a task monitor), or a 204's or 200's Location or Task body
// (sushy-emulator answers 204 with the task's Location). A task that ends in any state but
// Completed is ErrRefused with the task's messages. A BMC whose UpdateService lists no
// SimpleUpdate action (OpenBMC, which takes pushed images only) is ErrUnsupported,
// nothing sent.
//
// The image URL may carry a secret (an image cache grant): wherever a BMC quotes it in a
// message (a task's Messages, an error), what is returned has it replaced by Redacted,
// and any /cache/t/GRANT path by /cache/t/[grant].
func (d *Driver) UpdateFirmware(ctx context.Context, up bmc.FirmwareUpdate) (bmc.FirmwareResult, error) {
	u, err := url.Parse(up.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return bmc.FirmwareResult{}, d.opErr("firmware-update", bmc.ErrInvalid, "the image must be an http or https URL", nil)
	}
	res, err := d.updateFirmware(ctx, up, u)
	return redactResult(redactor(up.URL, u), res, err)
}

func (d *Driver) updateFirmware(ctx context.Context, up bmc.FirmwareUpdate, u *url.URL) (bmc.FirmwareResult, error) {
	var res bmc.FirmwareResult
	var monitor *schemas.TaskMonitorInfo
	accepted := false // a 202 with nothing to follow
	err := d.do(ctx, "firmware-update", func(c *gofish.APIClient) error {
		var root struct{ UpdateService odataID }
		if _, err := getRaw(c, "/redfish/v1/", &root); err != nil {
			return err
		}
		if root.UpdateService.ID == "" {
			return d.opErr("firmware-update", bmc.ErrUnsupported, "the BMC has no UpdateService", nil)
		}
		var us struct {
			Actions struct {
				SimpleUpdate *struct {
					Target string `json:"target"`
				} `json:"#UpdateService.SimpleUpdate"`
			}
		}
		etag, err := getRaw(c, root.UpdateService.ID, &us)
		if err != nil {
			return err
		}
		if us.Actions.SimpleUpdate == nil || us.Actions.SimpleUpdate.Target == "" {
			return d.opErr("firmware-update", bmc.ErrUnsupported, "the BMC's UpdateService offers no SimpleUpdate action", nil)
		}
		body := map[string]any{"ImageURI": up.URL, "TransferProtocol": strings.ToUpper(u.Scheme)}
		if len(up.Targets) > 0 {
			body["Targets"] = up.Targets
		}
		ans, err := d.action(c, us.Actions.SimpleUpdate.Target, etag, body)
		if err != nil {
			return err
		}
		var task taskBody
		if len(ans.body) > 0 {
			_ = json.Unmarshal(ans.body, &task)
		}
		switch {
		case ans.location != "": // 202: a task monitor; 200 or 204: the task itself
			monitor = &schemas.TaskMonitorInfo{TaskMonitor: ans.location}
		case task.ODataID != "" && task.TaskState != "":
			monitor = &schemas.TaskMonitorInfo{TaskMonitor: task.ODataID}
		case ans.status == http.StatusAccepted:
			accepted = true // iLO: 202 and no TaskMonitor
		}
		if monitor != nil && task.ODataID != "" {
			monitor.Task = &schemas.Task{}
			monitor.Task.ID, monitor.Task.ODataID = task.ID, task.ODataID
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.TaskTimeout)
	defer cancel()
	if accepted {
		return d.confirm(ctx, up, res, "the BMC accepted the update and gave no task to follow", true)
	}
	if monitor == nil {
		return bmc.FirmwareResult{State: "Completed"}, nil
	}
	return d.followTask(ctx, up, monitor)
}

// confirm settles an update whose task cannot say how it ended (why): by finding
// up.Version in the firmware inventory, polled every PollInterval until ctx ends when
// wait is set. Without a Version it is ErrOutcomeUnknown.
func (d *Driver) confirm(ctx context.Context, up bmc.FirmwareUpdate, res bmc.FirmwareResult, why string, wait bool) (bmc.FirmwareResult, error) {
	if up.Version == "" {
		return res, d.opErr("firmware-update", bmc.ErrOutcomeUnknown, why+"; no version was given to look for in the firmware inventory", nil)
	}
	for {
		var found bool
		err := d.do(ctx, "firmware-inventory", func(c *gofish.APIClient) error {
			var e error
			found, e = d.inventoryHas(c, up)
			return e
		})
		if err != nil {
			return res, err
		}
		if found {
			res.State = "Completed"
			res.Messages = append(res.Messages, why+"; version "+up.Version+" is in the firmware inventory")
			return res, nil
		}
		if !wait {
			return res, d.opErr("firmware-update", bmc.ErrOutcomeUnknown, why+"; version "+up.Version+
				" is not in the firmware inventory", nil)
		}
		t := time.NewTimer(d.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, d.opErr("firmware-update", bmc.ErrTimeout, why+"; version "+up.Version+
				" was not in the firmware inventory by the deadline", ctx.Err())
		case <-t.C:
		}
	}
}

// inventoryHas says whether the firmware inventory lists up.Version: on one of
// up.Targets (inventory paths) when given, else on any member.
func (d *Driver) inventoryHas(c *gofish.APIClient, up bmc.FirmwareUpdate) (bool, error) {
	b := newBudget()
	var us struct{ FirmwareInventory odataID }
	if _, err := b.get(c, "/redfish/v1/UpdateService", &us); err != nil {
		return false, err
	}
	if us.FirmwareInventory.ID == "" {
		return false, d.opErr("firmware-update", bmc.ErrOutcomeUnknown, "the BMC has no firmware inventory to confirm the update in", nil)
	}
	ids, err := b.members(c, us.FirmwareInventory.ID)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		if len(up.Targets) > 0 && !slices.Contains(up.Targets, id) {
			continue
		}
		var inv struct{ Version string }
		if _, err := b.get(c, id, &inv); err != nil {
			if isStatus(err, http.StatusNotFound) {
				continue
			}
			return false, err
		}
		if strings.TrimSpace(inv.Version) == up.Version {
			return true, nil
		}
	}
	return false, nil
}

func (d *Driver) followTask(ctx context.Context, up bmc.FirmwareUpdate, m *schemas.TaskMonitorInfo) (bmc.FirmwareResult, error) {
	var res bmc.FirmwareResult
	poll := m.TaskMonitor
	taskPath := ""
	if m.Task != nil {
		res.Task = m.Task.ID
		taskPath = m.Task.ODataID
		if poll == "" {
			poll = m.Task.ODataID
		}
	}
	// A Location may be absolute; only a URL on this BMC is followed.
	if u, err := url.Parse(poll); err == nil && u.IsAbs() {
		if u.Scheme+"://"+u.Host != d.endpoint {
			return res, d.opErr("firmware-update", bmc.ErrRefused, "the task monitor is not on this BMC", nil)
		}
		poll = u.RequestURI()
	}
	if !validPath(poll) {
		return res, d.opErr("firmware-update", bmc.ErrRefused, "the BMC gave no usable task monitor", errBadLink)
	}
	for n := 0; ; n++ {
		var t taskBody
		var status int
		var retryAfter time.Duration
		if n >= maxTaskPolls {
			return res, d.opErr("firmware-update", bmc.ErrTimeout, "task "+res.Task+" still "+res.State+" after "+strconv.Itoa(n)+" polls", nil)
		}
		err := d.do(ctx, "firmware-task", func(c *gofish.APIClient) error {
			resp, err := c.Get(poll)
			if err != nil {
				return err
			}
			defer schemas.DeferredCleanupHTTPResponse(resp)
			status = resp.StatusCode
			if ra, err := schemas.ParseRetryAfter(resp.Header.Get("Retry-After")); err == nil {
				retryAfter = time.Until(ra)
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			t = taskBody{}
			if len(b) > 0 {
				_ = json.Unmarshal(b, &t)
			}
			return nil
		})
		if isStatus(err, http.StatusNotFound) && taskPath != "" && poll != taskPath && validPath(taskPath) {
			// DSP0266: a monitor may vanish once its task is done; the task resource stays.
			poll = taskPath
			continue
		}
		if isStatus(err, http.StatusNotFound) && n > 0 {
			// iDRAC below 5.00 deletes a finished task (and its monitor) after a minute.
			return d.confirm(ctx, up, res, "the task vanished before it was seen to end", false)
		}
		if err != nil {
			return res, err
		}
		if t.ODataID != "" && validPath(t.ODataID) {
			taskPath = t.ODataID
		}
		if t.ID != "" {
			res.Task = t.ID
		}
		res.State = t.TaskState
		res.Messages = res.Messages[:0]
		for _, msg := range t.Messages {
			if msg.Message != "" {
				res.Messages = append(res.Messages, msg.Message)
			}
		}
		done := terminal(t.TaskState) || (status != http.StatusAccepted && t.TaskState == "")
		if done {
			if res.State == "" {
				res.State = "Completed"
			}
			if res.State != "Completed" {
				return res, d.opErr("firmware-update", bmc.ErrRefused,
					"task "+res.Task+" ended "+res.State+": "+strings.Join(res.Messages, "; "), nil)
			}
			return res, nil
		}
		if up.Version != "" && n > 0 {
			// iDRAC can show a finished task as still running: the inventory may know better.
			if r, err := d.confirm(ctx, up, res, "task "+res.Task+" still reads "+orNone(res.State), false); err == nil {
				return r, nil
			}
		}
		wait := d.cfg.PollInterval
		if retryAfter > 0 && retryAfter < wait {
			wait = retryAfter
		}
		d.log.Debug("redfish: task running", "addr", d.endpoint, "task", res.Task, "state", t.TaskState, "poll", n)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return res, d.opErr("firmware-update", bmc.ErrTimeout, "task "+res.Task+" still "+res.State+" at the deadline", ctx.Err())
		case <-timer.C:
		}
	}
}
