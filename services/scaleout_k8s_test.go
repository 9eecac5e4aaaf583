package services

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"citizen/events/memstore"
	"citizen/gateway"

	"github.com/labstack/echo/v4"
	"gopkg.in/yaml.v3"
)

// Checks of deploy/k8s (the Kubernetes manifests) without a cluster.

// The parts of Kubernetes objects the checks read. Field names are the
// API's (yaml.v3 would otherwise lower-case them).
type (
	k8sMeta struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	}
	k8sObject struct {
		APIVersion string               `yaml:"apiVersion"`
		Kind       string               `yaml:"kind"`
		Metadata   k8sMeta              `yaml:"metadata"`
		Spec       yaml.Node            `yaml:"spec"`
		Data       map[string]yaml.Node `yaml:"data"`
		StringData map[string]yaml.Node `yaml:"stringData"`
		where      string               // file: Kind/name
	}
	k8sSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	k8sWorkload struct {
		ServiceName string      `yaml:"serviceName"`
		Selector    k8sSelector `yaml:"selector"`
		Template    struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     k8sPod  `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata k8sMeta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	}
	k8sPod struct {
		EnableServiceLinks            *bool `yaml:"enableServiceLinks"`
		TerminationGracePeriodSeconds *int  `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsUser *int64 `yaml:"runAsUser"`
		} `yaml:"securityContext"`
		InitContainers []k8sContainer `yaml:"initContainers"`
		Containers     []k8sContainer `yaml:"containers"`
		Volumes        []k8sVolume    `yaml:"volumes"`
	}
	k8sContainer struct {
		Name    string   `yaml:"name"`
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []k8sEnv `yaml:"env"`
		EnvFrom []struct {
			Prefix       string  `yaml:"prefix"`
			ConfigMapRef *k8sRef `yaml:"configMapRef"`
			SecretRef    *k8sRef `yaml:"secretRef"`
		} `yaml:"envFrom"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		StartupProbe   *k8sProbe `yaml:"startupProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
		} `yaml:"resources"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	k8sRef struct {
		Name     string `yaml:"name"`
		Key      string `yaml:"key"`
		Optional bool   `yaml:"optional"`
	}
	k8sEnv struct {
		Name      string    `yaml:"name"`
		Value     yaml.Node `yaml:"value"` // Kind 0: absent
		ValueFrom *struct {
			SecretKeyRef    *k8sRef `yaml:"secretKeyRef"`
			ConfigMapKeyRef *k8sRef `yaml:"configMapKeyRef"`
			FieldRef        *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	}
	k8sProbe struct {
		HTTPGet *struct {
			Path string  `yaml:"path"`
			Port portRef `yaml:"port"`
		} `yaml:"httpGet"`
		TCPSocket *struct {
			Port portRef `yaml:"port"`
		} `yaml:"tcpSocket"`
		Exec *struct {
			Command []string `yaml:"command"`
		} `yaml:"exec"`
	}
	k8sVolume struct {
		Name                  string    `yaml:"name"`
		EmptyDir              *struct{} `yaml:"emptyDir"`
		PersistentVolumeClaim *struct {
			ClaimName string `yaml:"claimName"`
		} `yaml:"persistentVolumeClaim"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
			Optional   bool   `yaml:"optional"`
		} `yaml:"secret"`
		ConfigMap *struct {
			Name     string `yaml:"name"`
			Optional bool   `yaml:"optional"`
		} `yaml:"configMap"`
	}
	k8sService struct {
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []struct {
			Name       string  `yaml:"name"`
			Port       int     `yaml:"port"`
			TargetPort portRef `yaml:"targetPort"`
		} `yaml:"ports"`
	}
)

// portRef is an IntOrString port: a number or a container port's name.
type portRef string

func (p *portRef) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a port is a number or a name", n.Line)
	}
	*p = portRef(n.Value)
	return nil
}

// k8sAPIVersions are the kinds the manifests may hold, with their API
// group versions.
var k8sAPIVersions = map[string]string{
	"ConfigMap":             "v1",
	"Secret":                "v1",
	"Service":               "v1",
	"PersistentVolumeClaim": "v1",
	"Deployment":            "apps/v1",
	"StatefulSet":           "apps/v1",
	"PodDisruptionBudget":   "policy/v1",
}

// k8sWorkloadOf is a Deployment or StatefulSet, decoded.
type k8sWorkloadOf struct {
	obj *k8sObject
	k8sWorkload
}

