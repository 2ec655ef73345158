package agent

import "github.com/bettercompute/siteboot/clock"

// Clock is the agent's time, handed to every part whose rules depend on it: the wall clock
// of boot entries, discovery, cache grants and assertions, the monotonic reading of the
// lease fence, and the timer of the heartbeat and of discovery's report throttle. It is the
// library's one clock; a test hands in a fake one (clocktest.Fake, or its own) and moves it
// by hand; nil in [Options] means [clock.Real].
type Clock = clock.Clock
