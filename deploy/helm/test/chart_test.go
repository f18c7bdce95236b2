// Package charttest checks the Helm chart in ../tollgate with the real helm
// binary: `helm lint --strict` and `helm template` for every values file in
// ../tollgate/ci and the defaults, every rendered manifest decoded strictly
// into the official Kubernetes API types (an unknown or mistyped field is
// an error, which is what a schema check of the manifests catches), the
// chart's promises checked on the objects (probes, non-root, read-only
// root, grace period above the drain, the admin token Secret and its
// mount as admin.token_file, the NetworkPolicy's rules, a PDB only above
// one replica, HPA, ServiceMonitor, the release notes), and the rendered
// gateway.toml, with the environment the Deployment sets and the files
// its Secrets put in the pod, passed through `gateway validate`.
//
// It is its own module so that the Kubernetes API types never enter the
// gateway's dependencies. helm is installed with `go install` when it is
// not on PATH.
package charttest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	networkPolicy  *networkingv1.NetworkPolicy
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
	return renderArgs(t, values, valuesArgs(values)...)
}

// renderArgs renders the chart as release "tg" in namespace "edge" with
// helm template's args (-f FILE, --set K=V); values names them in errors.
func renderArgs(t *testing.T, values string, args ...string) *rendered {
	t.Helper()
	out := run(t, helm(t), append([]string{"template", "tg", chart, "--namespace", "edge"}, args...)...)
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
		case "networking.k8s.io/v1/NetworkPolicy":
			r.networkPolicy = new(networkingv1.NetworkPolicy)
			strict(t, doc, r.networkPolicy)
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
		Enabled      *bool `json:"enabled"`
		MinAvailable int   `json:"minAvailable"`
	} `json:"podDisruptionBudget"`
	Autoscaling struct {
		Enabled     bool `json:"enabled"`
		MinReplicas int  `json:"minReplicas"`
	} `json:"autoscaling"`
	ServiceMonitor struct {
		Enabled           bool `json:"enabled"`
		BearerTokenSecret struct {
			Name string `json:"name"`
			Key  string `json:"key"`
		} `json:"bearerTokenSecret"`
	} `json:"serviceMonitor"`
	Redis struct {
		URL string `json:"url"`
	} `json:"redis"`
	RLS struct {
		Enabled     bool                             `json:"enabled"`
		Port        int                              `json:"port"`
		ServicePort int                              `json:"servicePort"`
		EnvoyConfig map[string]string                `json:"envoyConfig"`
		From        []networkingv1.NetworkPolicyPeer `json:"from"`
	} `json:"rls"`
	Ports struct {
		HTTP  int `json:"http"`
		Admin int `json:"admin"`
	} `json:"ports"`
	AdminToken struct {
		Enabled           *bool  `json:"enabled"`
		ExistingSecret    string `json:"existingSecret"`
		ExistingSecretKey string `json:"existingSecretKey"`
	} `json:"adminToken"`
	NetworkPolicy struct {
		Enabled    *bool `json:"enabled"`
		Prometheus struct {
			Enabled           *bool                 `json:"enabled"`
			PodLabels         map[string]string     `json:"podLabels"`
			NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
		} `json:"prometheus"`
		AdminFrom []networkingv1.NetworkPolicyPeer `json:"adminFrom"`
	} `json:"networkPolicy"`
}

// on reads an optional boolean that defaults to true.
func on(b *bool) bool { return b == nil || *b }