// manifests are the objects of deploy/k8s, indexed.
type manifests struct {
	objects   []*k8sObject
	byKind    map[string]map[string]*k8sObject
	workloads []k8sWorkloadOf
}

func (m *manifests) get(kind, name string) *k8sObject { return m.byKind[kind][name] }

// str is a scalar node's value when it is a string, as the API requires
// of ConfigMap data and env values.
func str(n yaml.Node) (string, bool) {
	return n.Value, n.Kind == yaml.ScalarNode && n.Tag == "!!str"
}

// readK8sDir returns the files of deploy/k8s by name.
func readK8sDir(t *testing.T) map[string][]byte {
	t.Helper()
	dir := filepath.Join("..", "deploy", "k8s")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	return files
}

// checkManifests reports what is wrong with the manifests files (deploy/k8s
// by file name): that kubectl would refuse, that a cluster could not run
// (references to nothing, selectors that select nothing, ports nothing
// listens on), or that citizen would refuse or misread.
func checkManifests(t *testing.T, files map[string][]byte) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	kb, ok := files["kustomization.yaml"]
	if !ok {
		return []string{"deploy/k8s has no kustomization.yaml"}
	}
	var kust struct {
		Namespace string   `yaml:"namespace"`
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(kb, &kust); err != nil {
		return []string{"kustomization.yaml: " + err.Error()}
	}
	if kust.Namespace != "" {
		bad("kustomization.yaml sets namespace %s: the base is namespace-free", kust.Namespace)
	}
	for _, r := range kust.Resources {
		if _, ok := files[r]; !ok {
			bad("kustomization.yaml lists %s, which deploy/k8s does not hold", r)
		}
	}
	m := &manifests{byKind: map[string]map[string]*k8sObject{}}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") || name == "kustomization.yaml" {
			continue
		}
		if !slices.Contains(kust.Resources, name) {
			bad("%s is not in kustomization.yaml's resources: kubectl apply -k leaves it out", name)
		}
		dec := yaml.NewDecoder(bytes.NewReader(files[name]))
		for i := 1; ; i++ {
			var n yaml.Node
			err := dec.Decode(&n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				bad("%s: document %d: %v", name, i, err)
				break
			}
			if len(n.Content) == 0 || n.Content[0].Tag == "!!null" {
				continue // an empty document
			}
			obj := &k8sObject{}
			if err := n.Decode(obj); err != nil {
				bad("%s: document %d: %v", name, i, err)
				continue
			}
			obj.where = fmt.Sprintf("%s: %s/%s", name, obj.Kind, obj.Metadata.Name)
			if obj.APIVersion == "" || obj.Kind == "" || obj.Metadata.Name == "" {
				bad("%s: document %d lacks apiVersion, kind or metadata.name", name, i)
				continue
			}
			if want, ok := k8sAPIVersions[obj.Kind]; !ok {
				bad("%s: kind %s is none these checks know", obj.where, obj.Kind)
				continue
			} else if obj.APIVersion != want {
				bad("%s: apiVersion %s, want %s", obj.where, obj.APIVersion, want)
			}
			if obj.Metadata.Namespace != "" {
				bad("%s: sets namespace %s: the base is namespace-free", obj.where, obj.Metadata.Namespace)
			}
			if m.byKind[obj.Kind] == nil {
				m.byKind[obj.Kind] = map[string]*k8sObject{}
			}
			if m.byKind[obj.Kind][obj.Metadata.Name] != nil {
				bad("%s: defined twice", obj.where)
				continue
			}
			m.byKind[obj.Kind][obj.Metadata.Name] = obj
			m.objects = append(m.objects, obj)
		}
	}
	for _, obj := range m.objects {
		for k, v := range obj.Data {
			if _, ok := str(v); !ok {
				bad("%s: data.%s is not a string (quote it)", obj.where, k)
			}
		}
		for k, v := range obj.StringData {
			if _, ok := str(v); !ok {
				bad("%s: stringData.%s is not a string (quote it)", obj.where, k)
			}
		}
		switch obj.Kind {
		case "Deployment", "StatefulSet":
			var w k8sWorkload
			if err := obj.Spec.Decode(&w); err != nil {
				bad("%s: spec: %v", obj.where, err)
				continue
			}
			m.workloads = append(m.workloads, k8sWorkloadOf{obj, w})
		case "PersistentVolumeClaim":
			var s struct {
				AccessModes []string `yaml:"accessModes"`
			}
			if err := obj.Spec.Decode(&s); err != nil || len(s.AccessModes) == 0 {
				bad("%s: no spec.accessModes", obj.where)
			}
		}
	}
	problems = append(problems, m.checkWorkloads()...)
	problems = append(problems, m.checkServices()...)
	problems = append(problems, m.checkCitizens(t, files)...)
	return problems
}

