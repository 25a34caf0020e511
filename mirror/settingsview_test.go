package mirror

import (
	"testing"
)

// TestSettingsInEffect: each setting in effect says where its value came
// from: the defaults before the file is read; then the file's value, the
// default for a key it leaves out, and the last good value for a key whose
// value is invalid or whose change no human pushed.
func TestSettingsInEffect(t *testing.T) {
	e := newSettingsEnv(t)
	origins := func() (map[string][3]string, bool) {
		t.Helper()
		got, loaded, err := e.store.InEffect(e.ctx, e.repo)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(settingValues(e.store.Get(e.ctx, e.repo))) {
			t.Fatalf("InEffect lists %d settings, want every one", len(got))
		}
		m := map[string][3]string{}
		for _, s := range got {
			m[s.Key] = [3]string{s.Value, s.Origin, s.Why}
		}
		return m, loaded
	}
	if m, loaded := origins(); loaded || m["poison_threshold"] != [3]string{"3", OriginDefault, ""} {
		t.Errorf("before the file is read: loaded %v, poison_threshold %v; want the default", loaded, m["poison_threshold"])
	}

	e.push("alice", "main", map[string]string{SettingsPath: threshold(5) + "require_item: yes please\n"})
	e.load()
	m, loaded := origins()
	if !loaded {
		t.Error("after the load: not loaded")
	}
	for key, want := range map[string][3]string{
		"poison_threshold": {"5", OriginFile, ""},
		"require_item":     {"false", OriginLastGood, SettingsInvalid},
		"labels.item":      {`"backlog"`, OriginDefault, ""},
	} {
		if m[key] != want {
			t.Errorf("%s = %v, want %v", key, m[key], want)
		}
	}

	e.onPush(e.push(settingsTestAgents[0], "main", map[string]string{SettingsPath: threshold(9)}))
	m, _ = origins()
	if want := [3]string{"5", OriginLastGood, SettingsChangedByAgent}; m["poison_threshold"] != want {
		t.Errorf("after an agent's push: poison_threshold = %v, want %v", m["poison_threshold"], want)
	}
}