// minReplicas is the fewest pods the values run: autoscaling.minReplicas
// with autoscaling, replicaCount without.
func (v values) minReplicas() int {
	if v.Autoscaling.Enabled {
		return v.Autoscaling.MinReplicas
	}
	return v.ReplicaCount
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
			checkPDB(t, r, v)
			if (r.hpa != nil) != v.Autoscaling.Enabled {
				t.Errorf("HorizontalPodAutoscaler rendered %v, enabled %v", r.hpa != nil, v.Autoscaling.Enabled)
			}
			if v.Autoscaling.Enabled && r.deployment.Spec.Replicas != nil {
				t.Error("with autoscaling the Deployment must not set replicas (each upgrade would reset the HPA's count)")
			}
			if (r.serviceMonitor != nil) != v.ServiceMonitor.Enabled {
				t.Errorf("ServiceMonitor rendered %v, enabled %v", r.serviceMonitor != nil, v.ServiceMonitor.Enabled)
			}
			checkAdminToken(t, r, v)
			checkNetworkPolicy(t, r, v)
			checkRLS(t, r, c, env, v)
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
	// Secret volumes: the keys of a Secret the chart renders are written
	// as the pod would see them; for a Secret that exists outside the
	// chart, stand-in values at the paths the volume's items name, or
	// else at the paths under the mount the configuration and the
	// environment name.
	made := map[string]map[string]string{}
	for _, s := range r.secrets {
		kv := map[string]string{}
		for k, v := range s.Data {
			kv[k] = string(v)
		}
		for k, v := range s.StringData {
			kv[k] = v
		}
		made[s.Name] = kv
	}
	named := under(r.configMap.Data["gateway.toml"])
	for _, v := range env {
		named += " " + under(v)
	}
	const standIn = "stand-in-secret-value-0123456789abcdef"
	for _, m := range c.VolumeMounts {
		var vol *corev1.Volume
		for i, v := range r.deployment.Spec.Template.Spec.Volumes {
			if v.Name == m.Name {
				vol = &r.deployment.Spec.Template.Spec.Volumes[i]
			}
		}
		if vol == nil {
			t.Fatalf("mount %s has no volume", m.Name)
		}
		if vol.Secret == nil {
			continue
		}
		dir := filepath.Join(root, m.MountPath)
		kv, rendered := made[vol.Secret.SecretName]
		switch {
		case len(vol.Secret.Items) > 0:
			for _, it := range vol.Secret.Items {
				val, ok := kv[it.Key]
				if rendered && !ok {
					t.Errorf("volume %s names key %s, which Secret %s does not hold", m.Name, it.Key, vol.Secret.SecretName)
				}
				if !rendered {
					val = standIn
				}
				write(filepath.Join(dir, it.Path), val)
			}
		case rendered:
			for k, v := range kv {
				write(filepath.Join(dir, k), v)
			}
		default:
			for _, word := range strings.Fields(named) {
				if word = strings.Trim(word, `"`); strings.HasPrefix(word, dir+"/") {
					write(word, standIn)
				}
			}
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

// adminTokenFile is where the pod reads the admin token (admin.token_file).
const adminTokenFile = "/etc/tollgate/admin-token/token"

// checkAdminToken: with adminToken on, the admin listener on the pod
// network requires a token, so the Deployment sets admin.token_file to a
// file mounted from the token Secret (and clears admin.token_env, which
// could not be set beside it); the Secret is the chart's own, random,
// or the one named; a ServiceMonitor sends it. Off, none of it is there.
func checkAdminToken(t *testing.T, r *rendered, v values) {
	t.Helper()
	c := r.deployment.Spec.Template.Spec.Containers[0]
	env := map[string]*corev1.EnvVar{}
	for i, e := range c.Env {
		env[e.Name] = &c.Env[i]
	}
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.MountPath == filepath.Dir(adminTokenFile) {
			mount = &c.VolumeMounts[i]
		}
	}
	if !on(v.AdminToken.Enabled) {
		if env["TOLLGATE_ADMIN_TOKEN_FILE"] != nil || env["TOLLGATE_ADMIN_TOKEN_ENV"] != nil || mount != nil {
			t.Error("adminToken is off, but the Deployment sets the token or mounts it")
		}
		return
	}
	if e := env["TOLLGATE_ADMIN_TOKEN_FILE"]; e == nil || e.Value != adminTokenFile {
		t.Errorf("admin.token_file: TOLLGATE_ADMIN_TOKEN_FILE is %+v, want %s", e, adminTokenFile)
	}
	if e := env["TOLLGATE_ADMIN_TOKEN_ENV"]; e == nil || e.Value != "" || e.ValueFrom != nil {
		t.Errorf("TOLLGATE_ADMIN_TOKEN_ENV is %+v, want set and empty (a token_env in the config would conflict)", e)
	}
	wantSecret, wantKey := "tg-tollgate-admin-token", "token"
	if v.AdminToken.ExistingSecret != "" {
		wantSecret, wantKey = v.AdminToken.ExistingSecret, v.AdminToken.ExistingSecretKey
	}
	if mount == nil || !mount.ReadOnly {
		t.Fatalf("no read-only mount at %s: %+v", filepath.Dir(adminTokenFile), c.VolumeMounts)
	}
	var vol *corev1.Volume
	for i, pv := range r.deployment.Spec.Template.Spec.Volumes {
		if pv.Name == mount.Name {
			vol = &r.deployment.Spec.Template.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Secret == nil || vol.Secret.SecretName != wantSecret || len(vol.Secret.Items) != 1 ||
		vol.Secret.Items[0].Key != wantKey || vol.Secret.Items[0].Path != filepath.Base(adminTokenFile) {
		t.Errorf("the token volume is %+v, want key %q of Secret %s as %s", vol, wantKey, wantSecret, filepath.Base(adminTokenFile))
	}
	var made *corev1.Secret
	for _, s := range r.secrets {
		if s.Name == wantSecret {
			made = s
		}
	}
	switch {
	case v.AdminToken.ExistingSecret != "" && made != nil:
		t.Errorf("the chart renders Secret %s, which adminToken.existingSecret names as existing", wantSecret)
	case v.AdminToken.ExistingSecret == "":
		if made == nil {
			t.Fatalf("no token Secret %s among %d Secrets", wantSecret, len(r.secrets))
		}
		tok := string(made.Data["token"])
		if len(tok) != 48 || strings.Trim(tok, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
			t.Errorf("the token Secret holds %q, want 48 random letters and digits", tok)
		}
	}
	if sm := r.serviceMonitor; sm != nil && v.ServiceMonitor.BearerTokenSecret.Name == "" {
		ep := sm.Spec.Endpoints[0]
		if a := ep.Authorization; a == nil || a.Credentials == nil || a.Credentials.Name != wantSecret || a.Credentials.Key != wantKey {
			t.Errorf("the ServiceMonitor's authorization %+v does not send key %q of %s", ep.Authorization, wantKey, wantSecret)
		}
	}
}

// checkNetworkPolicy: the NetworkPolicy (on by default) selects the
// gateway's pods, lets every source reach the public port and only the
// configured Prometheus pods and extra peers reach the admin port.
func checkNetworkPolicy(t *testing.T, r *rendered, v values) {
	t.Helper()
	np := r.networkPolicy
	if (np != nil) != on(v.NetworkPolicy.Enabled) {
		t.Fatalf("NetworkPolicy rendered %v, enabled %v", np != nil, on(v.NetworkPolicy.Enabled))
	}
	if np == nil {
		return
	}
	sel := r.deployment.Spec.Selector.MatchLabels
	if fmt.Sprint(np.Spec.PodSelector.MatchLabels) != fmt.Sprint(sel) || len(np.Spec.PodSelector.MatchExpressions) != 0 {
		t.Errorf("the NetworkPolicy selects %+v, the Deployment's pods are %v", np.Spec.PodSelector, sel)
	}
	if fmt.Sprint(np.Spec.PolicyTypes) != "[Ingress]" {
		t.Errorf("policyTypes %v, want [Ingress] (egress to upstreams and Redis stays open)", np.Spec.PolicyTypes)
	}
	// The peers each port admits; nil is every source.
	admits := map[int][]networkingv1.NetworkPolicyPeer{}
	open := map[int]bool{}
	for i, rule := range np.Spec.Ingress {
		if len(rule.Ports) == 0 {
			t.Errorf("ingress rule %d covers every port", i)
		}
		for _, p := range rule.Ports {
			if p.Port == nil || p.Port.IntValue() == 0 || p.EndPort != nil || p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP {
				t.Errorf("ingress rule %d: port %+v, want one numbered TCP port", i, p)
				continue
			}
			if len(rule.From) == 0 {
				open[p.Port.IntValue()] = true
			}
			admits[p.Port.IntValue()] = append(admits[p.Port.IntValue()], rule.From...)
		}
	}
	if !open[v.Ports.HTTP] {
		t.Errorf("the public port %d is not open to every source: %+v", v.Ports.HTTP, np.Spec.Ingress)
	}
	if open[v.Ports.Admin] {
		t.Fatalf("the admin port %d is open to every source: %+v", v.Ports.Admin, np.Spec.Ingress)
	}
	var want []networkingv1.NetworkPolicyPeer
	if on(v.NetworkPolicy.Prometheus.Enabled) {
		if len(v.NetworkPolicy.Prometheus.PodLabels) == 0 {
			t.Fatal("networkPolicy.prometheus.podLabels is empty")
		}
		peer := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: v.NetworkPolicy.Prometheus.PodLabels}}
		if ns := v.NetworkPolicy.Prometheus.NamespaceSelector; ns != nil && (len(ns.MatchLabels) > 0 || len(ns.MatchExpressions) > 0) {
			peer.NamespaceSelector = ns
		}
		want = append(want, peer)
	}
	want = append(want, v.NetworkPolicy.AdminFrom...)
	got, _ := yaml.Marshal(admits[v.Ports.Admin])
	wantText, _ := yaml.Marshal(want)
	if string(got) != string(wantText) {
		t.Errorf("the admin port admits\n%s\nwant\n%s", got, wantText)
	}
	for i, p := range admits[v.Ports.Admin] {
		if p.IPBlock == nil && (p.PodSelector == nil || len(p.PodSelector.MatchLabels)+len(p.PodSelector.MatchExpressions) == 0) &&
			p.NamespaceSelector == nil {
			t.Errorf("admin peer %d selects every pod of the namespace: %+v", i, p)
		}
	}
	for port := range admits {
		if port != v.Ports.HTTP && port != v.Ports.Admin && !(v.RLS.Enabled && port == v.RLS.Port) {
			t.Errorf("the NetworkPolicy opens port %d, which the gateway does not listen on", port)
		}
	}
	if v.RLS.Enabled {
		// The rate limit service's port: rls.from, or every source.
		got, _ := yaml.Marshal(admits[v.RLS.Port])
		want, _ := yaml.Marshal(v.RLS.From)
		if _, ok := admits[v.RLS.Port]; !ok || open[v.RLS.Port] != (len(v.RLS.From) == 0) || (len(v.RLS.From) > 0 && string(got) != string(want)) {
			t.Errorf("the rate limit service's port %d admits\n%s\nwant\n%s (open %v)", v.RLS.Port, got, want, open[v.RLS.Port])
		}
	}
}

// checkRLS: with rls.enabled, the gateway serves Envoy's rate limit
// service on rls.port (rls.listen through the environment), the container
// names that port "grpc" and the Service exposes it as "grpc" (Istio reads
// the protocol from the name), and the YAML files of rls.envoyConfig are
// in the ConfigMap where rls.envoy_config names them (validateConfig then
// reads them). Without it, none of that is rendered.
func checkRLS(t *testing.T, r *rendered, c corev1.Container, env map[string]string, v values) {
	t.Helper()
	var port *corev1.ContainerPort
	for i, p := range c.Ports {
		if p.Name == "grpc" {
			port = &c.Ports[i]
		}
	}
	var svc *corev1.ServicePort
	for _, s := range r.services {
		for i, p := range s.Spec.Ports {
			if p.Name == "grpc" {
				svc = &s.Spec.Ports[i]
			}
		}
	}
	listen, hasListen := env["TOLLGATE_RLS_LISTEN"]
	if !v.RLS.Enabled {
		if port != nil || svc != nil || hasListen || env["TOLLGATE_RLS_ENVOY_CONFIG"] != "" {
			t.Errorf("rls is off but the chart renders its port %v, Service port %v or listen %q", port, svc, listen)
		}
		return
	}
	if listen != fmt.Sprintf("0.0.0.0:%d", v.RLS.Port) {
		t.Errorf("TOLLGATE_RLS_LISTEN %q, want 0.0.0.0:%d", listen, v.RLS.Port)
	}
	if port == nil || int(port.ContainerPort) != v.RLS.Port || port.Protocol != corev1.ProtocolTCP {
		t.Errorf("container port grpc %+v, want %d/TCP", port, v.RLS.Port)
	}
	if svc == nil || int(svc.Port) != v.RLS.ServicePort || svc.TargetPort.String() != "grpc" {
		t.Errorf("Service port grpc %+v, want %d to the container's grpc", svc, v.RLS.ServicePort)
	}
	for name, yaml := range v.RLS.EnvoyConfig {
		if got := r.configMap.Data["rls-"+name]; strings.TrimSpace(got) != strings.TrimSpace(yaml) {
			t.Errorf("the ConfigMap's rls-%s is not rls.envoyConfig's %s:\n%s", name, name, got)
		}
	}
	if len(v.RLS.EnvoyConfig) > 0 && env["TOLLGATE_RLS_ENVOY_CONFIG"] != "/etc/tollgate/config/rls-*" {
		t.Errorf("TOLLGATE_RLS_ENVOY_CONFIG %q", env["TOLLGATE_RLS_ENVOY_CONFIG"])
	}
}

// TestHelmRLSRefused: rls.enabled without any envoyproxy/ratelimit file,
// or on a port another listener has, is refused at render time.
func TestHelmRLSRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{sets("rls.enabled=true"), "rls.enabled: the rate limit service needs"},
		{append(sets("rls.enabled=true", "rls.port=8080"), "-f", filepath.Join(chart, "ci", "rls-values.yaml")), "rls.port must differ"},
	} {
		if out := helmFails(t, append([]string{"template", "tg", chart}, tc.args...)...); !strings.Contains(out, tc.want) {
			t.Errorf("%v: %s, want %q", tc.args, out, tc.want)
		}
	}
}

