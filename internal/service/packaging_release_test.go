package service

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"regexp"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v4"
)

// The release side of the packaging, held to the code like the rest
// (packaging_test.go runs these through packagingProblems, and
// TestPackagingChecksCanFail breaks each in one place): the version the
// Dockerfile stamps is the variable `warden version` prints; the release
// workflow pushes the image the manifests name, with that version; CI runs
// .ci/run; the Go versions agree. packaging_compose_test.go holds compose,
// packaging_context_test.go the build context.

// --- the version stamp --------------------------------------------------

var ldflagsXRe = regexp.MustCompile(`-X[= ]+([A-Za-z0-9_./-]+)\.([A-Za-z_][A-Za-z0-9_]*)=("?)\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// checkVersionStamp: the build stage's go build of ./cmd/warden passes
// -ldflags "-X main.<var>=${VERSION}" with VERSION an ARG of that stage
// declared before it, and <var> is a package-level string variable of
// cmd/warden that some function reads (what `warden version` prints).
func checkVersionStamp(files map[string]string) []string {
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf("deploy/Dockerfile: "+format, a...)) }
	stages := dockerStages(files["deploy/Dockerfile"])
	found := false
	for _, st := range stages {
		args := map[string]bool{}
		for _, in := range st {
			if in.op == "ARG" {
				name, _, _ := strings.Cut(in.args, "=")
				args[strings.TrimSpace(name)] = true
			}
			if in.op != "RUN" || !regexp.MustCompile(`\bgo build\b[^&;]*\./cmd/warden\b`).MatchString(in.args) {
				continue
			}
			for _, cmd := range regexp.MustCompile(`&&|;`).Split(in.args, -1) {
				if !strings.Contains(cmd, "./cmd/warden") || !strings.Contains(cmd, "go build") {
					continue
				}
				found = true
				m := ldflagsXRe.FindStringSubmatch(cmd)
				if m == nil {
					bad("the go build of ./cmd/warden stamps no version: want -ldflags \"-X main.version=${VERSION}\"")
					continue
				}
				pkg, name, arg := m[1], m[2], m[4]
				if pkg != "main" {
					bad("-X %s.%s: the version variable of a command is main.<name>", pkg, name)
				}
				if arg != "VERSION" || !args[arg] {
					bad("-X %s.%s=${%s}: want ${VERSION}, with ARG VERSION in the build stage before the RUN", pkg, name, arg)
				}
				if p := versionVarProblem(files, name); p != "" {
					bad("-X main.%s: %s", name, p)
				}
			}
		}
	}
	if !found {
		bad("no go build of ./cmd/warden to stamp the version into")
	}
	return out
}

// versionVarProblem says why cmd/warden's package-level name cannot carry
// the stamped version ("" when it can): -X sets only a string variable with
// no initialiser or a constant one, and the stamp is useless if nothing
// reads it.
func versionVarProblem(files map[string]string, name string) string {
	fset := token.NewFileSet()
	declared, read := false, false
	for _, path := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasPrefix(path, "cmd/warden/") || !strings.HasSuffix(path, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, files[path], 0)
		if err != nil {
			return "cmd/warden does not parse: " + err.Error()
		}
		if f.Name.Name != "main" {
			continue
		}
		var declIdent *ast.Ident
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name != name {
						continue
					}
					declared, declIdent = true, n
					if t, ok := vs.Type.(*ast.Ident); vs.Type != nil && (!ok || t.Name != "string") {
						return "declared with a type other than string"
					}
					if i < len(vs.Values) {
						if _, ok := vs.Values[i].(*ast.BasicLit); !ok {
							return "initialised with a non-constant expression (-X would not override it)"
						}
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Name == name && id != declIdent && id.Obj == nil {
				read = true // an unresolved identifier here is the package-level variable
			}
			if id, ok := n.(*ast.Ident); ok && id.Name == name && id.Obj != nil && id.Obj.Kind == ast.Var && id != declIdent {
				if vs, ok := id.Obj.Decl.(*ast.ValueSpec); ok && slices.ContainsFunc(vs.Names, func(x *ast.Ident) bool { return x == declIdent }) {
					read = true
				}
			}
			return true
		})
	}
	switch {
	case !declared:
		return "package main of cmd/warden declares no variable " + name
	case !read:
		return "nothing in cmd/warden reads " + name
	}
	return ""
}

// --- the release workflow -------------------------------------------------

type workflow struct {
	On struct {
		Push struct {
			Tags     []string `yaml:"tags"`
			Branches []string `yaml:"branches"`
		} `yaml:"push"`
	} `yaml:"on"`
	Env  map[string]string `yaml:"env"`
	Jobs map[string]struct {
		Permissions map[string]string `yaml:"permissions"`
		Steps       []struct {
			ID   string            `yaml:"id"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			With map[string]string `yaml:"with"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

var (
	pinnedRe   = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[^@]*)?@(v\d+\.\d+\.\d+|[0-9a-f]{40})$`)
	envRefRe   = regexp.MustCompile(`\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)
	imageRefRe = regexp.MustCompile(`^([a-z0-9.-]+(?::\d+)?/[a-z0-9._/-]+)(?::([A-Za-z0-9_.-]+))?$`)
)

// deploymentImage is the image manifests/deployment.yaml runs, split into
// repository and tag.
func deploymentImage(files map[string]string) (repo, tag string, err error) {
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string `yaml:"image"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(files["manifests/deployment.yaml"]), &dep); err != nil {
		return "", "", err
	}
	if len(dep.Spec.Template.Spec.Containers) == 0 {
		return "", "", fmt.Errorf("no container")
	}
	m := imageRefRe.FindStringSubmatch(dep.Spec.Template.Spec.Containers[0].Image)
	if m == nil {
		return "", "", fmt.Errorf("image %q is not registry/name[:tag]", dep.Spec.Template.Spec.Containers[0].Image)
	}
	if m[2] == "" {
		m[2] = "latest"
	}
	return m[1], m[2], nil
}

