// Package fakeclock is what bmc's tests still import: an alias of
// [github.com/bettercompute/siteboot/clock/clocktest.Fake]. New code uses clocktest.
package fakeclock
