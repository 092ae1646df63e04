package cluster

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/topicfs/topicfs/backend"
)

// outageWindow is how long a lookup that could not reach the cluster
// answers the lookups after it at once with its error. The kernel lets
// one lookup of a name run and queues the others behind it; each would
// send its own request once the one before failed, so N processes
// opening files under one topic of a cluster that stopped answering
// waited N request timeouts. A lookup after the window asks again.
// The queued lookups come within milliseconds of the failure; an answer
// from any broker since (a cluster back) ends the window early.
const outageWindow = 500 * time.Millisecond

// outage is the last failure of a topic lookup to reach the cluster.
type outage struct {
	mu  sync.Mutex
	err error
	at  time.Time
}

// recent returns the failure of a lookup within outageWindow, or nil; a
// broker answer after it (answered, Unix ns) ends it.
func (o *outage) recent(answered int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil || time.Since(o.at) >= outageWindow || answered > o.at.UnixNano() {
		return nil
	}
	return fmt.Errorf("%w (a lookup %s ago had no answer either)", o.err, time.Since(o.at).Round(time.Millisecond))
}

// note remembers err if it says the cluster could not be reached, and
// forgets an earlier failure on success (err nil). It reports whether err
// begins an outage (none was remembered), which is worth a log line.
func (o *outage) note(err error) (began bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		o.err = nil
	case errors.Is(err, backend.ErrTimedOut), errors.Is(err, backend.ErrUnavailable):
		began = o.err == nil
		o.err, o.at = err, time.Now()
	}
	return began
}
