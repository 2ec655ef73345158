package agent

import "github.com/bettercompute/siteboot/sitelink"

// record is a live boot entry as the agent's answers use it: validated, with its UUID and
// arch parsed once ([sitelink.ParsedEntry.Match] is the one rule of whether the machine
// asking is the one it names, S3).
type record = sitelink.ParsedEntry
