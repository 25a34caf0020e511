package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// settingsCacheTTL is how long Get trusts its in-memory copy before it reads
// the table again (another replica may have applied a push meanwhile).
const settingsCacheTTL = 30 * time.Second

// settingsWriteTries bounds the optimistic-concurrency retries of a write.
const settingsWriteTries = 5

// SettingsStore keeps each served repository's settings in effect
// (CONTRACT.md §2): an in-memory cache in front of a durable table, filled
// by Load when a repository is first served and changed by OnPush under the
// human-push rule. It is safe for concurrent use, also by several replicas
// sharing one database.
type SettingsStore struct {
	// IsRecordedAgent reports whether login is an agent warden has recorded
	// in the repository
	// (a marker poster with write access, CONTRACT.md §4); nil means none.
	// Set it before the store is used.
	IsRecordedAgent func(repoID int64, login string) bool

	rows   *store.SettingsRows
	gh     Clients
	agents []string
	log    *slog.Logger
	now    func() time.Time
	ttl    time.Duration

	mu    sync.Mutex
	cache map[int64]settingsCached
}

type settingsCached struct {
	settings gating.Settings
	problems []SettingsProblem
	found    bool
	at       time.Time
}

// SettingsPush is what OnPush needs of a push delivery; SettingsPushFromPayload
// reads it from the webhook payload.
type SettingsPush struct {
	Ref         string // refs/heads/<branch>
	After       string // the pushed head SHA (all zeros: the branch was deleted)
	PusherLogin string // pusher.name: who pushed, or for a merge the person who merged
	SenderLogin string // sender.login
	SenderType  string // sender.type: User, Bot, Organization
	// Touched: a pushed commit added, modified or removed SettingsPath, or
	// the commit list may be incomplete (truncated, a force push).
	Touched bool
	// Listed: a commit the payload lists added, modified or removed
	// SettingsPath (what a push to a branch other than the default must
	// show to be checked: a branch created from the default one lists no
	// commit and gets no run).
	Listed bool
	// PushedAt is when GitHub took the push (repository.pushed_at, else the
	// head commit's timestamp; zero when the payload has neither).
	PushedAt time.Time
}

// OpenSettingsStore returns the settings store over the store's settings
// rows. gh may be nil for a store that only reads (Load and OnPush then
// fail); agents are the WARDEN_AGENTS logins.
func OpenSettingsStore(st *store.Store, gh Clients, agents []string, log *slog.Logger) (*SettingsStore, error) {
	if st == nil {
		return nil, errors.New("open the settings store: no store")
	}
	if st.Settings == nil {
		return nil, errors.New("open the settings store: the store has no settings rows")
	}
	if log == nil {
		log = slog.Default()
	}
	return &SettingsStore{rows: st.Settings, gh: gh, agents: slices.Clone(agents), log: log, now: time.Now, ttl: settingsCacheTTL,
		cache: map[int64]settingsCached{}}, nil
}

// Get returns the settings in effect for r. It never calls GitHub: it
// answers from memory, else from the table; a repository with nothing
// stored (not loaded yet) gets DefaultSettings, and so does one whose row
// cannot be read and that has no copy in memory (fail-safe; logged).
func (s *SettingsStore) Get(ctx context.Context, r store.Repo) gating.Settings {
	c, ok := s.cached(r.ID)
	if ok && s.now().Sub(c.at) < s.ttl {
		return cloneSettings(c.settings)
	}
	rec, found, err := s.read(ctx, r.ID)
	if err != nil {
		if ok {
			s.log.Warn("settings: reading the table failed; using the copy in memory", "repo", r.FullName, "err", err)
			return cloneSettings(c.settings)
		}
		s.log.Warn("settings: reading the table failed; using the defaults", "repo", r.FullName, "err", err)
		return gating.DefaultSettings()
	}
	s.remember(r.ID, rec, found)
	if !found {
		return gating.DefaultSettings()
	}
	return cloneSettings(rec.settings)
}