// selects reports whether selector (non-empty) holds only labels that
// labels has.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkWorkloads checks each workload's selector and references.
func (m *manifests) checkWorkloads() []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, w := range m.workloads {
		if !selects(w.Selector.MatchLabels, w.Template.Metadata.Labels) {
			bad("%s: spec.selector.matchLabels does not select the pod template's labels", w.obj.where)
		}
		if w.obj.Kind == "StatefulSet" {
			svc := m.get("Service", w.ServiceName)
			if svc == nil {
				bad("%s: serviceName %q names no Service", w.obj.where, w.ServiceName)
			} else {
				var s k8sService
				if err := svc.Spec.Decode(&s); err == nil && s.ClusterIP != "None" {
					bad("%s: its Service %s is not headless (clusterIP: None)", w.obj.where, w.ServiceName)
				}
			}
		}
		pod := w.Template.Spec
		if len(pod.Containers) == 0 {
			bad("%s: no containers", w.obj.where)
		}
		volumes := map[string]bool{}
		for _, c := range w.VolumeClaimTemplates {
			volumes[c.Metadata.Name] = true
		}
		for _, v := range pod.Volumes {
			volumes[v.Name] = true
			sources := 0
			if v.EmptyDir != nil {
				sources++
			}
			if v.PersistentVolumeClaim != nil {
				sources++
				if m.get("PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName) == nil {
					bad("%s: volume %s claims %q, no PersistentVolumeClaim", w.obj.where, v.Name, v.PersistentVolumeClaim.ClaimName)
				}
			}
			if v.Secret != nil {
				sources++
				if !v.Secret.Optional && m.get("Secret", v.Secret.SecretName) == nil {
					bad("%s: volume %s: no Secret %q", w.obj.where, v.Name, v.Secret.SecretName)
				}
			}
			if v.ConfigMap != nil {
				sources++
				if !v.ConfigMap.Optional && m.get("ConfigMap", v.ConfigMap.Name) == nil {
					bad("%s: volume %s: no ConfigMap %q", w.obj.where, v.Name, v.ConfigMap.Name)
				}
			}
			if sources != 1 {
				bad("%s: volume %s has %d sources, want one these checks know", w.obj.where, v.Name, sources)
			}
		}
		for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
			where := w.obj.where + " container " + c.Name
			if c.Image == "" {
				bad("%s: no image", where)
			}
			if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
				bad("%s: no cpu and memory requests", where)
			}
			for _, vm := range c.VolumeMounts {
				if !volumes[vm.Name] {
					bad("%s: mounts %s, no volume of the pod", where, vm.Name)
				}
			}
			if _, err := m.env(c); err != nil {
				bad("%s: %v", where, err)
			}
		}
	}
	return problems
}

// env is the environment container c starts with: envFrom, then env over
// it, each reference resolved in the manifests.
func (m *manifests) env(c k8sContainer) (map[string]string, error) {
	env := map[string]string{}
	data := func(kind string, ref k8sRef) (map[string]string, error) {
		obj := m.get(kind, ref.Name)
		if obj == nil {
			return nil, fmt.Errorf("no %s %q", kind, ref.Name)
		}
		out := map[string]string{}
		for k, v := range obj.Data {
			s, _ := str(v)
			if kind == "Secret" {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return nil, fmt.Errorf("%s: data.%s is not base64", obj.where, k)
				}
				s = string(b)
			}
			out[k] = s
		}
		for k, v := range obj.StringData {
			out[k], _ = str(v)
		}
		return out, nil
	}
	for _, ef := range c.EnvFrom {
		kind, ref := "ConfigMap", ef.ConfigMapRef
		if ef.SecretRef != nil {
			kind, ref = "Secret", ef.SecretRef
		}
		if ref == nil {
			return nil, errors.New("envFrom without configMapRef or secretRef")
		}
		d, err := data(kind, *ref)
		if err != nil {
			if ref.Optional {
				continue
			}
			return nil, fmt.Errorf("envFrom: %w", err)
		}
		for k, v := range d {
			env[ef.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.Value.Kind != 0:
			v, ok := str(e.Value)
			if !ok {
				return nil, fmt.Errorf("env %s: value is not a string (quote it)", e.Name)
			}
			env[e.Name] = v
		case e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef != nil || e.ValueFrom.ConfigMapKeyRef != nil):
			kind, ref := "ConfigMap", e.ValueFrom.ConfigMapKeyRef
			if e.ValueFrom.SecretKeyRef != nil {
				kind, ref = "Secret", e.ValueFrom.SecretKeyRef
			}
			d, err := data(kind, *ref)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			v, ok := d[ref.Key]
			if !ok {
				return nil, fmt.Errorf("env %s: %s %s has no key %q", e.Name, kind, ref.Name, ref.Key)
			}
			env[e.Name] = v
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
		default:
			env[e.Name] = ""
		}
	}
	return env, nil
}

