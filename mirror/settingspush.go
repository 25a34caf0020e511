package mirror

// SettingsPushFromPayload reads a push webhook payload for OnPush (the
// handler decodes a push once and calls settingsPush itself).
func SettingsPushFromPayload(payload []byte) (SettingsPush, error) {
	p, err := decodePush(payload)
	if err != nil {
		return SettingsPush{}, err
	}
	return p.settingsPush(), nil
}

// settingsPush is what the settings store needs of a push. Touched is set
// when a listed commit added, modified or removed SettingsPath, and
// whenever the list may not show every commit (commitsIncomplete); Listed
// only in the first case.
func (p *pushPayload) settingsPush() SettingsPush {
	out := SettingsPush{Ref: p.Ref, After: p.After, PusherLogin: p.Pusher.Name, SenderLogin: p.Sender.Login,
		SenderType: p.Sender.Type, PushedAt: p.pushTime()}
	if p.Deleted {
		return out
	}
	for _, c := range p.Commits {
		if c.touches(SettingsPath) {
			out.Touched, out.Listed = true, true
		}
	}
	if p.commitsIncomplete() {
		out.Touched = true
	}
	return out
}