// Problems returns the repository's current settings findings
// (settings-invalid, settings-changed-by-agent) for the status page, the
// API and the report; none for a repository with nothing stored.
func (s *SettingsStore) Problems(ctx context.Context, repoID int64) ([]SettingsProblem, error) {
	if c, ok := s.cached(repoID); ok && s.now().Sub(c.at) < s.ttl {
		return slices.Clone(c.problems), nil
	}
	rec, found, err := s.read(ctx, repoID)
	if err != nil {
		return nil, err
	}
	s.remember(repoID, rec, found)
	return slices.Clone(rec.problems), nil
}

// Forget drops a repository's settings (it is no longer served); serving
// it again starts from Load.
func (s *SettingsStore) Forget(ctx context.Context, repoID int64) error {
	if err := s.rows.Forget(ctx, repoID); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.cache, repoID)
	s.mu.Unlock()
	return nil
}

// Load reads SettingsPath from r's default branch (one contents GET; 404 is
// an absent file, the defaults) and records it as the settings in effect,
// with the file's settings-invalid problems. It is for a repository warden
// starts serving: there is no push to judge, so the file takes effect as
// it is.
//
// A repository that already has settings stored is not reset by Load:
// nothing says who made the file differ from them, so a file that would
// change them is judged as a push not made by a human (the settings stay,
// settings-changed-by-agent is reported until a human pushes the file); a
// file that agrees with them refreshes its problems. A GitHub error changes
// nothing and is returned.
func (s *SettingsStore) Load(ctx context.Context, r store.Repo) (string, error) {
	gh, err := s.client(r)
	if err != nil {
		return "", err
	}
	release, err := s.lock(ctx, r.ID)
	if err != nil {
		return "", err
	}
	defer release()
	file, err := s.fetch(ctx, gh, r, "")
	if err != nil {
		return "", err
	}
	for try := 0; try < settingsWriteTries; try++ {
		prev, found, err := s.read(ctx, r.ID)
		if err != nil {
			return "", err
		}
		var next settingsRecord
		var outcome string
		switch proposed, problems := file.parse(prev.settings); {
		case !found:
			next = settingsRecord{settings: proposed, problems: problems}
			outcome = "settings loaded: " + describeLoaded(file, proposed, problems)
		case len(settingsDiff(prev.settings, proposed)) == 0:
			next = prev
			next.settings, next.problems, next.pending = proposed, problems, nil
			outcome = "settings reloaded: the file agrees with the settings in effect" + problemCount(problems)
		default:
			next = prev
			f := file
			f.By = "(read on load; no push to judge)"
			next.pending = &f
			next.problems = next.findings()
			outcome = fmt.Sprintf("settings reloaded: the file would change %s, but no human push brought it; the settings in effect stay (%s)",
				fieldList(settingsDiff(prev.settings, proposed)), SettingsChangedByAgent)
		}
		ok, err := s.save(ctx, r.ID, prev, found, next)
		if err != nil {
			return "", err
		}
		if ok {
			s.log.Info("settings loaded", "repo", r.FullName, "outcome", outcome)
			return outcome, nil
		}
	}
	return "", fmt.Errorf("load the settings of %s: the row kept changing under %d tries", r.FullName, settingsWriteTries)
}

// OnPush follows a push to a served repository (CONTRACT.md §2, §3). It
// acts only on a push to the default branch that touched SettingsPath
// (p.Touched): it reads the file at the pushed head (one contents GET) and
// lets it take effect if a human pushed it; otherwise the settings stay and
// settings-changed-by-agent names each field the file would change.
// Deleting the file is a change back to the defaults, under the same rule.
//
// Deliveries may come twice and out of order: a push already judged
// changes nothing, and a push older than the one whose file is in effect
// (pushed_at, or for two in the same second the commit graph) is ignored.
// A GitHub or database error changes nothing and is returned (the
// dispatcher retries).
func (s *SettingsStore) OnPush(ctx context.Context, r store.Repo, p SettingsPush) (string, error) {
	out, _, err := s.onPush(ctx, r, p)
	return out, err
}

