package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPollFor(t *testing.T) {
	ch := make(chan int, 1)
	start := time.Now()
	assert.False(t, pollFor(ch, 2*time.Millisecond), "nothing arrives")
	assert.GreaterOrEqual(t, time.Since(start), 2*time.Millisecond)
	go func() {
		time.Sleep(time.Millisecond)
		ch <- 1
	}()
	assert.True(t, pollFor(ch, time.Minute), "a value arrives while polling")
	assert.Len(t, ch, 1, "PollFor does not receive")
}
