package bmc

// Entries returns how many BMCs the pool keeps an entry for: those with a session open or
// an operation holding or waiting for one.
func (p *SessionPool) Entries() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}
