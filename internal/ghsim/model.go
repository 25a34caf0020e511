package ghsim

import "time"

// Repo is a repository and everything warden reads or writes in it. Issues
// and pull requests share one number space, as on GitHub.
type Repo struct {
	ID            int64
	Owner         *User
	Name          string
	FullName      string
	DefaultBranch string
	Private       bool
	Install       *Installation
	CreatedAt     time.Time

	Labels        map[string]*Label // by lower-case name
	Issues        map[int]*Issue    // issues and pull requests, by number
	Comments      map[int64]*Comment
	Collaborators map[string]string // lower-case login -> role_name (read, triage, write, maintain, admin)
	lastNumber    int

	// Git: branch heads and the commit graph (each commit holds its whole tree).
	Branches map[string]string // branch -> head SHA
	Commits  map[string]*Commit
	Pulls    map[int]*Pull // by number (the Issue of the same number has IsPull)
	// ReviewComments are the pull requests' review comments, by id.
	ReviewComments map[int64]*ReviewComment

	CheckSuites map[int64]*CheckSuite
	CheckRuns   map[int64]*CheckRun
	// Statuses are commit statuses (another CI's legacy status API), oldest first.
	Statuses []*CommitStatus

	// agent is GitHub's coding agent on this repository (codingagent.go):
	// nil until Sim.EnableCodingAgent.
	agent *codingAgentRepo
}

// Label is a repository label.
type Label struct {
	ID          int64
	Name        string
	Color       string
	Description string
	Default     bool
}

// Issue is an issue or the issue half of a pull request.
type Issue struct {
	ID          int64
	Number      int
	Title       string
	Body        string
	User        *User
	State       string // open, closed
	StateReason string // completed, not_planned, reopened, or ""
	Labels      []*Label
	Assignees   []*User // in the order added, at most maxAssignees (assignees.go)
	Locked      bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ClosedAt    *time.Time
	ClosedBy    *User
	IsPull      bool
	ViaApp      bool // created by the App (performed_via_github_app)

	CommentIDs []int64 // in creation order, deleted ones removed
	Events     []*IssueEvent
	Reactions  []*Reaction
	Parent     *Issue
	SubIssues  []*Issue
	Deleted    bool
	// Repo is the repository the issue belongs to (set by the issue side;
	// issueRepoLocked finds it when another part of the simulator made the
	// issue without it).
	Repo *Repo
}

// Comment is an issue (or pull request conversation) comment.
type Comment struct {
	ID        int64
	Issue     *Issue
	User      *User
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time
	Reactions []*Reaction
	ViaApp    bool
}

// IssueEvent is one row of GET /repos/{o}/{r}/issues/{n}/events.
type IssueEvent struct {
	ID        int64
	Event     string // labeled, unlabeled, closed, reopened, renamed, ...
	Actor     *User
	Label     *Label // a copy: name and color as they were
	CommitID  string
	CreatedAt time.Time
	ViaApp    bool
	// renamed: the title before and after.
	RenameFrom, RenameTo string
	// closed, reopened: the issue's state_reason after the change.
	StateReason string
	// assigned, unassigned: who was assigned or unassigned.
	Assignee *User
}

// Reaction is an emoji reaction.
type Reaction struct {
	ID        int64
	User      *User
	Content   string
	CreatedAt time.Time
}

// Commit is a commit with its full tree (path -> content).
type Commit struct {
	SHA       string
	Parents   []string
	Message   string
	Author    *User
	Time      time.Time
	Files     map[string]string
	TreeSHA   string
	Committer *User
	// Seq orders commits by creation: a commit's Seq exceeds its parents'.
	Seq int64
}

// Pull is the pull-request half of an issue.
type Pull struct {
	ID             int64 // the pull request's own id (not the issue's)
	Issue          *Issue
	Head, Base     string // branch names
	HeadSHA        string
	BaseSHA        string
	Draft          bool
	Merged         bool
	MergedAt       *time.Time
	MergedBy       *User
	MergeCommitSHA string
	// Mergeable is nil while GitHub "computes" it. It is reported only when
	// MergeableSet (a test pinned it); otherwise it is computed from the
	// branches (a three-way merge at file level).
	Mergeable           *bool
	MergeableSet        bool
	MaintainerCanModify bool
}

// CheckSuite is a check suite on a head commit.
type CheckSuite struct {
	ID         int64
	App        *CheckApp // nil: the simulator's App
	HeadSHA    string
	Before     string // the push's before SHA, "" when unknown
	After      string
	HeadBranch string
	Status     string
	Conclusion string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// CheckRun is a check run of the App's, or of another CI (App non-nil).
type CheckRun struct {
	ID         int64
	App        *CheckApp // nil: the simulator's App
	Suite      *CheckSuite
	Name       string
	HeadSHA    string
	Status     string
	Conclusion string
	ExternalID string
	DetailsURL string
	Title      string
	Summary    string
	Text       string
	// Annotations are the run's annotations, in the order sent: each
	// create or update appends its output.annotations (checks.go).
	Annotations []CheckAnnotation
	StartedAt   time.Time
	CompletedAt *time.Time
}

// CheckApp is another GitHub App that posts check runs (a CI), as opposed to
// the simulator's own App (nil wherever a *CheckApp is expected).
type CheckApp struct {
	ID   int64
	Slug string
	Name string
}

// CommitStatus is one commit status (POST /statuses/{sha}) from another CI.
type CommitStatus struct {
	ID          int64
	SHA         string
	State       string // error, failure, pending, success
	Context     string
	Description string
	TargetURL   string
	Creator     *User
	CreatedAt   time.Time
	UpdatedAt   time.Time
}