// checkServices checks that every Service and PodDisruptionBudget selects
// a workload and that a Service's target ports are ports of its pods.
func (m *manifests) checkServices() []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, obj := range m.objects {
		switch obj.Kind {
		case "Service":
			var s k8sService
			if err := obj.Spec.Decode(&s); err != nil {
				bad("%s: spec: %v", obj.where, err)
				continue
			}
			var selected []k8sWorkloadOf
			for _, w := range m.workloads {
				if selects(s.Selector, w.Template.Metadata.Labels) {
					selected = append(selected, w)
				}
			}
			if len(selected) == 0 {
				bad("%s: its selector selects no workload's pods", obj.where)
			}
			if len(s.Ports) == 0 {
				bad("%s: no ports", obj.where)
			}
			for _, p := range s.Ports {
				target := p.TargetPort
				if target == "" {
					target = portRef(strconv.Itoa(p.Port))
				}
				for _, w := range selected {
					if _, ok := containerPort(w.Template.Spec.Containers, target); !ok {
						bad("%s: port %s targets %s, no container port of %s", obj.where, p.Name, target, w.obj.where)
					}
				}
			}
		case "PodDisruptionBudget":
			var s struct {
				Selector k8sSelector `yaml:"selector"`
			}
			obj.Spec.Decode(&s)
			if !slices.ContainsFunc(m.workloads, func(w k8sWorkloadOf) bool {
				return selects(s.Selector.MatchLabels, w.Template.Metadata.Labels)
			}) {
				bad("%s: its selector selects no workload's pods", obj.where)
			}
		}
	}
	return problems
}

