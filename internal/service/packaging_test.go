package service

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v4"
)

// The packaging files (deploy/, manifests/) are checked against what the
// service actually does: every check runs over the files' text, so
// TestPackagingChecksCanFail can break each file in one place and see the
// check that guards it fail.

const repoRoot = "../.."

// packagingFiles reads every file under deploy/, manifests/ and
// .github/workflows/, the root .dockerignore, and cmd/warden's non-test Go
// files (where the version variable the Dockerfile stamps lives), keyed by
// slash path relative to the repository root.
func packagingFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, f := range []string{".dockerignore", "go.mod"} {
		if b, err := os.ReadFile(filepath.Join(repoRoot, f)); err == nil {
			files[f] = string(b)
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"deploy", "manifests", ".github/workflows", "cmd/warden"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				if errors.Is(err, os.ErrNotExist) && p == filepath.Join(repoRoot, dir) {
					return filepath.SkipDir // checked where it is required
				}
				return err
			}
			if dir == "cmd/warden" && (!strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go")) {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repoRoot, p)
			files[filepath.ToSlash(rel)] = string(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func configSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "internal/config/config.go"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPackaging(t *testing.T) {
	for _, p := range packagingProblems(packagingFiles(t), configSource(t)) {
		t.Error(p)
	}
}

// TestPackagingChecksCanFail breaks the packaging in one place at a time and
// requires the suite to report it.
func TestPackagingChecksCanFail(t *testing.T) {
	files, src := packagingFiles(t), configSource(t)
	if p := packagingProblems(files, src); len(p) > 0 {
		t.Skip("the real files already fail TestPackaging")
	}
	mutations := []struct {
		file, old, new, want string
	}{
		{"manifests/deployment.yaml", "replicas: 3", "replicas: 2", "replicas"},
		{"manifests/deployment.yaml", "path: /healthz", "path: /livez", "liveness"},
		{"manifests/deployment.yaml", "path: /readyz", "path: /healthz", "readiness"},
		{"manifests/deployment.yaml", "containerPort: 8080", "containerPort: 8081", "WARDEN_LISTEN"},
		{"manifests/configmap.yaml", `WARDEN_LISTEN: ":8080"`, `WARDEN_LISTEN: ":8081"`, "WARDEN_LISTEN"},
		{"manifests/deployment.yaml", "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot"},
		{"manifests/deployment.yaml", "runAsUser: 65532", "runAsUser: 0", "runAsUser"},
		{"manifests/deployment.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"manifests/deployment.yaml", `drop: ["ALL"]`, `drop: ["NET_RAW"]`, "capabilities"},
		{"manifests/deployment.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "allowPrivilegeEscalation"},
		{"manifests/deployment.yaml", "memory: 512Mi", "ephemeral-storage: 1Gi", "limits"},
		{"manifests/deployment.yaml", "name: warden-config", "name: warden-settings", "ConfigMap"},
		{"manifests/pdb.yaml", "minAvailable: 2", "minAvailable: 1", "minAvailable"},
		{"manifests/pdb.yaml", "app.kubernetes.io/component: server", "app.kubernetes.io/component: worker", "PodDisruptionBudget"},
		{"manifests/service.yaml", "app.kubernetes.io/component: server", "app.kubernetes.io/component: api", "Service"},
		{"manifests/service.yaml", "targetPort: http", "targetPort: 9090", "Service"},
		{"manifests/kustomization.yaml", "  - pdb.yaml\n", "", "kustomization"},
		{"manifests/configmap.yaml", "WARDEN_REGION:", "WARDEN_ZONE:", "WARDEN_ZONE"},
		{"manifests/deployment.yaml", "- name: WARDEN_WEBHOOK_SECRET", "- name: WARDEN_WEBHOOK_SECRETS", "WARDEN_WEBHOOK_SECRETS"},
		{"deploy/compose.yml", "WARDEN_LISTEN:", "WARDEN_PORT:", "WARDEN_PORT"},
		{"deploy/warden.service", "EnvironmentFile=", "Environment=WARDEN_DB=x\nEnvironmentFile=", "WARDEN_DB"},
		{"deploy/compose.yml", "WARDEN_DATABASE: postgres://", "WARDEN_DATABASE: sqlite://", "WARDEN_DATABASE"},
		{"deploy/compose.yml", "image: postgres:16-bookworm", "image: postgres:15", "postgres:16"},
		{"deploy/compose.yml", "      test: [\"CMD-SHELL\", \"pg_isready", "      disable: true\n      x: [\"CMD-SHELL\", \"pg_isready", "healthcheck"},
		{"deploy/compose.yml", "condition: service_healthy", "condition: service_started", "depends_on"},
		{"deploy/compose.yml", "env_file: .env            #", "#", "env_file"},
		{"deploy/Dockerfile", "ENV CGO_ENABLED=0 GOOS=linux", "ENV GOOS=linux", "CGO_ENABLED=0"},
		{"deploy/Dockerfile", "-o /out/warden ./cmd/warden", "-o /out/warden ./cmd/other", "./cmd/warden"},
		{"deploy/Dockerfile", "USER 65532:65532", "USER root", "USER"},
		{"deploy/Dockerfile", "USER 65532:65532\n", "", "USER"},
		{"deploy/Dockerfile", `ENTRYPOINT ["/warden"]`, `ENTRYPOINT ["/bin/sh", "-c", "/warden"]`, "ENTRYPOINT"},
		{"deploy/Dockerfile", `CMD ["serve"]`, `CMD ["demo"]`, "CMD"},
		{"deploy/Dockerfile", "EXPOSE 8080 9090", "EXPOSE 8080", "EXPOSE"},
		{"deploy/Dockerfile", "WARDEN_DATABASE=sqlite:/data/warden.db", "WARDEN_DATABASE=sqlite:warden.db", "WARDEN_DATABASE"},
		{"deploy/Dockerfile", `VOLUME ["/data"]`, "", "VOLUME"},
		{"deploy/Dockerfile", "FROM gcr.io/distroless/static-debian12:nonroot", "FROM golang:1.26-bookworm", "final image"},
		{"deploy/warden.service", "ExecStart=/usr/local/bin/warden serve", "ExecStart=/usr/local/bin/warden demo", "ExecStart"},
		{"deploy/warden.service", "ProtectSystem=strict", "ProtectSystem=full", "ProtectSystem"},
		{"deploy/warden.service", "NoNewPrivileges=yes", "NoNewPrivileges=no", "NoNewPrivileges"},
		{"deploy/warden.service", "DynamicUser=yes", "User=root", "user"},
		{"deploy/warden.service", "StateDirectory=warden\n", "", "StateDirectory"},
		{"deploy/warden.service", "EnvironmentFile=/etc/warden/warden.env", "EnvironmentFile=/tmp/warden.env", "EnvironmentFile"},
		{"deploy/Dockerfile", "-X main.version=${VERSION}", "", "version"},
		{"deploy/Dockerfile", "-X main.version=${VERSION}", "-X main.vers1on=${VERSION}", "vers1on"},
		{"deploy/Dockerfile", "ARG VERSION=dev\nARG TARGETARCH", "ARG TARGETARCH", "ARG VERSION"},
		{".github/workflows/release.yml", "IMAGE: ghcr.io/wardenhq/warden", "IMAGE: ghcr.io/wardenhq/warden-next", "image"},
		{".github/workflows/release.yml", "type=raw,value=latest", "type=raw,value=stable", "latest"},
		{".github/workflows/release.yml", "docker/build-push-action@v6.18.0", "docker/build-push-action@master", "pinned"},
		{".github/workflows/release.yml", "VERSION=${{ github.ref_name }}", "VERSION=dev", "VERSION"},
		{".github/workflows/release.yml", "file: deploy/Dockerfile", "file: Dockerfile", "deploy/Dockerfile"},
		{".github/workflows/release.yml", "push: true", "push: false", "push"},
		{".github/workflows/release.yml", `tags: ["v*"]`, `branches: [main]`, "v*"},
		{".github/workflows/release.yml", "packages: write", "packages: read", "packages: write"},
		{".github/workflows/ci.yml", "run: bash .ci/run", "run: go test ./...", ".ci/run"},
		{"deploy/compose.sqlite.yml", "WARDEN_DATABASE: sqlite:/data/warden.db", "WARDEN_DATABASE: postgres://warden:${POSTGRES_PASSWORD:?x}@postgres/warden", "POSTGRES_PASSWORD"},
		{"deploy/compose.sqlite.yml", "      - warden-data:/data\n", "", "/data"},
		{"deploy/compose.yml", "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD in .env}@", "${POSTGRES_PASSWORD:-}@", "POSTGRES_PASSWORD"},
		{"deploy/compose.sqlite.yml", "    group_add:\n", "    x-group_add:\n", "group_add"},
		{"deploy/compose.yml", "    group_add:\n", "    x-group_add:\n", "group_add"},
		{".dockerignore", "\nnode_modules\n", "\n", "node_modules"},
		{".dockerignore", "\n.git\n", "\n", ".git"},
		{".dockerignore", "**/*.pem\n", "", ".pem"},
		{".dockerignore", "\n.git\n", "\n.git\ncmd\n", "cmd/warden"},
		{"deploy/Dockerfile", "ARG GO_VERSION=1.26", "ARG GO_VERSION=1.25", "GO_VERSION"},
		{".github/workflows/ci.yml", "container: golang:1.26-bookworm", "container: golang:1.24-bookworm", "golang:1.24"},
	}
	for _, m := range mutations {
		t.Run(m.file+":"+m.want, func(t *testing.T) {
			broken := maps.Clone(files)
			if !strings.Contains(broken[m.file], m.old) {
				t.Fatalf("%s no longer contains %q: update the mutation", m.file, m.old)
			}
			broken[m.file] = strings.Replace(broken[m.file], m.old, m.new, 1)
			problems := packagingProblems(broken, src)
			for _, p := range problems {
				if strings.Contains(p, m.want) {
					return
				}
			}
			t.Errorf("replacing %q with %q in %s: no problem mentioning %q; got %q", m.old, m.new, m.file, m.want, problems)
		})
	}
}

// packagingProblems runs every check; each problem is one line.
func packagingProblems(files map[string]string, configSrc string) []string {
	var out []string
	out = append(out, checkEnvNames(files, configSrc)...)
	out = append(out, checkManifests(files)...)
	out = append(out, checkCompose(files["deploy/compose.yml"])...)
	out = append(out, checkDockerfile(files["deploy/Dockerfile"])...)
	out = append(out, checkUnit(files["deploy/warden.service"])...)
	out = append(out, checkVersionStamp(files)...)
	out = append(out, checkRelease(files)...)
	out = append(out, checkCI(files)...)
	out = append(out, checkComposeInterpolation(files)...)
	out = append(out, checkComposeSQLite(files["deploy/compose.sqlite.yml"])...)
	out = append(out, checkComposeKey(files)...)
	out = append(out, checkDockerignore(files)...)
	out = append(out, checkGoVersions(files)...)
	return out
}

var (
	envNameRe    = regexp.MustCompile(`\bWARDEN_[A-Z0-9_]*[A-Z0-9]\b`)
	quotedEnvRe  = regexp.MustCompile(`"(WARDEN_[A-Z0-9_]+)"`)
	defaultsSeen = []string{"WARDEN_LISTEN", "WARDEN_DATABASE", "WARDEN_APP_ID", "WARDEN_WEBHOOK_SECRET", "WARDEN_PRIVATE_KEY_FILE"}
)

// checkEnvNames: every WARDEN_* name written anywhere in the packaging is a
// setting internal/config reads (a quoted name in its source).
func checkEnvNames(files map[string]string, configSrc string) []string {
	known := map[string]bool{}
	for _, m := range quotedEnvRe.FindAllStringSubmatch(configSrc, -1) {
		known[m[1]] = true
	}
	var out []string
	for _, n := range defaultsSeen {
		if !known[n] {
			out = append(out, fmt.Sprintf("internal/config/config.go no longer reads %s (the packaging sets it)", n))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasPrefix(name, "cmd/") || name == "go.mod" {
			continue // the CLI's source, read for its version variable only
		}
		seen := map[string]bool{}
		for _, v := range envNameRe.FindAllString(files[name], -1) {
			if !known[v] && !seen[v] {
				seen[v] = true
				out = append(out, fmt.Sprintf("%s names %s, which warden does not read (internal/config/config.go)", name, v))
			}
		}
	}
	return out
}

// --- Kubernetes ---------------------------------------------------------

type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		// Deployment
		Replicas *int        `yaml:"replicas"`
		Selector k8sSelector `yaml:"selector"` // Deployment, PDB (Service's is a plain map: see below)
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				SecurityContext k8sSecurity    `yaml:"securityContext"`
				Containers      []k8sContainer `yaml:"containers"`
				Volumes         []struct {
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
		// PodDisruptionBudget
		MinAvailable any `yaml:"minAvailable"`
		// Service
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
	raw map[string]any
}

type k8sSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type k8sSecurity struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	RunAsUser                *int  `yaml:"runAsUser"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	Privileged               *bool `yaml:"privileged"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
		Add  []string `yaml:"add"`
	} `yaml:"capabilities"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sContainer struct {
	Name  string `yaml:"name"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
			} `yaml:"secretKeyRef"`
			ConfigMapKeyRef *struct {
				Name string `yaml:"name"`
			} `yaml:"configMapKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	LivenessProbe   k8sProbe    `yaml:"livenessProbe"`
	ReadinessProbe  k8sProbe    `yaml:"readinessProbe"`
	SecurityContext k8sSecurity `yaml:"securityContext"`
	Resources       struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

func decodeAll(text string, each func(dec func(any) error) error) error {
	d := yaml.NewDecoder(strings.NewReader(text))
	for {
		var node yaml.Node
		err := d.Decode(&node)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := each(node.Decode); err != nil {
			return err
		}
	}
}

func checkManifests(files map[string]string) []string {
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }

	var kust struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal([]byte(files["manifests/kustomization.yaml"]), &kust); err != nil {
		return []string{"manifests/kustomization.yaml: " + err.Error()}
	}
	var onDisk []string
	for name := range files {
		if strings.HasPrefix(name, "manifests/") && strings.HasSuffix(name, ".yaml") && name != "manifests/kustomization.yaml" {
			onDisk = append(onDisk, strings.TrimPrefix(name, "manifests/"))
		}
	}
	slices.Sort(onDisk)
	listed := slices.Sorted(slices.Values(kust.Resources))
	if !slices.Equal(listed, onDisk) {
		bad("manifests/kustomization.yaml resources %v, manifests/ holds %v", listed, onDisk)
	}

	byKind := map[string][]*k8sObject{}
	for _, r := range onDisk {
		name := "manifests/" + r
		err := decodeAll(files[name], func(dec func(any) error) error {
			o := &k8sObject{}
			if err := dec(o); err != nil {
				return err
			}
			if err := dec(&o.raw); err != nil {
				return err
			}
			if slices.Contains(kust.Resources, r) {
				byKind[o.Kind] = append(byKind[o.Kind], o)
			}
			return nil
		})
		if err != nil {
			bad("%s: %v", name, err)
		}
	}
	one := func(kind string) *k8sObject {
		if len(byKind[kind]) != 1 {
			bad("kustomization: want exactly one %s, have %d", kind, len(byKind[kind]))
			return nil
		}
		return byKind[kind][0]
	}
	if len(byKind["Secret"]) > 0 {
		bad("kustomization: applies a Secret with values; the manifests must only reference it")
	}
	dep, svc, pdb := one("Deployment"), one("Service"), one("PodDisruptionBudget")
	configMaps := map[string]*k8sObject{}
	for _, cm := range byKind["ConfigMap"] {
		configMaps[cm.Metadata.Name] = cm
	}
	if len(configMaps) == 0 {
		bad("kustomization: no ConfigMap for the non-secret settings")
	}
	if dep == nil {
		return out
	}

	// The Deployment.
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 {
		bad("Deployment: replicas %v, want 3", deref(dep.Spec.Replicas))
	}
	podLabels := dep.Spec.Template.Metadata.Labels
	if !selects(dep.Spec.Selector.MatchLabels, podLabels) {
		bad("Deployment: selector %v does not select its pod template's labels %v", dep.Spec.Selector.MatchLabels, podLabels)
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		bad("Deployment: want one container, have %d", len(pod.Containers))
		return out
	}
	c := pod.Containers[0]

	// WARDEN_LISTEN as the container sees it: env, then the ConfigMaps it
	// loads, then the default.
	listen, listenFrom := ":8080", "the default"
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		cm := configMaps[ef.ConfigMapRef.Name]
		if cm == nil {
			bad("Deployment: envFrom names ConfigMap %q, which the kustomization does not define", ef.ConfigMapRef.Name)
			continue
		}
		if v, ok := cm.Data["WARDEN_LISTEN"]; ok {
			listen, listenFrom = v, "ConfigMap "+cm.Metadata.Name
		}
	}
	for _, e := range c.Env {
		if e.Name == "WARDEN_LISTEN" && e.ValueFrom == nil {
			listen, listenFrom = e.Value, "env"
		}
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil && configMaps[e.ValueFrom.ConfigMapKeyRef.Name] == nil {
			bad("Deployment: env %s names ConfigMap %q, which the kustomization does not define", e.Name, e.ValueFrom.ConfigMapKeyRef.Name)
		}
	}
	listenPort := 0
	if _, p, err := net.SplitHostPort(listen); err == nil {
		listenPort, _ = strconv.Atoi(p)
	}
	if listenPort == 0 {
		bad("Deployment: WARDEN_LISTEN %q (from %s) has no port", listen, listenFrom)
	}
	portOf := func(p any) int {
		switch v := p.(type) {
		case int:
			return v
		case string:
			for _, cp := range c.Ports {
				if cp.Name == v {
					return cp.ContainerPort
				}
			}
		}
		return 0
	}
	if listenPort != 0 && !slices.ContainsFunc(c.Ports, func(cp struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	}) bool {
		return cp.ContainerPort == listenPort
	}) {
		bad("Deployment: no containerPort %d, the port of WARDEN_LISTEN %q (from %s)", listenPort, listen, listenFrom)
	}
	for _, pr := range []struct {
		what, path string
		probe      k8sProbe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if pr.probe.HTTPGet == nil {
			bad("Deployment: no httpGet %s probe", pr.what)
			continue
		}
		if pr.probe.HTTPGet.Path != pr.path {
			bad("Deployment: %s probe on %q, want %s", pr.what, pr.probe.HTTPGet.Path, pr.path)
		}
		if got := portOf(pr.probe.HTTPGet.Port); got != listenPort {
			bad("Deployment: %s probe on port %v (%d), but WARDEN_LISTEN %q (from %s) listens on %d",
				pr.what, pr.probe.HTTPGet.Port, got, listen, listenFrom, listenPort)
		}
	}
	for _, res := range []string{"cpu", "memory"} {
		if c.Resources.Requests[res] == "" {
			bad("Deployment: no resources.requests.%s", res)
		}
		if c.Resources.Limits[res] == "" {
			bad("Deployment: no resources.limits.%s", res)
		}
	}
	podSC, cSC := pod.SecurityContext, c.SecurityContext
	if (cSC.RunAsNonRoot == nil && podSC.RunAsNonRoot == nil) ||
		(cSC.RunAsNonRoot != nil && !*cSC.RunAsNonRoot) || (podSC.RunAsNonRoot != nil && !*podSC.RunAsNonRoot) {
		bad("Deployment: runAsNonRoot is not true (pod and container)")
	}
	for _, u := range []*int{podSC.RunAsUser, cSC.RunAsUser} {
		if u != nil && *u == 0 {
			bad("Deployment: runAsUser 0")
		}
	}
	if !isTrue(cSC.ReadOnlyRootFilesystem) {
		bad("Deployment: readOnlyRootFilesystem is not true")
	}
	if cSC.AllowPrivilegeEscalation == nil || *cSC.AllowPrivilegeEscalation {
		bad("Deployment: allowPrivilegeEscalation is not false")
	}
	if isTrue(cSC.Privileged) {
		bad("Deployment: privileged")
	}
	if !slices.Contains(cSC.Capabilities.Drop, "ALL") || len(cSC.Capabilities.Add) > 0 {
		bad("Deployment: capabilities drop %v add %v, want drop [ALL] and add nothing", cSC.Capabilities.Drop, cSC.Capabilities.Add)
	}
	secretRefs := 0
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secretRefs++
		}
	}
	if secretRefs == 0 {
		bad("Deployment: references no Secret for WARDEN_WEBHOOK_SECRET and the database URL")
	}

	// The Service: selects the pods, targets the WARDEN_LISTEN port.
	if svc != nil {
		sel := map[string]string{}
		if spec, ok := svc.raw["spec"].(map[string]any); ok {
			if s, ok := spec["selector"].(map[string]any); ok {
				for k, v := range s {
					sel[k] = fmt.Sprint(v)
				}
			}
		}
		if !selects(sel, podLabels) {
			bad("Service: selector %v does not select the Deployment's pods %v", sel, podLabels)
		}
		if len(svc.Spec.Ports) == 0 {
			bad("Service: no ports")
		}
		for _, p := range svc.Spec.Ports {
			if portOf(p.TargetPort) != listenPort {
				bad("Service: port %d targets %v, not the WARDEN_LISTEN port %d", p.Port, p.TargetPort, listenPort)
			}
		}
	}

	// The PodDisruptionBudget: minAvailable 2 of the Deployment's pods.
	if pdb != nil {
		if fmt.Sprint(pdb.Spec.MinAvailable) != "2" {
			bad("PodDisruptionBudget: minAvailable %v, want 2", pdb.Spec.MinAvailable)
		}
		if !selects(pdb.Spec.Selector.MatchLabels, podLabels) {
			bad("PodDisruptionBudget: selector %v does not select the Deployment's pods %v", pdb.Spec.Selector.MatchLabels, podLabels)
		}
	}
	return out
}

// selects reports whether a non-empty matchLabels selector matches labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func isTrue(b *bool) bool { return b != nil && *b }

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// --- compose ------------------------------------------------------------

func checkCompose(text string) []string {
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf("deploy/compose.yml: "+format, a...)) }
	var doc struct {
		Services map[string]struct {
			Image       string         `yaml:"image"`
			Build       any            `yaml:"build"`
			EnvFile     any            `yaml:"env_file"`
			Environment map[string]any `yaml:"environment"`
			DependsOn   map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Healthcheck *struct {
				Test    any  `yaml:"test"`
				Disable bool `yaml:"disable"`
			} `yaml:"healthcheck"`
			Secrets []any `yaml:"secrets"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return []string{"deploy/compose.yml: " + err.Error()}
	}
	w, okW := doc.Services["warden"]
	pg, okP := doc.Services["postgres"]
	if !okW || !okP {
		bad("want services warden and postgres, have %v", slices.Sorted(maps.Keys(doc.Services)))
		return out
	}
	if !strings.HasPrefix(pg.Image, "postgres:16") {
		bad("postgres image %q, want postgres:16", pg.Image)
	}
	if w.Build == nil && w.Image == "" {
		bad("warden has neither build nor image")
	}
	if db := fmt.Sprint(w.Environment["WARDEN_DATABASE"]); !strings.HasPrefix(db, "postgres://") {
		bad("warden's WARDEN_DATABASE %q is not a postgres:// URL", db)
	}
	if w.DependsOn["postgres"].Condition != "service_healthy" {
		bad("warden depends_on postgres with condition %q, want service_healthy", w.DependsOn["postgres"].Condition)
	}
	envFiles := fmt.Sprint(w.EnvFile)
	if !strings.Contains(envFiles, ".env") {
		bad("warden has no env_file .env for the App's settings")
	}
	if _, ok := w.Environment["WARDEN_PRIVATE_KEY_FILE"]; !ok || len(w.Secrets) == 0 {
		bad("warden's private key should come from a secret via WARDEN_PRIVATE_KEY_FILE")
	}
	for name, s := range doc.Services {
		if s.Healthcheck == nil || s.Healthcheck.Disable || s.Healthcheck.Test == nil {
			bad("service %s has no healthcheck", name)
		}
	}
	return out
}

// --- Dockerfile ---------------------------------------------------------

type dockerInstr struct{ op, args string }

// dockerStages splits a Dockerfile into stages of instructions, joining
// continuation lines and dropping comments.
func dockerStages(text string) [][]dockerInstr {
	var stages [][]dockerInstr
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		op, args, _ := strings.Cut(line, " ")
		op = strings.ToUpper(op)
		if op == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], dockerInstr{op, strings.TrimSpace(args)})
		}
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasSuffix(l, `\`) {
			cur.WriteString(strings.TrimSuffix(l, `\`) + " ")
			continue
		}
		cur.WriteString(l)
		flush()
	}
	flush()
	return stages
}

func checkDockerfile(text string) []string {
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf("deploy/Dockerfile: "+format, a...)) }
	stages := dockerStages(text)
	if len(stages) < 2 {
		bad("want a multi-stage build, have %d stage(s)", len(stages))
		return out
	}
	built := false
	for _, st := range stages[:len(stages)-1] {
		cgoOff := false
		for _, in := range st {
			if (in.op == "ENV" || in.op == "ARG") && regexp.MustCompile(`\bCGO_ENABLED=0\b`).MatchString(in.args) {
				cgoOff = true
			}
			if in.op != "RUN" {
				continue
			}
			for _, cmd := range regexp.MustCompile(`&&|;`).Split(in.args, -1) {
				if regexp.MustCompile(`\bgo build\b.*\s\./cmd/warden\s*$`).MatchString(strings.TrimSpace(cmd)) {
					built = true
					if !cgoOff && !strings.Contains(in.args, "CGO_ENABLED=0") {
						bad("builds ./cmd/warden without CGO_ENABLED=0")
					}
				}
			}
		}
	}
	if !built {
		bad("no build stage runs go build ... ./cmd/warden")
	}
	final := stages[len(stages)-1]
	base := strings.Fields(final[0].args)
	if len(base) == 0 || !(strings.Contains(base[0], "distroless") || base[0] == "scratch") {
		bad("final image %v is neither distroless nor scratch", base)
	}
	last := map[string]string{}
	var envs, exposes, volumes []string
	for _, in := range final {
		last[in.op] = in.args
		switch in.op {
		case "ENV":
			envs = append(envs, in.args)
		case "EXPOSE":
			exposes = append(exposes, strings.Fields(in.args)...)
		case "VOLUME":
			volumes = append(volumes, in.args)
		}
	}
	user, ok := last["USER"]
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); !ok || err != nil || n == 0 {
		bad("final stage USER %q is not a numeric non-root uid", user)
	}
	if last["ENTRYPOINT"] != `["/warden"]` {
		bad(`ENTRYPOINT %s, want ["/warden"]`, last["ENTRYPOINT"])
	}
	if last["CMD"] != `["serve"]` {
		bad(`CMD %s, want ["serve"]`, last["CMD"])
	}
	for _, p := range []string{"8080", "9090"} {
		if !slices.Contains(exposes, p) && !slices.Contains(exposes, p+"/tcp") {
			bad("EXPOSE %v lacks %s", exposes, p)
		}
	}
	if !regexp.MustCompile(`\bWARDEN_DATABASE=sqlite:/data/`).MatchString(strings.Join(envs, " ")) {
		bad("final stage does not set WARDEN_DATABASE=sqlite:/data/...")
	}
	if !strings.Contains(strings.Join(volumes, " "), "/data") {
		bad("no VOLUME /data for the SQLite database")
	}
	return out
}

// --- systemd ------------------------------------------------------------

func checkUnit(text string) []string {
	var out []string
	bad := func(format string, a ...any) {
		out = append(out, fmt.Sprintf("deploy/warden.service: "+format, a...))
	}
	svc := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader([]byte(text)))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";") {
			continue
		}
		if strings.HasPrefix(l, "[") {
			section = l
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok && section == "[Service]" {
			svc[k] = append(svc[k], v)
		}
	}
	get := func(k string) string {
		if v := svc[k]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	if get("ExecStart") != "/usr/local/bin/warden serve" {
		bad("ExecStart %q, want /usr/local/bin/warden serve", get("ExecStart"))
	}
	if get("EnvironmentFile") != "/etc/warden/warden.env" {
		bad("EnvironmentFile %q, want /etc/warden/warden.env", get("EnvironmentFile"))
	}
	if get("StateDirectory") != "warden" {
		bad("StateDirectory %q, want warden", get("StateDirectory"))
	}
	if u := get("User"); get("DynamicUser") != "yes" && (u == "" || u == "root" || u == "0") {
		bad("runs as root: want DynamicUser=yes or a warden user")
	}
	for k, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
	} {
		if get(k) != want {
			bad("%s=%q, want %s", k, get(k), want)
		}
	}
	return out
}