// checkRelease: .github/workflows/release.yml runs on tags v*, may write
// packages, logs in to the registry of the manifests' image with
// GITHUB_TOKEN, and builds deploy/Dockerfile from the repository root with
// docker/build-push-action (every action pinned to a release or a commit),
// passing the tag as VERSION and pushing the manifests' image under a tag
// list that holds the manifests' tag.
func checkRelease(files map[string]string) []string {
	const name = ".github/workflows/release.yml"
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf(name+": "+format, a...)) }
	text, ok := files[name]
	if !ok {
		return []string{name + " is missing: nothing publishes the image the manifests name"}
	}
	var wf workflow
	if err := yaml.Unmarshal([]byte(text), &wf); err != nil {
		return []string{name + ": " + err.Error()}
	}
	if !slices.Contains(wf.On.Push.Tags, "v*") {
		bad("on.push.tags %v lacks \"v*\": a release tag builds nothing", wf.On.Push.Tags)
	}
	repo, tag, err := deploymentImage(files)
	if err != nil {
		return append(out, "manifests/deployment.yaml: "+err.Error())
	}
	registry, _, _ := strings.Cut(repo, "/")
	expand := func(s string) string {
		return envRefRe.ReplaceAllStringFunc(s, func(m string) string { return wf.Env[envRefRe.FindStringSubmatch(m)[1]] })
	}
	pushes, logins := 0, 0
	for jname, job := range wf.Jobs {
		writes := job.Permissions["packages"] == "write"
		metaTags, metaImages := map[string]string{}, map[string]string{}
		for _, st := range job.Steps {
			if st.Uses == "" {
				continue
			}
			if !pinnedRe.MatchString(st.Uses) {
				bad("job %s uses %s, not pinned to a release (vX.Y.Z) or a commit", jname, st.Uses)
			}
			action, _, _ := strings.Cut(st.Uses, "@")
			switch action {
			case "docker/login-action":
				logins++
				if st.With["registry"] != registry {
					bad("docker/login-action logs in to %q, but the manifests' image is on %s", st.With["registry"], registry)
				}
				if !strings.Contains(st.With["password"], "secrets.GITHUB_TOKEN") {
					bad("docker/login-action's password is not secrets.GITHUB_TOKEN")
				}
			case "docker/metadata-action":
				metaImages[st.ID] = expand(st.With["images"])
				metaTags[st.ID] = st.With["tags"]
			case "docker/build-push-action":
				if st.With["push"] != "true" {
					continue
				}
				pushes++
				if !writes {
					bad("job %s pushes without permissions packages: write", jname)
				}
				if st.With["context"] != "." || st.With["file"] != "deploy/Dockerfile" {
					bad("builds context %q file %q, want context . and file deploy/Dockerfile", st.With["context"], st.With["file"])
				}
				if !regexp.MustCompile(`(?m)^\s*VERSION=\$\{\{\s*github\.ref_name\s*\}\}\s*$`).MatchString(st.With["build-args"]) {
					bad("build-args %q do not pass VERSION=${{ github.ref_name }}: the image would say version dev", st.With["build-args"])
				}
				images, tagList := "", ""
				if m := regexp.MustCompile(`^\$\{\{\s*steps\.([A-Za-z0-9_-]+)\.outputs\.tags\s*\}\}$`).FindStringSubmatch(strings.TrimSpace(st.With["tags"])); m != nil {
					images, tagList = metaImages[m[1]], metaTags[m[1]]
				} else {
					for _, t := range strings.Fields(expand(st.With["tags"])) {
						r, tg, _ := strings.Cut(t, ":")
						images, tagList = r, tagList+" type=raw,value="+tg
					}
				}
				if strings.TrimSpace(images) != repo {
					bad("pushes image %q, but manifests/deployment.yaml runs %s", strings.TrimSpace(images), repo)
				}
				if !strings.Contains(tagList, "type=raw,value="+tag) && !(tag != "latest" && strings.Contains(tagList, "type=semver")) {
					bad("pushes no %s tag, the one manifests/deployment.yaml runs (%s:%s)", tag, repo, tag)
				}
			}
		}
	}
	if pushes == 0 {
		bad("no docker/build-push-action step with push: true")
	}
	if logins == 0 {
		bad("no docker/login-action step: the push would be refused")
	}
	return out
}

