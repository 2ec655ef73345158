// Package fakeclock is a wall clock for tests that moves only when told, so that rules that
// depend on time (grants, leases, assertions, journals) are tested without sleeping. Its Now
// method fits every siteboot field of type func() time.Time.
package fakeclock
