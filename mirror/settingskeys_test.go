package mirror

import (
	"slices"
	"testing"

	"github.com/wardenhq/warden/gating"
)

func TestSettingsKeys(t *testing.T) {
	keys := SettingsKeys()
	if !slices.IsSorted(keys) {
		t.Errorf("SettingsKeys is not sorted: %v", keys)
	}
	for _, k := range []string{"labels", "labels.item", "defaults.phase", "poison_threshold", "dry_run"} {
		if !slices.Contains(keys, k) {
			t.Errorf("SettingsKeys lacks %s", k)
		}
	}
	// Every key but a group is a leaf setting the parser reads.
	for _, k := range keys {
		if slices.Contains(settingGroups, k) {
			continue
		}
		if _, ok := settingFields[k]; !ok {
			t.Errorf("SettingsKeys lists %s, which the parser does not read", k)
		}
	}
	def := SettingsDefaults()
	for k, want := range map[string]string{"labels.item": `"backlog"`, "poison_threshold": "3", "check_run": "true"} {
		if def[k] != want {
			t.Errorf("SettingsDefaults()[%s] = %q, want %q", k, def[k], want)
		}
	}
	if len(def) != len(settingValues(gating.DefaultSettings())) {
		t.Errorf("SettingsDefaults has %d entries, settingValues %d", len(def), len(settingValues(gating.DefaultSettings())))
	}
}
