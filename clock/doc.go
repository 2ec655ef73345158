// Package clock is the time siteboot's packages take: the wall clock, a monotonic
// reading that never goes back, and a timer. A package's Clock field takes a [Clock]; nil
// means [Real]. Tests move time with [github.com/bettercompute/siteboot/clock/clocktest.Fake]
// instead of sleeping; a test that waits for another goroutine to arm a timer does so with
// Fake.BlockUntilContext or Fake.BlockUntilTimer before it advances.
package clock
