package agent

import (
	"errors"
	"net"

	"github.com/bettercompute/siteboot/bootevents"
	"github.com/bettercompute/siteboot/bootserver"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bettercompute/siteboot/syslogd"
)

// setupEvents builds the agent's one boot timeline (bootevents' default bounds) and, with
// Boot.SyslogListen, the syslog receiver that puts machines' consoles into it; nothing
// with Boot.NoTimeline.
func (a *Agent) setupEvents() (err error) {
	if a.cfg.Boot.NoTimeline {
		return nil
	}
	if a.events, err = bootevents.NewTimeline(bootevents.Config{Clock: a.clock}); err != nil {
		return err
	}
	a.sink = a.events
	if l := a.cfg.Boot.SyslogListen; l.IsValid() {
		if a.syslogConn, err = net.ListenPacket(bootserver.ListenNetwork("udp", l, a.cfg.Boot.ServerIP6.IsValid())); err != nil {
			return err
		}
		a.syslog = &syslogd.Server{Sink: a.events, Resolve: a.events, Logger: a.log.With("component", "syslogd")}
	}
	return nil
}

// Events is the agent's boot timeline: every component's events about each machine.
func (a *Agent) Events() *bootevents.Timeline { return a.events }

// facts are what the agent knows of mac besides its timeline: its entry, the fence, and
// the agent holding the lease when another one does.
func (a *Agent) facts(mac hwid.MAC) bootevents.Facts {
	f, fs := a.machines.Facts(mac), a.fence.State()
	f.FenceEpoch, f.FenceActive = fs.Epoch, fs.Active
	if fs.Holder != a.cfg.NodeID {
		f.FenceHolder = fs.Holder
	}
	return f
}

// serveSyslog runs the syslog receiver until stop; nil when it is off.
func (a *Agent) serveSyslog() error {
	if err := a.syslog.Serve(a.syslogConn); !errors.Is(err, syslogd.ErrServerClosed) {
		return err
	}
	return nil
}
