package bmc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// DefaultMaxOpenSessions bounds a SessionPool's open sessions when MaxOpen is zero.
const DefaultMaxOpenSessions = 1024

// SessionPool keeps at most one open driver (one BMC session) per BMC and lends it to one
// operation at a time, so that operations reuse a session instead of logging in and out
// around each one, and N agents, each with its pool, never hold more than N sessions at a
// BMC however many operations they run (BMCs cap sessions: iDRAC's pool runs dry, XCC
// allows 16). Set it as Executor.Sessions; the Executor's Opener opens the sessions.
//
// A session is dropped (closed, and opened again by the next operation) after an
// operation that failed in a way that may have spoilt it (auth, unreachable, timeout, no
// session, closed) and after a rotation of credentials. When more than MaxOpen are open,
// the least recently used idle ones are logged out; with IdleTimeout, a session idle longer
// is logged out before it would be lent again (and by CloseIdle). Close logs every session
// out. The pool remembers a BMC only while it has a session open there or an operation
// holds or waits for one, so its memory is bounded by MaxOpen and the operations in flight,
// not by the BMCs it ever served.
//
// Set the fields before first use; it is safe for concurrent use.
type SessionPool struct {
	// MaxOpen bounds the sessions kept open across BMCs; zero means
	// DefaultMaxOpenSessions.
	MaxOpen int
	// IdleTimeout logs out a session idle (lent to no operation) longer than this: the next
	// operation at its BMC logs in again, and CloseIdle logs such sessions out meanwhile.
	// BMCs end idle sessions themselves (IPMI after about a minute of inactivity, Redfish
	// after its SessionTimeout, 30 s at the least), and an operation that finds its session
	// ended fails; set it below the shortest. Zero means no limit.
	IdleTimeout time.Duration
	// Clock is IdleTimeout's clock; nil means [clock.Real].
	Clock clock.Clock
	// Logger receives a line per failed logout; nil discards.
	Logger *slog.Logger

	mu     sync.Mutex
	m      map[string]*pooled
	tick   uint64
	closed bool
}

type pooled struct {
	lock chan struct{} // held by the operation using d
	refs int           // operations holding or waiting for lock; under SessionPool.mu
	d    Driver        // nil: not open
	used uint64        // pool tick of the last release
	idle time.Time     // when it was last given back
}

// Open returns the number of sessions open.
func (p *SessionPool) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.m {
		if e.d != nil {
			n++
		}
	}
	return n
}

// ErrPoolClosed is the error of an operation that asked a closed SessionPool for a
// session (kind ErrClosed).
var ErrPoolClosed = errors.New("bmc: session pool closed")

// acquire waits for key's session, opening it with open when none is open, and returns it
// with the function that gives it back: release(drop) drops the session when drop is true.
func (p *SessionPool) acquire(ctx context.Context, key string, open func(context.Context) (Driver, error)) (Driver, func(drop bool), error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, &OpError{Op: "session", Kind: ErrClosed, Err: ErrPoolClosed}
	}
	if p.m == nil {
		p.m = make(map[string]*pooled)
	}
	e := p.m[key]
	if e == nil {
		e = &pooled{lock: make(chan struct{}, 1)}
		p.m[key] = e
	}
	e.refs++ // e stays in the map, the one entry for key, until refs is back to zero
	p.mu.Unlock()
	select {
	case e.lock <- struct{}{}:
	case <-ctx.Done():
		p.mu.Lock()
		p.unrefLocked(key, e)
		p.mu.Unlock()
		return nil, nil, ctx.Err()
	}
	p.mu.Lock()
	var stale Driver
	if e.d != nil && p.staleLocked(e, clock.Or(p.Clock).Now()) {
		stale, e.d = e.d, nil
	}
	p.mu.Unlock()
	p.closeAll([]Driver{stale})
	if e.d == nil {
		d, err := open(ctx)
		if err != nil {
			p.mu.Lock()
			<-e.lock
			p.unrefLocked(key, e)
			p.mu.Unlock()
			return nil, nil, err
		}
		p.mu.Lock()
		e.d = d
		p.mu.Unlock()
	}
	d := e.d
	return d, func(drop bool) { p.release(key, e, drop) }, nil
}