// onPush is OnPush, also returning what the backlog/settings check run on
// the pushed head is to say (settingscheck.go): nil when the push brings
// no run (it did not touch SettingsPath, deleted its branch, or touched
// it on another branch only as far as the payload cannot tell). A push to
// another branch that lists a commit touching the file is checked, not
// judged: its file is read at the head (one contents GET) against the
// settings in effect, and nothing changes.
func (s *SettingsStore) onPush(ctx context.Context, r store.Repo, p SettingsPush) (string, *settingsCheck, error) {
	branch, isBranch := strings.CutPrefix(p.Ref, "refs/heads/")
	if r.DefaultBranch == "" {
		return "", nil, fmt.Errorf("settings of %s: no default branch recorded for the repository", r.FullName)
	}
	switch {
	case isBranch && branch != r.DefaultBranch && !isZeroSHA(p.After) && p.Listed:
		check, err := s.checkBranch(ctx, r, p.After, branch)
		if err != nil {
			return "", nil, err
		}
		return "settings: not a push to the default branch; " + SettingsPath + " checked", check, nil
	case !isBranch || branch != r.DefaultBranch:
		return "settings: not a push to the default branch", nil, nil
	case isZeroSHA(p.After):
		return "settings: branch deleted", nil, nil
	case !p.Touched:
		return "settings: " + SettingsPath + " not touched", nil, nil
	}
	gh, err := s.client(r)
	if err != nil {
		return "", nil, err
	}
	release, err := s.lock(ctx, r.ID)
	if err != nil {
		return "", nil, err
	}
	defer release()
	for try := 0; try < settingsWriteTries; try++ {
		outcome, check, done, err := s.onPushOnce(ctx, gh, r, p)
		if err != nil || done {
			return outcome, check, err
		}
	}
	return "", nil, fmt.Errorf("settings of %s: the row kept changing under %d tries", r.FullName, settingsWriteTries)
}

