package helm

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestFlightGroupSharesOneFetch(t *testing.T) {
	g := NewWithT(t)
	var group flightGroup
	var fetches atomic.Int32
	release := make(chan struct{})
	fetch := func() ([]byte, error) {
		fetches.Add(1)
		<-release
		return []byte("chart"), nil
	}
	var wg sync.WaitGroup
	results := make([]string, 3)
	for i := range results {
		wg.Go(func() {
			data, err := group.do(context.Background(), "k", fetch)
			if err != nil {
				t.Error(err)
			}
			results[i] = string(data)
		})
	}
	g.Eventually(func() int { return group.waiting("k") }, 10*time.Second, time.Millisecond).Should(Equal(2))
	close(release)
	wg.Wait()
	g.Expect(fetches.Load()).To(Equal(int32(1)))
	g.Expect(results).To(HaveEach("chart"))
	g.Expect(group.calls).To(BeEmpty(), "a finished call stayed")
}

func TestFlightGroupWaiterLeavesWithItsContext(t *testing.T) {
	g := NewWithT(t)
	var group flightGroup
	release := make(chan struct{})
	defer close(release)
	go func() {
		_, _ = group.do(context.Background(), "k", func() ([]byte, error) { <-release; return nil, nil })
	}()
	g.Eventually(func() bool {
		group.mu.Lock()
		defer group.mu.Unlock()
		_, running := group.calls["k"]
		return running
	}, 10*time.Second, time.Millisecond).Should(BeTrue())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := group.do(ctx, "k", func() ([]byte, error) { return nil, nil })
	g.Expect(err).To(MatchError(context.Canceled))
}
