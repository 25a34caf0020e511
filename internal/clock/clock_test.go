package clock

import (
	"testing"
	"time"
)

func TestManual(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("new: %v", c.Now())
	}
	c.Advance(90 * time.Second)
	if want := t0.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("advanced: %v, want %v", c.Now(), want)
	}
	c.Set(t0)
	if !c.Now().Equal(t0) {
		t.Fatalf("set: %v", c.Now())
	}
}

func TestOffset(t *testing.T) {
	var c Offset
	c.Advance(time.Hour)
	if d := time.Until(c.Now()); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("an hour ahead reads %v ahead", d)
	}
	c.Set(-time.Hour)
	if d := time.Since(c.Now()); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("an hour behind reads %v behind", d)
	}
}
