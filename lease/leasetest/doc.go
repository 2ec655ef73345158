// Package leasetest helps test code that uses package lease: the Store contract any store
// must keep, a benchmark of a Controller over a Store, a Fleet of many sites, and a clock
// tests move by hand.
package leasetest