func (p *SessionPool) release(key string, e *pooled, drop bool) {
	p.mu.Lock()
	p.tick++
	e.used, e.idle = p.tick, clock.Or(p.Clock).Now()
	var closing []Driver
	if drop || p.closed {
		closing = append(closing, e.d)
		e.d = nil
	}
	<-e.lock
	p.unrefLocked(key, e)
	closing = append(closing, p.evictLocked()...)
	p.mu.Unlock()
	p.closeAll(closing)
}

// unrefLocked ends one operation's hold on e and takes e out of the map when it holds no
// session and no operation holds or waits for it, so that the map does not keep an entry
// for every BMC ever used. Called under p.mu.
func (p *SessionPool) unrefLocked(key string, e *pooled) {
	e.refs--
	p.forgetLocked(key, e)
}

// forgetLocked deletes key's entry e when it is unused: no session and no operation
// holding or waiting for it. Called under p.mu.
func (p *SessionPool) forgetLocked(key string, e *pooled) {
	if e.refs == 0 && e.d == nil && p.m[key] == e {
		delete(p.m, key)
	}
}

// evictLocked takes the least recently used idle sessions over MaxOpen out of the pool
// and returns them, to be closed.
func (p *SessionPool) evictLocked() []Driver {
	limit := p.MaxOpen
	if limit <= 0 {
		limit = DefaultMaxOpenSessions
	}
	var out []Driver
	for {
		open := 0
		var lru *pooled
		var lruKey string
		for k, e := range p.m {
			if e.d == nil {
				continue
			}
			open++
			if len(e.lock) == 0 && (lru == nil || e.used < lru.used) {
				lru, lruKey = e, k
			}
		}
		if open <= limit || lru == nil {
			return out
		}
		select {
		case lru.lock <- struct{}{}: // every write of d holds both locks
			out = append(out, lru.d)
			lru.d = nil
			<-lru.lock
			p.forgetLocked(lruKey, lru)
		default:
			return out // taken meanwhile: evicted at a later release
		}
	}
}

func (p *SessionPool) closeAll(ds []Driver) {
	for _, d := range ds {
		if d == nil {
			continue
		}
		if err := d.Close(); err != nil && p.Logger != nil {
			p.Logger.Debug("bmc: logout failed", "driver", d.Name(), "err", err)
		}
	}
}

// staleLocked reports whether e's session has been idle longer than IdleTimeout at now.
// Called under p.mu.
func (p *SessionPool) staleLocked(e *pooled, now time.Time) bool {
	return p.IdleTimeout > 0 && now.Sub(e.idle) > p.IdleTimeout
}

// CloseIdle logs out the sessions idle longer than IdleTimeout (none without one) and
// returns how many it logged out. A host calls it now and then, so that a BMC it stopped
// using gets its session back before the BMC's own timeout ends it.
func (p *SessionPool) CloseIdle() int {
	if p.IdleTimeout <= 0 {
		return 0
	}
	now := clock.Or(p.Clock).Now()
	p.mu.Lock()
	var closing []Driver
	for k, e := range p.m {
		if e.d == nil || !p.staleLocked(e, now) {
			continue
		}
		select {
		case e.lock <- struct{}{}: // every write of d holds both locks
			closing = append(closing, e.d)
			e.d = nil
			<-e.lock
			p.forgetLocked(k, e)
		default: // in use: not idle
		}
	}
	p.mu.Unlock()
	p.closeAll(closing)
	return len(closing)
}

// Close logs out every idle session and, as they are given back, the ones in use; later
// operations through the pool fail with ErrClosed. It returns nil.
func (p *SessionPool) Close() error {
	p.mu.Lock()
	p.closed = true
	var closing []Driver
	for k, e := range p.m {
		select {
		case e.lock <- struct{}{}:
			closing = append(closing, e.d)
			e.d = nil
			<-e.lock
			p.forgetLocked(k, e)
		default: // in use: closed on release
		}
	}
	p.mu.Unlock()
	p.closeAll(closing)
	return nil
}

// spoils reports whether an operation's error may have spoilt its session.
func spoils(err error) bool {
	if err == nil {
		return false
	}
	switch KindOf(err) {
	case ErrAuth, ErrUnreachable, ErrTimeout, ErrNoSession, ErrClosed, ErrTLS, ErrScheme:
		return true
	}
	return false
}