// checkPDB: a PodDisruptionBudget only with more than one replica
// (autoscaling.minReplicas under an HPA); at one it would block drains.
func checkPDB(t *testing.T, r *rendered, v values) {
	t.Helper()
	want := on(v.PodDisruptionBudget.Enabled) && v.minReplicas() > 1
	if (r.pdb != nil) != want {
		t.Fatalf("PodDisruptionBudget rendered %v; enabled %v, at least %d replicas", r.pdb != nil, on(v.PodDisruptionBudget.Enabled), v.minReplicas())
	}
	if r.pdb == nil {
		return
	}
	if m := r.pdb.Spec.MinAvailable; m == nil || m.IntValue() != v.PodDisruptionBudget.MinAvailable || m.IntValue() >= v.minReplicas() {
		t.Errorf("PodDisruptionBudget minAvailable %v with %d replicas, values %d", m, v.minReplicas(), v.PodDisruptionBudget.MinAvailable)
	}
	if fmt.Sprint(r.pdb.Spec.Selector.MatchLabels) != fmt.Sprint(r.deployment.Spec.Selector.MatchLabels) {
		t.Errorf("the PodDisruptionBudget selects %v, the Deployment's pods are %v", r.pdb.Spec.Selector.MatchLabels, r.deployment.Spec.Selector.MatchLabels)
	}
}