// containerPort resolves p (a number or a port name) among the
// containers' declared ports.
func containerPort(cs []k8sContainer, p portRef) (int, bool) {
	n, err := strconv.Atoi(string(p))
	for _, c := range cs {
		for _, cp := range c.Ports {
			if (err == nil && cp.ContainerPort == n) || (err != nil && cp.Name == string(p)) {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

// dockerfileUID is the numeric user deploy/Dockerfile's image runs as.
func dockerfileUID(t *testing.T) (int64, bool) {
	var uid int64 = -1
	for line := range strings.Lines(string(readDeployFile(t, "Dockerfile"))) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "USER" {
			u, err := strconv.ParseInt(strings.Split(f[1], ":")[0], 10, 64)
			if err != nil {
				return 0, false
			}
			uid = u
		}
	}
	return uid, uid >= 0
}

// gatewayRoutes are the GET paths (without parameters) a gateway built
// from cfg serves, the ops pages included.
func gatewayRoutes(t *testing.T, cfg Config) (map[string]bool, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &App{Config: cfg, Log: slog.New(slog.DiscardHandler), Store: memstore.New(memstore.Config{}), Engine: gateway.NewStubEngine()}
	if _, err := a.initGateway(ctx); err != nil {
		return nil, err
	}
	e, ok := a.Gateway.Handler().(*echo.Echo)
	if !ok {
		t.Fatalf("the gateway's handler is a %T, not *echo.Echo: update gatewayRoutes", a.Gateway.Handler())
	}
	routes := map[string]bool{}
	for _, r := range e.Routes() {
		if r.Method == http.MethodGet && !strings.ContainsAny(r.Path, ":*") {
			routes[r.Path] = true
		}
	}
	return routes, nil
}

// checkCitizens checks each citizen container: only real settings in its
// environment, a `serve` citizen accepts, ports and probes on what the
// process listens on, and every module run by some workload.
func (m *manifests) checkCitizens(t *testing.T, files map[string][]byte) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// A Service named citizen-x puts CITIZEN_X_SERVICE_HOST, CITIZEN_X_PORT
	// and the like into every pod of the namespace that keeps service links.
	var linked []string
	for name := range m.byKind["Service"] {
		if strings.HasPrefix(strings.ToUpper(strings.ReplaceAll(name, "-", "_")), "CITIZEN_") {
			linked = append(linked, name)
		}
	}
	uid, uidOK := dockerfileUID(t)
	covered := map[string]bool{}
	citizens := 0
	for _, w := range m.workloads {
		pod := w.Template.Spec
		for _, c := range pod.Containers {
			if c.Image != deployImage {
				continue
			}
			citizens++
			where := w.obj.where + " container " + c.Name
			if len(linked) > 0 && (pod.EnableServiceLinks == nil || *pod.EnableServiceLinks) {
				bad("%s: set enableServiceLinks: false (Service %s would add CITIZEN_ variables)", w.obj.where, strings.Join(linked, ", "))
			}
			if u := pod.SecurityContext.RunAsUser; u != nil && (!uidOK || *u != uid) {
				bad("%s: runAsUser %d, deploy/Dockerfile's user is %d", w.obj.where, *u, uid)
			}
			env, err := m.env(c)
			if err != nil {
				continue // reported by checkWorkloads
			}
			problems = append(problems, checkEnvNames(t, where, env)...)
			if len(c.Command) > 0 || len(c.Args) == 0 || c.Args[0] != "serve" {
				bad("%s: runs %q %q, want the image's entrypoint with args serve ...", where, c.Command, c.Args)
				continue
			}
			cfg, order, err := citizenProcess(t, c.Args[1:], env)
			if err != nil {
				bad("%s: %v", where, err)
				continue
			}
			for _, mod := range order {
				covered[mod] = true
			}
			grace := 30 // the API's default
			if pod.TerminationGracePeriodSeconds != nil {
				grace = *pod.TerminationGracePeriodSeconds
			}
			if float64(grace) <= cfg.ShutdownTimeout.Seconds() {
				bad("%s: terminationGracePeriodSeconds %d is not above shutdown_timeout %s: the kubelet kills it while it drains", w.obj.where, grace, cfg.ShutdownTimeout)
			}
			problems = append(problems, checkListener(t, where, c, cfg, slices.Contains(order, "gateway"))...)
		}
	}
	if citizens == 0 {
		return append(problems, "no container runs "+deployImage)
	}
	return append(problems, uncovered(covered)...)
}

// checkListener checks a citizen container's ports and probes against
// what the process listens on: the gateway on gateway.listen, serving its
// routes; nothing when it runs no gateway.
func checkListener(t *testing.T, where string, c k8sContainer, cfg Config, gw bool) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	probes := map[string]*k8sProbe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe}
	if !gw {
		if len(c.Ports) > 0 {
			bad("%s: declares ports but runs no gateway: nothing listens", where)
		}
		for _, kind := range slices.Sorted(maps.Keys(probes)) {
			if p := probes[kind]; p != nil && (p.HTTPGet != nil || p.TCPSocket != nil) {
				bad("%s: %s on a port, but it runs no gateway: nothing listens", where, kind)
			}
		}
		return problems
	}
	host, port, err := net.SplitHostPort(cfg.Gateway.Listen)
	if err != nil {
		return append(problems, fmt.Sprintf("%s: gateway.listen %q: %v", where, cfg.Gateway.Listen, err))
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		bad("%s: gateway.listen %s is a loopback address: nothing outside the pod reaches it", where, cfg.Gateway.Listen)
	}
	listen, _ := strconv.Atoi(port)
	if _, ok := containerPort([]k8sContainer{c}, portRef(port)); !ok {
		bad("%s: no container port %d, the port gateway.listen (%s) opens", where, listen, cfg.Gateway.Listen)
	}
	routes, err := gatewayRoutes(t, cfg)
	if err != nil {
		return append(problems, fmt.Sprintf("%s: building its gateway: %v", where, err))
	}
	for _, kind := range []string{"livenessProbe", "readinessProbe"} {
		if probes[kind] == nil {
			bad("%s: no %s", where, kind)
		}
	}
	for _, kind := range slices.Sorted(maps.Keys(probes)) {
		p := probes[kind]
		if p == nil {
			continue
		}
		var pr portRef
		switch {
		case p.HTTPGet != nil:
			pr = p.HTTPGet.Port
			if !routes[p.HTTPGet.Path] {
				bad("%s: %s path %s is no GET route of the gateway", where, kind, p.HTTPGet.Path)
			}
		case p.TCPSocket != nil:
			pr = p.TCPSocket.Port
		default:
			continue
		}
		if n, ok := containerPort([]k8sContainer{c}, pr); !ok || n != listen {
			bad("%s: %s probes port %s, the gateway listens on %d", where, kind, pr, listen)
		}
	}
	return problems
}

