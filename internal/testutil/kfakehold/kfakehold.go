// Package kfakehold makes franz-go's in-process cluster (kfake) hold back
// requests of one kind until a test lets them go: a cluster that stops
// answering, on demand, without stopping it. Only tests import it
// (internal/archtest).
package kfakehold

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Hold makes kc hold back every request of key after the first free of
// them until release (called at the test's cleanup at the latest); count
// returns how many requests of key kc has seen since Hold. kfake answers
// other requests meanwhile.
func Hold(t testing.TB, kc *kfake.Cluster, key kmsg.Key, free int) (release func(), count func() int) {
	var (
		mu   sync.Mutex
		seen int
		once sync.Once
	)
	gate := make(chan struct{})
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	kc.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		mu.Lock()
		seen++
		held := seen > free
		mu.Unlock()
		if held {
			kc.SleepControl(func() { <-gate })
		}
		return nil, nil, false
	})
	return release, func() int {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}