// onPushOnce judges one push against the row as read now; done is false
// when another writer changed the row first (try again).
func (s *SettingsStore) onPushOnce(ctx context.Context, gh *github.Client, r store.Repo, p SettingsPush) (outcome string, check *settingsCheck, done bool, err error) {
	prev, found, err := s.read(ctx, r.ID)
	if err != nil {
		return "", nil, false, err
	}
	sha := shortSHA(p.After)
	again := &settingsCheck{sha: p.After, branch: r.DefaultBranch, onDefault: true, rejudge: true}
	if p.After == prev.sourceSHA || (prev.pending != nil && p.After == prev.pending.SHA) {
		return "settings: push " + sha + " already judged; nothing changed", again, true, nil
	}
	if c, err := s.order(ctx, gh, r, prev.sourceSHA, prev.pushedAt, p); err != nil {
		return "", nil, false, err
	} else if c == 0 {
		return "settings: push " + sha + " already judged; nothing changed", again, true, nil
	} else if c < 0 {
		again.older = prev.sourceSHA
		return fmt.Sprintf("settings: push %s is older than push %s, whose file is in effect; ignored", sha, shortSHA(prev.sourceSHA)), again, true, nil
	}
	file, err := s.fetch(ctx, gh, r, p.After)
	if err != nil {
		return "", nil, false, err
	}
	file.SHA, file.By = p.After, pushedBy(p)
	if !p.PushedAt.IsZero() {
		file.PushedAt = p.PushedAt.Unix()
	}
	proposed, problems := file.parse(prev.settings)
	human, why := s.pushedByHuman(r.ID, p, prev.settings.Agents, proposed.Agents)
	check = &settingsCheck{sha: p.After, branch: r.DefaultBranch, onDefault: true, absent: file.Absent, human: human, why: why,
		by: file.By, changes: settingsDiff(prev.settings, proposed)}
	if human {
		check.problems = slices.Clone(problems)
	} else {
		_, check.problems = DecideSettingsChange(prev.settings, proposed, problems, false)
		check.problems = locateProblems(file.Content, check.problems)
	}
	next := prev
	if human {
		next.settings, next.problems = DecideSettingsChange(prev.settings, proposed, problems, true)
		next.sourceSHA, next.pushedAt, next.changedBy = file.SHA, file.PushedAt, file.By
		if prev.pending != nil {
			// An agent's push newer than this one stays judged, now
			// against the settings this push brings.
			c, err := s.order(ctx, gh, r, prev.pending.SHA, prev.pending.PushedAt, p)
			if err != nil {
				return "", nil, false, err
			}
			if c > 0 {
				next.pending = nil
			}
		}
		next.problems = next.findings()
		changes := settingsDiff(prev.settings, next.settings)
		if len(changes) == 0 {
			outcome = fmt.Sprintf("settings: push %s by %s changes no setting", sha, file.By)
		} else {
			outcome = fmt.Sprintf("settings changed by %s (push %s): %s", file.By, sha, changeList(changes))
		}
		outcome += problemCount(problems)
	} else {
		if prev.pending != nil {
			c, err := s.order(ctx, gh, r, prev.pending.SHA, prev.pending.PushedAt, p)
			if err != nil {
				return "", nil, false, err
			}
			if c == 0 {
				return "settings: push " + sha + " already judged; nothing changed", again, true, nil
			}
			if c < 0 {
				again.older = prev.pending.SHA
				return fmt.Sprintf("settings: push %s is older than push %s, already judged; ignored", sha, shortSHA(prev.pending.SHA)), again, true, nil
			}
		}
		f := file
		next.pending = &f
		next.problems = next.findings()
		if changes := settingsDiff(prev.settings, proposed); len(changes) == 0 {
			outcome = fmt.Sprintf("settings: push %s by %s (%s) changes no setting", sha, file.By, why)
		} else {
			outcome = fmt.Sprintf("settings change refused: push %s by %s (%s) would change %s; the settings in effect stay (%s)",
				sha, file.By, why, fieldList(changes), SettingsChangedByAgent)
		}
		outcome += problemCount(problems)
	}
	ok, err := s.save(ctx, r.ID, prev, found, next)
	if err != nil || !ok {
		return "", nil, false, err
	}
	if human {
		s.log.Info("settings push judged", "repo", r.FullName, "sha", p.After, "by", file.By, "human", true, "outcome", outcome)
	} else {
		s.log.Warn("settings push judged", "repo", r.FullName, "sha", p.After, "by", file.By, "human", false, "why", why, "outcome", outcome)
	}
	return outcome, check, true, nil
}

// settingsFile is SettingsPath as read at one commit, kept whole for a
// push that did not take effect so that it can be judged again against
// later settings.
type settingsFile struct {
	SHA      string `json:"sha,omitempty"`      // the push's head; "" when read by Load
	PushedAt int64  `json:"pushedAt,omitempty"` // unix seconds, GitHub's clock; 0 unknown
	By       string `json:"by,omitempty"`
	Absent   bool   `json:"absent,omitempty"`
	Content  []byte `json:"content,omitempty"` // the file's bytes (base64 in JSON: any bytes survive a TEXT column)
	// Unreadable is why the file could not be read (not decodable, too
	// large, not a file): a settings-invalid finding, every field keeping
	// its last good value.
	Unreadable string `json:"unreadable,omitempty"`
}

// parse reads the file against the settings last in effect.
func (f settingsFile) parse(lastGood gating.Settings) (gating.Settings, []SettingsProblem) {
	switch {
	case f.Absent:
		return gating.DefaultSettings(), nil
	case f.Unreadable != "":
		return withDefaults(lastGood), []SettingsProblem{{Code: SettingsInvalid, Message: f.Unreadable}}
	}
	return ParseSettingsFile(f.Content, lastGood)
}