// checkCI: a workflow runs .ci/run.
func checkCI(files map[string]string) []string {
	for name, text := range files {
		if !strings.HasPrefix(name, ".github/workflows/") {
			continue
		}
		var wf workflow
		if yaml.Unmarshal([]byte(text), &wf) != nil {
			continue
		}
		for _, job := range wf.Jobs {
			for _, st := range job.Steps {
				if regexp.MustCompile(`(^|\s)(bash\s+)?\.ci/run(\s|$)`).MatchString(st.Run) {
					return nil
				}
			}
		}
	}
	return []string{".github/workflows: no workflow step runs .ci/run (the README says CI runs it)"}
}

// checkGoVersions: the Dockerfile's GO_VERSION and the CI container's Go
// image are the go.mod's language version (a newer toolchain in go.mod
// would make the image's go download another).
func checkGoVersions(files map[string]string) []string {
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(files["go.mod"])
	if m == nil {
		return []string{"go.mod: no go directive"}
	}
	want := m[1]
	var out []string
	if d := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)`).FindStringSubmatch(files["deploy/Dockerfile"]); d == nil || d[1] != want {
		out = append(out, fmt.Sprintf("deploy/Dockerfile: ARG GO_VERSION %v, want go.mod's %s", d, want))
	}
	for name, text := range files {
		if !strings.HasPrefix(name, ".github/workflows/") {
			continue
		}
		for _, img := range regexp.MustCompile(`(?m)^\s*container:\s*golang:(\d+\.\d+)`).FindAllStringSubmatch(text, -1) {
			if img[1] != want {
				out = append(out, fmt.Sprintf("%s runs in golang:%s, but go.mod says go %s", name, img[1], want))
			}
		}
	}
	return out
}
