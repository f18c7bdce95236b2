// Package charttest checks the Helm chart in ../tollgate with the real helm
// binary: `helm lint --strict` and `helm template` for every values file in
// ../tollgate/ci and the defaults, every rendered manifest decoded strictly
// into the official Kubernetes API types (an unknown or mistyped field is
// an error, which is what a schema check of the manifests catches), the
// chart's promises checked on the objects (probes, non-root, read-only
// root, grace period above the drain, PDB, HPA, ServiceMonitor), and the
// rendered gateway.toml, with the environment the Deployment sets, passed
// through `gateway validate`.
//
// It is its own module so that the Kubernetes API types never enter the
// gateway's dependencies. helm is installed with `go install` when it is
// not on PATH.
package charttest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// helmModule is the helm release installed when none is on PATH.
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
	gwOnce   sync.Once
	gwPath   string
	gwErr    error
)

// helm returns the helm binary: $HELM, helm on PATH, or one installed with
// go install into GOBIN.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		if p := os.Getenv("HELM"); p != "" {
			helmPath = p
			return
		}
		if p, err := exec.LookPath("helm"); err == nil {
			helmPath = p
			return
		}
		gobin := goEnv("GOBIN")
		if gobin == "" {
			gobin = filepath.Join(goEnv("GOPATH"), "bin")
		}
		p := filepath.Join(gobin, "helm")
		if _, err := os.Stat(p); err == nil {
			helmPath = p
			return
		}
		cmd := exec.Command("go", "install", helmModule)
		cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmErr = fmt.Errorf("helm is not installed and `go install %s` failed (install helm 3 and put it on PATH, or set HELM): %v\n%s", helmModule, err, out)
			return
		}
		helmPath = p
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

func goEnv(k string) string {
	out, err := exec.Command("go", "env", k).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// gateway builds the gateway binary from the repository.
func gateway(t *testing.T) string {
	t.Helper()
	gwOnce.Do(func() {
		dir, err := os.MkdirTemp("", "charttest-gateway")
		if err != nil {
			gwErr = err
			return
		}
		gwPath = filepath.Join(dir, "gateway")
		cmd := exec.Command("go", "build", "-o", gwPath, "./cmd/gateway")
		cmd.Dir = "../../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			gwErr = fmt.Errorf("build the gateway: %v\n%s", err, out)
		}
	})
	if gwErr != nil {
		t.Fatal(gwErr)
	}
	return gwPath
}

const chart = "../tollgate"

// valuesFiles are the chart's test values: the defaults ("") and ci/*.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chart, "ci", "*-values.yaml"))
	if err != nil || len(files) < 2 {
		t.Fatalf("ci values files: %v %v", files, err)
	}
	return append([]string{""}, files...)
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.Bytes(), stderr.Bytes())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%s %s: no answer in 2 minutes", name, strings.Join(args, " "))
	}
	return out.Bytes()
}

func valuesArgs(v string) []string {
	if v == "" {
		return nil
	}
	return []string{"-f", v}
}

// TestHelmLint runs helm lint --strict with every values file.
func TestHelmLint(t *testing.T) {
	h := helm(t)
	for _, v := range valuesFiles(t) {
		run(t, h, append([]string{"lint", "--strict", chart}, valuesArgs(v)...)...)
	}
}

// rendered is one values file's manifests, decoded.
type rendered struct {
	deployment     *appsv1.Deployment
	configMap      *corev1.ConfigMap
	services       []*corev1.Service
	secrets        []*corev1.Secret
	pdb            *policyv1.PodDisruptionBudget
	hpa            *autoscalingv2.HorizontalPodAutoscaler
	serviceMonitor *monitoringv1.ServiceMonitor
	kinds          []string
}

// strict decodes one manifest into v, refusing unknown fields.
func strict(t *testing.T, doc []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("manifest does not match its API type: %v\n%s", err, doc)
	}
}