// fetch reads SettingsPath at ref ("" = the default branch) with one
// contents GET. 404 is an absent file; 404 for a commit GitHub does not
// know, and any other failure, is an error.
func (s *SettingsStore) fetch(ctx context.Context, gh *github.Client, r store.Repo, ref string) (settingsFile, error) {
	owner, name, ok := strings.Cut(r.FullName, "/")
	if !ok {
		return settingsFile{}, fmt.Errorf("read %s: repository name %q is not OWNER/REPO", SettingsPath, r.FullName)
	}
	at := "the default branch"
	if ref != "" {
		at = shortSHA(ref)
	}
	fc, dir, resp, err := gh.Repositories.GetContents(ctx, owner, name, SettingsPath, &github.RepositoryContentGetOptions{Ref: ref})
	if err != nil {
		var er *github.ErrorResponse
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			if errors.As(err, &er) && strings.HasPrefix(er.Message, "No commit found") {
				return settingsFile{}, fmt.Errorf("read %s of %s at %s: GitHub does not know the commit: %w", SettingsPath, r.FullName, at, err)
			}
			return settingsFile{Absent: true}, nil
		}
		return settingsFile{}, fmt.Errorf("read %s of %s at %s: %w", SettingsPath, r.FullName, at, err)
	}
	keep := "; every setting keeps its last good value"
	switch {
	case fc == nil && dir != nil:
		return settingsFile{Unreadable: SettingsPath + " is a directory, not a file" + keep}, nil
	case fc == nil:
		return settingsFile{}, fmt.Errorf("read %s of %s at %s: GitHub answered with no content", SettingsPath, r.FullName, at)
	case fc.GetType() != "" && fc.GetType() != "file":
		return settingsFile{Unreadable: fmt.Sprintf("%s is a %s, not a file%s", SettingsPath, fc.GetType(), keep)}, nil
	case fc.GetSize() > MaxSettingsFileSize:
		return settingsFile{Unreadable: fmt.Sprintf("%s is %d bytes, over the %d warden reads%s", SettingsPath, fc.GetSize(), MaxSettingsFileSize, keep)}, nil
	}
	content, err := fc.GetContent()
	if err != nil {
		return settingsFile{Unreadable: fmt.Sprintf("%s cannot be decoded (%s)%s", SettingsPath, oneLine(err.Error()), keep)}, nil
	}
	return settingsFile{Content: []byte(content)}, nil
}

func (s *SettingsStore) client(r store.Repo) (*github.Client, error) {
	if s.gh == nil {
		return nil, fmt.Errorf("settings of %s: the store has no GitHub client", r.FullName)
	}
	gh, err := s.gh.Installation(r.Installation)
	if err != nil {
		return nil, fmt.Errorf("settings of %s: installation %d: %w", r.FullName, r.Installation, err)
	}
	return gh, nil
}

// lock serialises the writers of one repository's settings, across
// replicas on PostgreSQL (store.SettingsRows.Lock); the row's version still
// fences a write that raced one anyway.
func (s *SettingsStore) lock(ctx context.Context, repoID int64) (func(), error) {
	return s.rows.Lock(ctx, repoID)
}

func shortSHA(sha string) string {
	if sha == "" {
		return "(none)"
	}
	return cut(sha, 7)
}

func describeLoaded(f settingsFile, s gating.Settings, problems []SettingsProblem) string {
	if f.Absent {
		return "no " + SettingsPath + "; the defaults apply"
	}
	changes := settingsDiff(gating.DefaultSettings(), s)
	if len(changes) == 0 {
		return "the defaults" + problemCount(problems)
	}
	return changeList(changes) + problemCount(problems)
}

func changeList(changes []settingChange) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = fmt.Sprintf("%s %s → %s", c.field, c.from, c.to)
	}
	return strings.Join(parts, ", ")
}

func fieldList(changes []settingChange) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = c.field
	}
	return strings.Join(parts, ", ")
}

func problemCount(problems []SettingsProblem) string {
	switch len(problems) {
	case 0:
		return ""
	case 1:
		return "; 1 problem (" + SettingsInvalid + ")"
	}
	return fmt.Sprintf("; %d problems (%s)", len(problems), SettingsInvalid)
}