// sets turns K=V pairs into helm's --set arguments.
func sets(kv ...string) []string {
	var args []string
	for _, s := range kv {
		args = append(args, "--set", s)
	}
	return args
}

// TestHelmPDB: the PodDisruptionBudget is rendered only when the gateway
// runs more than one pod: replicaCount, or autoscaling.minReplicas when
// an HPA sets the count; a minAvailable that is not below that is refused.
func TestHelmPDB(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want bool
	}{
		{[]string{"replicaCount=1"}, false},
		{[]string{"replicaCount=2"}, true},
		{[]string{"replicaCount=2", "podDisruptionBudget.enabled=false"}, false},
		{[]string{"replicaCount=1", "autoscaling.enabled=true", "autoscaling.minReplicas=2"}, true},
		{[]string{"replicaCount=3", "autoscaling.enabled=true", "autoscaling.minReplicas=1"}, false},
		{[]string{"replicaCount=3", "podDisruptionBudget.minAvailable=2"}, true},
	} {
		name := strings.Join(c.set, ",")
		t.Run(name, func(t *testing.T) {
			r := renderArgs(t, name, sets(c.set...)...)
			if (r.pdb != nil) != c.want {
				t.Fatalf("PodDisruptionBudget rendered %v, want %v", r.pdb != nil, c.want)
			}
			if r.hpa != nil && r.pdb != nil && r.pdb.Spec.MinAvailable.IntValue() >= int(*r.hpa.Spec.MinReplicas) {
				t.Errorf("minAvailable %v, HPA minReplicas %d", r.pdb.Spec.MinAvailable, *r.hpa.Spec.MinReplicas)
			}
		})
	}
	for _, set := range [][]string{
		{"replicaCount=2", "podDisruptionBudget.minAvailable=2"},
		{"replicaCount=1", "autoscaling.enabled=true", "autoscaling.minReplicas=3", "podDisruptionBudget.minAvailable=5"},
	} {
		out := helmFails(t, append([]string{"template", "tg", chart}, sets(set...)...)...)
		if !strings.Contains(out, "podDisruptionBudget.minAvailable") || !strings.Contains(out, "drains would block") {
			t.Errorf("%v: helm template fails with\n%s\nwant the minAvailable problem", set, out)
		}
	}
}