func render(t *testing.T, values string) *rendered {
	t.Helper()
	out := run(t, helm(t), append([]string{"template", "tg", chart, "--namespace", "edge"}, valuesArgs(values)...)...)
	r := &rendered{}
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue // a comment-only document
		}
		r.kinds = append(r.kinds, meta.APIVersion+"/"+meta.Kind)
		switch meta.APIVersion + "/" + meta.Kind {
		case "apps/v1/Deployment":
			r.deployment = new(appsv1.Deployment)
			strict(t, doc, r.deployment)
		case "v1/ConfigMap":
			r.configMap = new(corev1.ConfigMap)
			strict(t, doc, r.configMap)
		case "v1/Service":
			s := new(corev1.Service)
			strict(t, doc, s)
			r.services = append(r.services, s)
		case "v1/Secret":
			s := new(corev1.Secret)
			strict(t, doc, s)
			r.secrets = append(r.secrets, s)
		case "v1/ServiceAccount":
			strict(t, doc, new(corev1.ServiceAccount))
		case "policy/v1/PodDisruptionBudget":
			r.pdb = new(policyv1.PodDisruptionBudget)
			strict(t, doc, r.pdb)
		case "autoscaling/v2/HorizontalPodAutoscaler":
			r.hpa = new(autoscalingv2.HorizontalPodAutoscaler)
			strict(t, doc, r.hpa)
		case "monitoring.coreos.com/v1/ServiceMonitor":
			r.serviceMonitor = new(monitoringv1.ServiceMonitor)
			strict(t, doc, r.serviceMonitor)
		default:
			t.Fatalf("the chart renders %s/%s, which this test does not check", meta.APIVersion, meta.Kind)
		}
	}
	if r.deployment == nil || r.configMap == nil || len(r.services) != 2 {
		t.Fatalf("values %q: want a Deployment, a ConfigMap and two Services, got %v", values, r.kinds)
	}
	return r
}

// values reads the settings of a values file the checks compare against.
type values struct {
	ReplicaCount           int    `json:"replicaCount"`
	WatchConfig            *bool  `json:"watchConfig"`
	ShutdownTimeoutSeconds int    `json:"shutdownTimeoutSeconds"`
	Config                 string `json:"config"`
	PodDisruptionBudget    struct {
		Enabled *bool `json:"enabled"`
	} `json:"podDisruptionBudget"`
	Autoscaling struct {
		Enabled bool `json:"enabled"`
	} `json:"autoscaling"`
	ServiceMonitor struct {
		Enabled bool `json:"enabled"`
	} `json:"serviceMonitor"`
	Redis struct {
		URL string `json:"url"`
	} `json:"redis"`
}

