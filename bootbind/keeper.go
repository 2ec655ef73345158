package bootbind

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/bettercompute/siteboot/clock"
)

// DefaultSaveEvery is how often a [Keeper] writes changed nonces besides after each Wake:
// a nonce bound to its first presenter changes too.
const DefaultSaveEvery = time.Second

// Keeper keeps a Nonces store in a file across restarts, so that a machine between its
// chain and its script boots on after the host restarts: [Keeper.Load] once at start,
// [Keeper.Run] saving after each [Keeper.Wake] (the host wakes it after each nonce
// issued; wakes while a save is under way are one) and every Every, and [Keeper.Save]
// once more after the host's servers stopped. Saves are SaveFile's: crash safe, and only
// when something changed.
type Keeper struct {
	Nonces *Nonces       // required
	Path   string        // required: the file
	Every  time.Duration // DefaultSaveEvery when zero
	Clock  clock.Clock   // nil: clock.Real
	Logger *slog.Logger  // a line for a damaged, unreadable or unwritable file; nil discards

	once sync.Once
	wake chan struct{}
}

func (k *Keeper) init() {
	k.once.Do(func() { k.wake = make(chan struct{}, 1) })
}

func (k *Keeper) log() *slog.Logger {
	if k.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return k.Logger
}

// Load adds the nonces a previous run saved (Nonces.LoadFile) and returns how many it
// kept. A damaged file is set aside, never deleted, and logged with what was kept; an
// unreadable one is logged; either way the host starts.
func (k *Keeper) Load() int {
	n, err := k.Nonces.LoadFile(k.Path)
	var damaged *DamagedError
	switch {
	case errors.As(err, &damaged):
		k.log().Warn("boot nonces: saved file damaged; set aside", "file", k.Path, "set_aside", damaged.SetAside, "kept", n, "err", err)
	case err != nil:
		k.log().Warn("boot nonces: saved file unreadable", "file", k.Path, "err", err)
	case n > 0:
		k.log().Info("boot nonces: kept across the restart", "nonces", n)
	}
	return n
}

// Wake asks Run to save now; it never blocks.
func (k *Keeper) Wake() {
	k.init()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Save writes the nonces now when they changed; a failure is logged and returned.
func (k *Keeper) Save() error {
	err := k.Nonces.SaveFile(k.Path)
	if err != nil {
		k.log().Warn("boot nonces: not saved", "file", k.Path, "err", err)
	}
	return err
}

// Run saves after each Wake and every Every until ctx ends, then returns nil.
func (k *Keeper) Run(ctx context.Context) error {
	k.init()
	every := k.Every
	if every <= 0 {
		every = DefaultSaveEvery
	}
	for {
		t := clock.Or(k.Clock).AfterFunc(every, k.Wake)
		select {
		case <-k.wake:
			t.Stop()
			k.Save()
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}
