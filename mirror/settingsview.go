package mirror

import (
	"context"
	"strings"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Where a setting in effect came from (the status page's settings table).
const (
	// OriginFile: the repository's settings file sets the value.
	OriginFile = "file"
	// OriginDefault: the value is the default (the file leaves the key out,
	// sets it to the default, or was never read).
	OriginDefault = "default"
	// OriginLastGood: the file asks for something warden did not take (an
	// invalid value, or a change no human pushed), so the value last in
	// effect stays.
	OriginLastGood = "last good"
)

// SettingInEffect is one setting as warden applies it to a repository.
type SettingInEffect struct {
	Key    string // the dotted key of .github/backlog.yml
	Value  string // as the file would write it
	Origin string // OriginFile, OriginDefault or OriginLastGood
	// Why says, for OriginLastGood, the finding that kept the value.
	Why string
}

// InEffect lists every setting in effect for r, in the file's order, with
// where its value came from. Like Get it never calls GitHub. warden keeps
// the settings in effect, not the file, so a key the file sets to its
// default value reads as OriginDefault. Loaded is false when nothing is
// stored for r yet (its settings file was not read: every value is the
// default).
func (s *SettingsStore) InEffect(ctx context.Context, r store.Repo) (settings []SettingInEffect, loaded bool, err error) {
	rec, found, err := s.read(ctx, r.ID)
	if err != nil {
		return nil, false, err
	}
	s.remember(r.ID, rec, found)
	defaults := settingValues(gating.DefaultSettings())
	for i, kv := range settingValues(rec.settings) {
		si := SettingInEffect{Key: kv[0], Value: kv[1], Origin: OriginFile}
		if kv[1] == defaults[i][1] || !found {
			si.Origin = OriginDefault
		}
		for _, p := range rec.problems {
			if p.Key == "" && p.Code == SettingsInvalid || p.Key == kv[0] || strings.HasPrefix(kv[0], p.Key+".") && p.Key != "" {
				si.Origin, si.Why = OriginLastGood, p.Code
				break
			}
		}
		settings = append(settings, si)
	}
	return settings, found, nil
}
