package service

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/mirror"
)

// Replicas on one PostgreSQL database share the periodic work (CONTRACT.md
// §10): one discovery of the App's installations, one reconcile pass, one
// redelivery catch-up and one timer pass at a time, each under a named lock
// (db.DB.TryLock) that a dying replica gives up with its connection. The
// passes' last runs are recorded in the database, so three replicas run one
// reconcile per interval between them, not three, and a replica that takes
// over after a holder died knows the pass is overdue.

var coordinationMigrations = []db.Migration{{Version: 1, SQL: `
CREATE TABLE replica_runs (
	name TEXT PRIMARY KEY,
	holder TEXT NOT NULL,
	started_at BIGINT NOT NULL,
	finished_at BIGINT NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT ''
);
`}}

// RunRecord is the last run of a shared pass, as the status page shows it.
type RunRecord struct {
	Name       string
	Holder     string
	StartedAt  time.Time
	FinishedAt time.Time // zero while running, or when the holder died
	LastError  string
}

// replicaName names this process in the runs it records: the host (a pod's
// name on Kubernetes), the process id and a random suffix.
func replicaName() string {
	host, _ := os.Hostname()
	var b [3]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// runShared runs fn as the shared pass called name if no replica holds it
// and none finished it within every; it reports whether fn ran. The run is
// recorded (holder, start, finish, error) for the next replica and the
// status page.
func (svc *Service) runShared(ctx context.Context, name string, every time.Duration, fn func(context.Context) error) (bool, error) {
	unlock, ok, err := svc.DB.TryLock(ctx, "pass/"+name)
	if err != nil || !ok {
		return false, err
	}
	defer unlock()
	last, err := svc.lastRun(ctx, name)
	if err != nil {
		return false, err
	}
	now := time.Now()
	if every > 0 && !last.FinishedAt.IsZero() && now.Sub(last.FinishedAt) < every {
		return false, nil // another replica ran it this interval
	}
	if _, err := svc.DB.Write.ExecContext(ctx, `INSERT INTO replica_runs (name, holder, started_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, started_at = excluded.started_at, finished_at = 0, last_error = ''`,
		name, svc.replica, now.UnixMilli()); err != nil {
		return false, fmt.Errorf("record the start of %s: %w", name, err)
	}
	runErr := fn(ctx)
	msg := ""
	if runErr != nil {
		msg = runErr.Error()
	}
	// Recorded even when ctx ended: the next holder must see the pass ran.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := svc.DB.Write.ExecContext(wctx, `UPDATE replica_runs SET finished_at = $1, last_error = $2
		WHERE name = $3 AND holder = $4`, time.Now().UnixMilli(), msg, name, svc.replica); err != nil {
		return true, errors.Join(runErr, fmt.Errorf("record the end of %s: %w", name, err))
	}
	return true, runErr
}

// lastRun reads the record of the shared pass called name (zero if none).
func (svc *Service) lastRun(ctx context.Context, name string) (RunRecord, error) {
	r := RunRecord{Name: name}
	var started, finished int64
	err := svc.DB.Read.QueryRowContext(ctx, `SELECT holder, started_at, finished_at, last_error FROM replica_runs WHERE name = $1`,
		name).Scan(&r.Holder, &started, &finished, &r.LastError)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read the last run of %s: %w", name, err)
	}
	r.StartedAt = time.UnixMilli(started).UTC()
	if finished > 0 {
		r.FinishedAt = time.UnixMilli(finished).UTC()
	}
	return r, nil
}

// Runs returns the last run of each shared pass.
func (svc *Service) Runs(ctx context.Context) ([]RunRecord, error) {
	var out []RunRecord
	for _, name := range []string{"discovery", "reconcile", "catchup", "sweep"} {
		r, err := svc.lastRun(ctx, name)
		if err != nil {
			return nil, err
		}
		if r.Holder != "" {
			out = append(out, r)
		}
	}
	return out, nil
}

// sweep runs the mirror's timer pass every sweepEvery until ctx ends, one
// replica at a time.
func (svc *Service) sweep(ctx context.Context) {
	t := time.NewTicker(svc.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := svc.runShared(ctx, "sweep", svc.sweepEvery/2, func(ctx context.Context) error {
			n, err := svc.Mirror.Sweep(ctx)
			if err != nil {
				return fmt.Errorf("sweep (acted %d): %w", n, err)
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			svc.Log.Warn("sweep", "err", err)
		}
	}
}

// reconcileLoop first discovers the App's installations and their
// repositories (serving what warden did not know, not serving what is gone:
// Discover) and runs the redelivery catch-up once the App's identity is
// known; then, every WARDEN_RECONCILE_INTERVAL until ctx ends (0: never), a
// discovery, a catch-up and a reconcile pass over every served repository.
// Each replica looks every interval (at most every 30 s, so a pass whose
// holder died is taken over soon); the one that finds a pass due and takes
// its lock runs it, so replicas discover once per interval between them, as
// they reconcile.
func (svc *Service) reconcileLoop(ctx context.Context) {
	defer svc.markStarted()
	if _, err := svc.runShared(ctx, "discovery", 0, svc.discoveryPass); err != nil && ctx.Err() == nil {
		svc.Log.Warn("discovery", "err", err)
	}
	if _, err := svc.App.Identity(ctx); err != nil {
		svc.Log.Warn("catch-up at start skipped: the App's identity is unknown", "err", err)
	} else if _, err := svc.runShared(ctx, "catchup", 0, svc.catchUpPass); err != nil && ctx.Err() == nil {
		svc.Log.Warn("catch-up", "err", err)
	}
	svc.markStarted()
	every := svc.Settings.ReconcileInterval
	if every <= 0 || svc.noReconcile {
		return
	}
	t := time.NewTicker(min(every, 30*time.Second))
	defer t.Stop()
	for {
		if _, err := svc.runShared(ctx, "discovery", every, svc.discoveryPass); err != nil && ctx.Err() == nil {
			svc.Log.Warn("discovery", "err", err)
		}
		ran, err := svc.runShared(ctx, "reconcile", every, func(ctx context.Context) error {
			_, cerr := svc.runShared(ctx, "catchup", 0, svc.catchUpPass)
			results, rerr := svc.Mirror.ReconcileAll(ctx, mirror.ReconcileOptions{})
			svc.reconciled.note(results, svc.clockNow())
			return errors.Join(cerr, rerr)
		})
		if err != nil && ctx.Err() == nil {
			svc.Log.Warn("reconcile", "err", err)
		} else if ran {
			svc.Log.Debug("reconcile pass done", "replica", svc.replica)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// discoveryPass is the shared pass "discovery": Discover, whose result the
// mirror logs.
func (svc *Service) discoveryPass(ctx context.Context) error {
	_, err := svc.Discover(ctx)
	return err
}

func (svc *Service) catchUpPass(ctx context.Context) error {
	_, err := svc.CatchUp(ctx)
	return err
}
