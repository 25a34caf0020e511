package mirror

import (
	"slices"

	"github.com/wardenhq/warden/gating"
)

// SettingsKeys lists every key ParseSettingsFile accepts in
// `.github/backlog.yml`, sorted: the leaf settings by dotted key
// (labels.item) and the keys that group them (labels, defaults). The user
// documentation (docs/settings.md) is held to this list by a test.
func SettingsKeys() []string {
	keys := append(sortedKeys(settingFields), settingGroups...)
	slices.Sort(keys)
	return keys
}

// SettingsDefaults gives the value each leaf setting takes when the file
// leaves it out (or there is no file), by dotted key, written as warden
// writes values in its settings findings ("backlog", 3, false, []).
func SettingsDefaults() map[string]string {
	out := map[string]string{}
	for _, v := range settingValues(gating.DefaultSettings()) {
		out[v[0]] = v[1]
	}
	return out
}
