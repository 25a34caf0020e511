package mirror

import (
	"sync"
	"testing"
)

// TestKeyedMutex: holders of one key are serialised (no two inside at
// once), other keys are not held up, and an idle key is forgotten.
func TestKeyedMutex(t *testing.T) {
	var k keyedMutex
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	worst := 0
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"a", "b"}[i%2]
			unlock := k.lock(key)
			mu.Lock()
			inside[key]++
			worst = max(worst, inside[key])
			mu.Unlock()
			mu.Lock()
			inside[key]--
			mu.Unlock()
			unlock()
		}()
	}
	wg.Wait()
	if worst != 1 {
		t.Fatalf("%d holders of one key at once, want 1", worst)
	}
	if len(k.locks) != 0 {
		t.Fatalf("%d idle keys kept", len(k.locks))
	}
}