// TestHelmAdminToken: the chart-made token is random (two renders differ);
// adminToken.enabled=false leaves the token to the config file.
func TestHelmAdminToken(t *testing.T) {
	token := func(r *rendered) string {
		for _, s := range r.secrets {
			if s.Name == "tg-tollgate-admin-token" {
				return string(s.Data["token"])
			}
		}
		t.Fatal("no token Secret")
		return ""
	}
	a, b := token(render(t, "")), token(render(t, ""))
	if a == b {
		t.Errorf("two renders made the same token %q", a)
	}

	v := readValues(t, "")
	off := false
	v.AdminToken.Enabled = &off
	r := renderArgs(t, "adminToken.enabled=false", sets("adminToken.enabled=false")...)
	checkAdminToken(t, r, v)
	for _, s := range r.secrets {
		t.Errorf("adminToken.enabled=false renders Secret %s", s.Name)
	}
}

// helmFails runs helm with args, which must fail, and returns its output.
func helmFails(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(helm(t), args...).CombinedOutput()
	if err == nil {
		t.Fatalf("helm %s succeeded, want an error", strings.Join(args, " "))
	}
	return string(out)
}

// TestHelmAdminTokenKept: on an upgrade the chart reads the token Secret
// back with lookup and keeps its token, so Prometheus and the operator
// keep working; where there is none it makes a new one. helm renders
// against a stand-in Kubernetes API server (--dry-run=server is what lets
// `helm template` look objects up) that serves the discovery document
// for v1 and the Secret an earlier install left.
func TestHelmAdminTokenKept(t *testing.T) {
	const kept = "KeptTokenFromTheFirstInstall0123456789abcdefghij"
	var mu sync.Mutex
	served := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1":
			fmt.Fprint(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[
				{"name":"secrets","singularName":"secret","namespaced":true,"kind":"Secret","verbs":["get","list"]}]}`)
		case "/api/v1/namespaces/edge/secrets/tg-tollgate-admin-token":
			mu.Lock()
			served++
			mu.Unlock()
			fmt.Fprintf(w, `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"tg-tollgate-admin-token","namespace":"edge"},"type":"Opaque","data":{"token":%q}}`,
				base64.StdEncoding.EncodeToString([]byte(kept)))
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"%s not found"}`, r.URL.Path)
		}
	}))
	defer api.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "`+api.URL+`"}}]