func readValues(t *testing.T, file string) values {
	t.Helper()
	var v values
	for _, f := range []string{filepath.Join(chart, "values.yaml"), file} {
		if f == "" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return v
}

// TestHelmTemplate renders the chart with every values file and checks
// the objects against the chart's promises.
func TestHelmTemplate(t *testing.T) {
	for _, vf := range valuesFiles(t) {
		name := vf
		if name == "" {
			name = "defaults"
		}
		t.Run(filepath.Base(name), func(t *testing.T) {
			v := readValues(t, vf)
			r := render(t, vf)
			pod := r.deployment.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("containers: %d", len(pod.Containers))
			}
			c := pod.Containers[0]
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}

			if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Error("the pod may run as root")
			}
			if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Error("the container's root filesystem is writable or it may escalate privileges")
			}
			for _, p := range []struct {
				name  string
				probe *corev1.Probe
				path  string
			}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
				if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "admin" {
					t.Errorf("%s probe: %+v, want GET %s on the admin port", p.name, p.probe, p.path)
				}
			}
			drain, err := time.ParseDuration(env["TOLLGATE_SERVER_SHUTDOWN_TIMEOUT"])
			if err != nil || drain != time.Duration(v.ShutdownTimeoutSeconds)*time.Second {
				t.Errorf("shutdown timeout %q, want %ds", env["TOLLGATE_SERVER_SHUTDOWN_TIMEOUT"], v.ShutdownTimeoutSeconds)
			}
			if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= drain {
				t.Errorf("terminationGracePeriodSeconds %v is not above the drain %s", g, drain)
			}
			if watch := env["TOLLGATE_SERVER_WATCH_CONFIG"]; watch != fmt.Sprint(v.WatchConfig == nil || *v.WatchConfig) {
				t.Errorf("watch_config %q, values say %v", watch, v.WatchConfig)
			}
			for _, m := range c.VolumeMounts {
				if m.SubPath != "" {
					t.Errorf("mount %s uses subPath: Kubernetes never updates it, so watch_config would see no change", m.Name)
				}
			}
			if (env["TOLLGATE_STORE_BACKEND"] == "redis") != (v.Redis.URL != "") {
				t.Errorf("store backend %q with redis.url %q", env["TOLLGATE_STORE_BACKEND"], v.Redis.URL)
			}
			if got := r.configMap.Data["gateway.toml"]; strings.TrimSpace(got) != strings.TrimSpace(v.Config) {
				t.Errorf("the ConfigMap's gateway.toml is not the config value:\n%s", got)
			}
			wantPDB := v.PodDisruptionBudget.Enabled == nil || *v.PodDisruptionBudget.Enabled
			if (r.pdb != nil) != wantPDB {
				t.Errorf("PodDisruptionBudget rendered %v, enabled %v", r.pdb != nil, wantPDB)
			}
			if (r.hpa != nil) != v.Autoscaling.Enabled {
				t.Errorf("HorizontalPodAutoscaler rendered %v, enabled %v", r.hpa != nil, v.Autoscaling.Enabled)
			}
			if v.Autoscaling.Enabled && r.deployment.Spec.Replicas != nil {
				t.Error("with autoscaling the Deployment must not set replicas (each upgrade would reset the HPA's count)")
			}
			if (r.serviceMonitor != nil) != v.ServiceMonitor.Enabled {
				t.Errorf("ServiceMonitor rendered %v, enabled %v", r.serviceMonitor != nil, v.ServiceMonitor.Enabled)
			}
			validateConfig(t, r, c, env)
		})
	}
}

// validateConfig runs `gateway validate` on the rendered gateway.toml with
// the Deployment's TOLLGATE_* environment, the pod's files (ConfigMap
// entries, Secret keys) laid out under a temporary root.
func validateConfig(t *testing.T, r *rendered, c corev1.Container, env map[string]string) {
	t.Helper()
	root := t.TempDir()
	under := func(s string) string { return strings.ReplaceAll(s, "/etc/tollgate/", root+"/etc/tollgate/") }
	for _, m := range c.VolumeMounts {
		if err := os.MkdirAll(filepath.Join(root, m.MountPath), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range r.configMap.Data {
		write(filepath.Join(root, "etc/tollgate/config", k), under(v))
	}
	// Secret keys the configuration names are files under the secret
	// mounts; their values come from a chart-made Secret or are stand-ins
	// for an existing one.
	for _, m := range c.VolumeMounts {
		if m.Name == "secrets" || m.Name == "redis-password" {
			for _, word := range strings.Fields(under(r.configMap.Data["gateway.toml"]) + " " + under(env["TOLLGATE_STORE_REDIS_PASSWORD_FILE"])) {
				word = strings.Trim(word, `"`)
				if dir := filepath.Join(root, m.MountPath) + "/"; strings.HasPrefix(word, dir) {
					write(word, "stand-in-secret-value-0123456789abcdef")
				}
			}
		}
	}
	for _, s := range r.secrets {
		for k, v := range s.StringData {
			write(filepath.Join(root, "etc/tollgate/secrets", k), v)
		}
	}
	cmd := exec.Command(gateway(t), "validate", "--config", filepath.Join(root, "etc/tollgate/config/gateway.toml"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+under(v))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the rendered configuration does not validate: %v\n%s", err, out)
	}
}
