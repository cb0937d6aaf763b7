// client-go-queue: the peer of kore-bench's workqueue row. It pushes N distinct
// namespace/name string keys through client-go's rate-limited workqueue, as a
// controller built on client-go holds them: one producer adds every key while two
// workers take each one (Get), then Forget and Done it. The clock starts before the
// first Add and stops when the last key is done; the keys are made before it starts.
//
// Usage: client-go-queue N
// Prints the run's items per second on stdout, and nothing else.
//
// Build it where the Go module proxy is reachable:
//
//	cd bench/peers/client-go-queue && go mod tidy && go build
//
// and pass the binary to the suite: KORE_BENCH_CLIENT_GO_QUEUE=$PWD/client-go-queue
// bash bench/run.sh --suite runtime (docs/design/benchmarks.md).
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: client-go-queue N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "client-go-queue: N must be a positive integer, not %q\n", os.Args[1])
		os.Exit(2)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns-%d/object-%d", i%16, i)
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())

	var settled atomic.Int64
	last := make(chan struct{})
	var workers sync.WaitGroup
	for w := 0; w < 2; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				queue.Forget(key)
				queue.Done(key)
				if settled.Add(1) == int64(n) {
					close(last)
				}
			}
		}()
	}

	started := time.Now()
	go func() {
		for _, key := range keys {
			queue.Add(key)
		}
	}()
	<-last
	elapsed := time.Since(started)
	queue.ShutDown()
	workers.Wait()
	fmt.Printf("%.0f\n", float64(n)/elapsed.Seconds())
}