users: [{name: fake, user: {token: fake}}]
contexts: [{name: fake, context: {cluster: fake, user: fake, namespace: edge}}]
current-context: fake
`), 0o600); err != nil {
		t.Fatal(err)
	}
	token := func(release string) string {
		cmd := exec.Command(helm(t), "template", release, chart, "--namespace", "edge", "--dry-run=server",
			"--show-only", "templates/admin-token-secret.yaml")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_KUBECONTEXT=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm template --dry-run=server: %v\n%s", err, out)
		}
		s := new(corev1.Secret)
		strict(t, out, s)
		return string(s.Data["token"])
	}
	if got := token("tg"); got != kept {
		t.Errorf("upgrade: the token Secret holds %q, want the one in the cluster, %q", got, kept)
	}
	mu.Lock()
	if served == 0 {
		t.Error("helm never asked the API server for the token Secret")
	}
	mu.Unlock()
	// Another release finds no Secret of its name: a fresh token.
	if got := token("other"); got == kept || len(got) != 48 {
		t.Errorf("install: the token Secret holds %q, want a new random token", got)
	}
}

// notes renders the chart's release notes (NOTES.txt, which helm
// template skips) with helm's args: a copy of the chart gets one more
// template, a ConfigMap holding them.
func notes(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tollgate")
	if err := os.CopyFS(dir, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	probe := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ include \"tollgate.notes\" . | quote }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-notes.yaml"), []byte(probe), 0o600); err != nil {
		t.Fatal(err)
	}
	out := run(t, helm(t), append([]string{"template", "tg", dir, "--namespace", "edge", "--show-only", "templates/zz-notes.yaml"}, args...)...)
	cm := new(corev1.ConfigMap)
	strict(t, out, cm)
	return cm.Data["notes"]
}

// TestHelmNotes: the release notes say how to reach the admin API (a
// port-forward, the token read from its Secret, curl with the bearer
// token) and name identity.trusted_proxies for a gateway behind an
// Ingress.
func TestHelmNotes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{
			"kubectl -n edge port-forward svc/tg-tollgate-admin 9090:9090",
			"kubectl -n edge get secret tg-tollgate-admin-token",
			"-o jsonpath='{.data.token}' | base64 -d",
			`curl -H "Authorization: Bearer $TOKEN" http://127.0.0.1:9090/metrics`,
			"Prometheus pods labelled app.kubernetes.io/name=prometheus in edge",
			"identity.trusted_proxies",
		}},
		{[]string{"-f", filepath.Join(chart, "ci", "redis-values.yaml")}, []string{
			"kubectl -n edge get secret tollgate-secrets",
			"-o jsonpath='{.data.admin-token}' | base64 -d",
			"the 1 peer(s) of networkPolicy.adminFrom",
		}},
	} {
		text := notes(t, c.args...)
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("helm %v: the notes lack %q:\n%s", c.args, w, text)
			}
		}
	}
}

// TestHelmNetworkPolicyNoEmptySelector: Prometheus's pod labels emptied
// (a default key set to null) would make a selector of every pod in the
// namespace; the render fails instead.
func TestHelmNetworkPolicyNoEmptySelector(t *testing.T) {
	out := helmFails(t, append([]string{"template", "tg", chart}, sets(`networkPolicy.prometheus.podLabels.app\.kubernetes\.io/name=null`)...)...)
	if !strings.Contains(out, "networkPolicy.prometheus.podLabels is empty") {
		t.Errorf("helm template fails with\n%s\nwant the empty podLabels problem", out)
	}
	// Without Prometheus and extra peers the admin port has no rule: closed.
	r := renderArgs(t, "no admin peers", sets("networkPolicy.prometheus.enabled=false")...)
	v := readValues(t, "")
	off := false
	v.NetworkPolicy.Prometheus.Enabled = &off
	checkNetworkPolicy(t, r, v)
	if n := len(r.networkPolicy.Spec.Ingress); n != 1 {
		t.Errorf("%d ingress rules, want the public port's alone", n)
	}
}