// deploy/k8s: manifests kubectl accepts whose references resolve, whose
// citizen processes name only roles and settings that exist and make a
// deployment citizen accepts, with ports and probes on what listens.
func TestKubernetesManifestsNameRealRolesAndSettings(t *testing.T) {
	for _, p := range checkManifests(t, readK8sDir(t)) {
		t.Error(p)
	}
}

// The manifest check catches each kind of mistake in an otherwise good
// set: each case changes one file in memory and wants its problem named.
func TestKubernetesCheckCatchesMistakes(t *testing.T) {
	files := readK8sDir(t)
	if base := checkManifests(t, files); len(base) > 0 {
		t.Fatalf("deploy/k8s has problems already: %q", base)
	}
	cases := []struct{ file, old, new, want string }{
		{"config.yaml", "CITIZEN_BUS_BACKEND:", "CITIZEN_BUS_BAKEND:", "CITIZEN_BUS_BAKEND is no setting"},
		{"worker.yaml", "name: CITIZEN_STORE_PG_URL", "name: CITIZN_STORE_PG_URL", "CITIZN_STORE_PG_URL is not a CITIZEN_ setting"},
		{"worker.yaml", "--target=reflection,feedback,", "--target=reflection,feedbak,", `"feedbak"`},
		{"trainer.yaml", "--target=distiller,rollout", "--target=rollout", "no process runs distiller"},
		{"config.yaml", "CITIZEN_STORE_BACKEND: postgres", "CITIZEN_STORE_BACKEND: embedded", ErrInconsistentDeployment.Error()},
		{"config.yaml", "CITIZEN_BUS_BACKEND: kafka", "CITIZEN_BUS_BACKEND: inprocess", ErrInconsistentDeployment.Error()},
		{"config.yaml", `CITIZEN_BUS_KAFKA_PARTITIONS: "8"`, "CITIZEN_BUS_KAFKA_PARTITIONS: 8", "data.CITIZEN_BUS_KAFKA_PARTITIONS is not a string"},
		{"gateway.yaml", "path: /readyz", "path: /ready", "readinessProbe path /ready is no GET route"},
		{"gateway.yaml", "containerPort: 8080", "containerPort: 8081", "no container port 8080"},
		{"gateway.yaml", "value: 0.0.0.0:8080", "value: 127.0.0.1:8080", "loopback"},
		{"gateway.yaml", "value: 0.0.0.0:8080", "value: 0.0.0.0:9090", "no container port 9090"},
		{"gateway.yaml", "enableServiceLinks: false", "enableServiceLinks: true", "enableServiceLinks"},
		{"gateway.yaml", "terminationGracePeriodSeconds: 45", "terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds 30"},
		{"gateway.yaml", "claimName: citizen-distill", "claimName: citizen-distil", `"citizen-distil"`},
		{"gateway.yaml", "      targetPort: http", "      targetPort: web", "targets web"},
		{"worker.yaml", "key: url", "key: dsn", `no key "dsn"`},
		{"trainer.yaml", "runAsUser: 10001", "runAsUser: 1000", "runAsUser 1000"},
		{"kafka.yaml", "serviceName: kafka", "serviceName: kafka-headless", `"kafka-headless" names no Service`},
		{"kafka.yaml", "apiVersion: apps/v1", "apiVersion: apps/v1beta1", "want apps/v1"},
		{"postgres.yaml", "kind: StatefulSet", "kind: StatefullSet", "kind StatefullSet"},
		{"storage.yaml", "  name: citizen-models", "  namespace: citizen\n  name: citizen-models", "namespace-free"},
		{"kustomization.yaml", "  - trainer.yaml\n", "", "trainer.yaml is not in kustomization.yaml"},
	}
	for _, c := range cases {
		t.Run(c.file+"/"+c.new, func(t *testing.T) {
			changed := map[string][]byte{}
			for k, v := range files {
				changed[k] = v
			}
			changed[c.file] = mutate(t, c.file, files[c.file], c.old, c.new)
			wantProblem(t, checkManifests(t, changed), c.want)
		})
	}
}
