package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/db"
)

func TestOpenLedgerConfig(t *testing.T) {
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "region"},
		{Config{Region: "two words"}, "region"},
		{Config{Region: "local", LeaseDefault: time.Hour, LeaseMax: time.Minute}, "default <= ceiling"},
		{Config{Region: "local", LeaseDefault: time.Millisecond}, "default <= ceiling"},
		{Config{Region: "local", Quarantine: -time.Second}, "quarantine"},
	} {
		if _, err := openLedger(ctx, d, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error naming %q", c.cfg, err, c.want)
		}
	}
	if _, err := openLedger(ctx, nil, Config{Region: "local"}); err == nil {
		t.Error("no database accepted")
	}
	// Defaults, and migrating twice is harmless.
	for range 2 {
		l, err := openLedger(ctx, d, Config{Region: "local", Quarantine: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if l.cfg.LeaseDefault != DefaultLeaseDefault || l.cfg.LeaseMax != DefaultLeaseMax || l.cfg.Quarantine != time.Hour || l.cfg.Now == nil {
			t.Fatalf("config %+v", l.cfg)
		}
	}
}

// openLedger opens the store over d and returns its ledger.
func openLedger(ctx context.Context, d *db.DB, cfg Config) (*Ledger, error) {
	s, err := Open(ctx, d, cfg)
	if err != nil {
		return nil, err
	}
	return s.Ledger, nil
}
