package kubernetes

import (
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// driverName is the CSI driver's name: what `cassfs csi` registers.
const driverName = "cassfs.csi.cassfs.io"

// volumeAttributes are the volume attributes the examples may use (dataset required): some
// of those the node plugin reads, mount.Attributes(), which docs/mount-options.md lists.
var volumeAttributes = []string{"dataset", "seed", "splits", "order", "cache-size", "cache-dir", "cache-dir-size", "hosts"}

// TestCSIDriver: one CSIDriver, under the name the plugin registers, with nothing to
// attach and nothing to chown.
func TestCSIDriver(t *testing.T) {
	m := load(t)
	drivers := all[storagev1.CSIDriver](m)
	if len(drivers) != 1 {
		t.Fatalf("got %d CSIDriver objects, want 1", len(drivers))
	}
	d := drivers[0]
	if d.Name != driverName {
		t.Errorf("CSIDriver %s, want %s (the name cassfs csi registers)", d.Name, driverName)
	}
	if d.Spec.AttachRequired == nil || *d.Spec.AttachRequired {
		t.Error("attachRequired: want false (there is no controller to attach)")
	}
	if d.Spec.PodInfoOnMount == nil || !*d.Spec.PodInfoOnMount {
		t.Error("podInfoOnMount: want true")
	}
	if d.Spec.FSGroupPolicy == nil || *d.Spec.FSGroupPolicy != storagev1.NoneFSGroupPolicy {
		t.Error("fsGroupPolicy: want None (a read-only tree: kubelet must not walk it to chown)")
	}
	// Ephemeral volumes are published without being staged, and the plugin mounts at staging.
	if got := d.Spec.VolumeLifecycleModes; !slices.Equal(got, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
		t.Errorf("volumeLifecycleModes %v, want [Persistent]", got)
	}
}

// nodePlugin returns the DaemonSet that runs `cassfs csi` and its pod template.
func nodePlugin(t *testing.T, m manifests) (*appsv1.DaemonSet, *corev1.PodSpec) {
	t.Helper()
	sets := all[appsv1.DaemonSet](m)
	if len(sets) != 1 {
		t.Fatalf("got %d DaemonSets, want 1 (the node plugin)", len(sets))
	}
	return sets[0], &sets[0].Spec.Template.Spec
}

func container(t *testing.T, spec *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("the node plugin has no container %s", name)
	return nil
}

// flag returns the value of --name=value (or --name value) among c's arguments.
func flag(c *corev1.Container, name string) (string, bool) {
	args := slices.Concat(c.Command, c.Args)
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// volumeAt returns the volume of spec that c sees at p, and p's path inside it.
func volumeAt(spec *corev1.PodSpec, c *corev1.Container, p string) (*corev1.Volume, *corev1.VolumeMount, string) {
	var best *corev1.VolumeMount
	for i, vm := range c.VolumeMounts {
		if (p == vm.MountPath || strings.HasPrefix(p, strings.TrimSuffix(vm.MountPath, "/")+"/")) &&
			(best == nil || len(vm.MountPath) > len(best.MountPath)) {
			best = &c.VolumeMounts[i]
		}
	}
	if best == nil {
		return nil, nil, ""
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, best.MountPath), "/")
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == best.Name {
			return &spec.Volumes[i], best, rel
		}
	}
	return nil, nil, ""
}

// hostPathAt returns the node's path behind p in c, if a hostPath volume holds it.
func hostPathAt(spec *corev1.PodSpec, c *corev1.Container, p string) string {
	v, _, rel := volumeAt(spec, c, p)
	if v == nil || v.HostPath == nil {
		return ""
	}
	return path.Join(v.HostPath.Path, rel)
}

// TestNodePlugin: the DaemonSet's containers can do what each must, and no more: the
// plugin is privileged with /dev/fuse and kubelet's directories shared both ways, the
// serving process has no privilege at all, and the sockets they and the sidecars share
// are the same files.
func TestNodePlugin(t *testing.T) {
	m := load(t)
	ds, spec := nodePlugin(t, m)
	csi, serve := container(t, spec, "csi"), container(t, spec, "serve")
	registrar, probe := container(t, spec, "node-driver-registrar"), container(t, spec, "liveness-probe")

	if !selects(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels) {
		t.Errorf("the selector %v does not select the pods' labels %v", ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)
	}
	if spec.HostPID || spec.HostIPC || spec.HostNetwork {
		t.Error("the node plugin shares the node's PID, IPC or network namespace: it needs none")
	}

	// One image for the plugin, the server and the init container: the hand-over between
	// csi and serve is between two builds of the same binary.
	for _, c := range slices.Concat(spec.InitContainers, []corev1.Container{*serve}) {
		if c.Image != csi.Image {
			t.Errorf("container %s runs %s, the plugin %s: want the same build", c.Name, c.Image, csi.Image)
		}
	}
	if len(csi.Args) == 0 || csi.Args[0] != "csi" || len(serve.Args) == 0 || serve.Args[0] != "serve" {
		t.Errorf("want cassfs csi and cassfs serve (the image's entry point is cassfs), got %q and %q", csi.Args, serve.Args)
	}

	// The plugin: privileged, /dev/fuse, kubelet's plugin and pod directories at their
	// node paths (kubelet passes node paths) with Bidirectional propagation.
	if sc := csi.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("container csi is not privileged: it mounts, and only privileged containers get Bidirectional propagation")
	}
	if v, _, _ := volumeAt(spec, csi, "/dev/fuse"); v == nil || v.HostPath == nil || v.HostPath.Path != "/dev/fuse" ||
		v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathCharDev {
		t.Error("container csi has no /dev/fuse (a hostPath of type CharDevice)")
	}
	for _, dir := range []string{"/var/lib/kubelet/plugins", "/var/lib/kubelet/pods"} {
		v, vm, rel := volumeAt(spec, csi, dir)
		switch {
		case v == nil || v.HostPath == nil || path.Join(v.HostPath.Path, rel) != dir:
			t.Errorf("container csi does not see the node's %s at %s", dir, dir)
		case vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationBidirectional:
			t.Errorf("container csi mounts %s without Bidirectional propagation: its mounts would not reach the pods", dir)
		}
	}
	if v, ok := flag(csi, "node-id"); !ok || !fromNodeName(csi, v) {
		t.Errorf("container csi: --node-id %q is not the node's name (spec.nodeName)", v)
	}

	// The server: no root, no capabilities, no way to gain any, nothing of the node's
	// but the cache directory.
	sc := serve.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("container serve has no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("container serve: runAsNonRoot is not true")
	case sc.RunAsUser == nil || *sc.RunAsUser != 65534:
		t.Error("container serve: runAsUser is not 65534")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("container serve is privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("container serve: allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("container serve: readOnlyRootFilesystem is not true")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		t.Errorf("container serve: capabilities %+v, want drop ALL and add none", sc.Capabilities)
	}
	for _, vm := range serve.VolumeMounts {
		v, _, _ := volumeAt(spec, serve, vm.MountPath)
		if vm.MountPropagation != nil && *vm.MountPropagation == corev1.MountPropagationBidirectional {
			t.Errorf("container serve mounts %s with Bidirectional propagation", vm.MountPath)
		}
		if v != nil && v.HostPath != nil && vm.MountPath != cacheDir {
			t.Errorf("container serve sees the node's %s: it needs none of the node but the cache directory", v.HostPath.Path)
		}
	}
	checkCacheDir(t, spec, serve)

	// The hand-over: the plugin's --serve-socket is the server's --socket, on a volume
	// both mount.
	give, ok1 := flag(csi, "serve-socket")
	take, ok2 := flag(serve, "socket")
	gv, _, grel := volumeAt(spec, csi, give)
	tv, _, trel := volumeAt(spec, serve, take)
	if !ok1 || !ok2 || gv == nil || tv == nil || gv.Name != tv.Name || grel != trel {
		t.Errorf("the plugin hands descriptors to %q, the server takes them at %q: want one socket on a volume both mount", give, take)
	}

	// Kubelet: the plugin's CSI socket is where the registrar tells kubelet it is, under
	// kubelet's plugin directory for this driver; the registrar's own socket is in
	// kubelet's registry.
	want := "/var/lib/kubelet/plugins/" + driverName + "/csi.sock"
	endpoint, _ := flag(csi, "endpoint")
	if p, ok := strings.CutPrefix(endpoint, "unix://"); !ok || hostPathAt(spec, csi, p) != want {
		t.Errorf("container csi listens at %q, on the node %q: want %s", endpoint, hostPathAt(spec, csi, p), want)
	}
	if got, _ := flag(registrar, "kubelet-registration-path"); got != want {
		t.Errorf("the registrar registers %q with kubelet, want %s", got, want)
	}
	for _, c := range []*corev1.Container{registrar, probe} {
		if addr, _ := flag(c, "csi-address"); hostPathAt(spec, c, addr) != want {
			t.Errorf("container %s calls the plugin at %q, on the node %q: want %s", c.Name, addr, hostPathAt(spec, c, addr), want)
		}
	}
	if hostPathAt(spec, registrar, "/registration") != "/var/lib/kubelet/plugins_registry" {
		t.Error("the registrar's /registration is not kubelet's /var/lib/kubelet/plugins_registry")
	}
	if !strings.HasPrefix(registrar.Image, "registry.k8s.io/sig-storage/csi-node-driver-registrar:") ||
		!strings.HasPrefix(probe.Image, "registry.k8s.io/sig-storage/livenessprobe:") {
		t.Errorf("sidecars %s and %s: want registry.k8s.io/sig-storage's", registrar.Image, probe.Image)
	}

	// The plugin's liveness probe asks the port the livenessprobe sidecar serves.
	lp := csi.LivenessProbe
	if lp == nil || lp.HTTPGet == nil {
		t.Fatal("container csi has no HTTP liveness probe")
	}
	port := lp.HTTPGet.Port.IntValue()
	for _, p := range csi.Ports {
		if p.Name == lp.HTTPGet.Port.String() {
			port = int(p.ContainerPort)
		}
	}
	if hp, _ := flag(probe, "health-port"); hp != strconv.Itoa(port) || port == 0 {
		t.Errorf("container csi's liveness probe asks port %d, the livenessprobe sidecar serves %q", port, hp)
	}

	// API access: a service account with no token and no role bound to it.
	sa, ok := find[corev1.ServiceAccount](m, m.namespaceOf(ds), spec.ServiceAccountName)
	if !ok || spec.ServiceAccountName == "" {
		t.Fatalf("the node plugin runs as service account %q, which the manifests do not hold", spec.ServiceAccountName)
	}
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken ||
		spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the node plugin's service account token is mounted: it calls no API")
	}
	for _, b := range slices.Concat(subjectsOf(all[rbacv1.RoleBinding](m)), subjectsOf(all[rbacv1.ClusterRoleBinding](m))) {
		if b.Kind == "ServiceAccount" && b.Name == sa.Name && b.Namespace == m.namespaceOf(sa) {
			t.Errorf("a role is bound to the node plugin's service account: neither the plugin nor the registrar needs one")
		}
	}
}

// cacheDir is where the server sees the node's cache directory.
const cacheDir = "/var/cache/cassfs"

// checkCacheDir: the server's cache directory is a node directory (it outlives the pod),
// handed to the server's user by an init container.
func checkCacheDir(t *testing.T, spec *corev1.PodSpec, serve *corev1.Container) {
	t.Helper()
	v, _, _ := volumeAt(spec, serve, cacheDir)
	if v == nil || v.HostPath == nil {
		t.Errorf("container serve has no node directory at %s", cacheDir)
		return
	}
	uid := strconv.FormatInt(*serve.SecurityContext.RunAsUser, 10)
	chowned := slices.ContainsFunc(spec.InitContainers, func(c corev1.Container) bool {
		cmd := slices.Concat(c.Command, c.Args)
		if len(cmd) < 3 || cmd[0] != "chown" || !strings.HasPrefix(cmd[1], uid+":") {
			return false
		}
		iv, _, rel := volumeAt(spec, &c, cmd[len(cmd)-1])
		return iv != nil && iv.Name == v.Name && rel == ""
	})
	if !chowned {
		t.Errorf("no init container gives %s (node %s) to uid %s: the server could not write it", cacheDir, v.HostPath.Path, uid)
	}
}

func subjectsOf[T rbacv1.RoleBinding | rbacv1.ClusterRoleBinding](bs []*T) []rbacv1.Subject {
	var out []rbacv1.Subject
	for _, b := range bs {
		switch b := any(b).(type) {
		case *rbacv1.RoleBinding:
			out = append(out, b.Subjects...)
		case *rbacv1.ClusterRoleBinding:
			out = append(out, b.Subjects...)
		}
	}
	return out
}

// fromNodeName reports whether v is $(X) for an X of c's environment set from spec.nodeName.
func fromNodeName(c *corev1.Container, v string) bool {
	for _, e := range c.Env {
		if v == "$("+e.Name+")" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			return true
		}
	}
	return false
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// TestVolume: every PersistentVolume of the driver is a read-only dataset the plugin can
// stage: its driver's name, a dataset, attributes the plugin knows, a login with a
// username and a password, a cache directory the server can write.
func TestVolume(t *testing.T) {
	m := load(t)
	_, spec := nodePlugin(t, m)
	serve := container(t, spec, "serve")
	pvs := all[corev1.PersistentVolume](m)
	if len(pvs) == 0 {
		t.Fatal("no PersistentVolume: the example is missing")
	}
	for _, pv := range pvs {
		c := pv.Spec.CSI
		if c == nil || c.Driver != driverName {
			t.Errorf("volume %s: not a volume of driver %s", pv.Name, driverName)
			continue
		}
		if c.VolumeHandle == "" || !c.ReadOnly || !slices.Equal(pv.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}) {
			t.Errorf("volume %s: want a volumeHandle, readOnly and accessModes [ReadOnlyMany]", pv.Name)
		}
		for k := range c.VolumeAttributes {
			if !slices.Contains(volumeAttributes, k) {
				t.Errorf("volume %s: attribute %q is none of %v", pv.Name, k, volumeAttributes)
			}
		}
		if c.VolumeAttributes["dataset"] == "" {
			t.Errorf("volume %s: no dataset", pv.Name)
		}
		if dir := c.VolumeAttributes["cache-dir"]; dir != "" {
			if v, _, rel := volumeAt(spec, serve, dir); v == nil || v.HostPath == nil || rel == "" {
				t.Errorf("volume %s: cache-dir %s is no directory under the server's node directory %s", pv.Name, dir, cacheDir)
			}
			if c.VolumeAttributes["cache-dir-size"] == "" {
				t.Errorf("volume %s: cache-dir without cache-dir-size (cassfs mount refuses it)", pv.Name)
			}
		}
		ref := c.NodeStageSecretRef
		if ref == nil {
			t.Errorf("volume %s: no nodeStageSecretRef (the database login)", pv.Name)
			continue
		}
		if s, ok := find[corev1.Secret](m, ref.Namespace, ref.Name); ok && (!hasKey(s, "username") || !hasKey(s, "password")) {
			t.Errorf("volume %s: Secret %s/%s lacks username or password", pv.Name, ref.Namespace, ref.Name)
		}
	}
}

// shardPath is how a rank names its directory, /data/<split>/shard-{rank}-of-{world}/epoch-,
// in a Python f-string.
var shardPath = regexp.MustCompile(`(/[\w/]+)/(\w+)/shard-\{(\w+)\}-of-\{(\w+)\}/epoch-`)

// TestTrainingJob: the example Job runs several ranks per pod with torchrun, its ranks
// find the rendezvous, and each reads its shard directory from RANK and WORLD_SIZE, in a
// split the volume shows, where the claim is mounted.
func TestTrainingJob(t *testing.T) {
	m := load(t)
	jobs := all[batchv1.Job](m)
	if len(jobs) != 1 {
		t.Fatalf("got %d Jobs, want 1 (the example)", len(jobs))
	}
	job := jobs[0]
	ns, spec := m.namespaceOf(job), &job.Spec.Template.Spec
	if job.Spec.CompletionMode == nil || *job.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Error("not an Indexed Job: pods would not know their node rank")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(spec.Containers))
	}
	c := &spec.Containers[0]
	if len(c.Command) == 0 || c.Command[0] != "torchrun" {
		t.Fatalf("command %q: want torchrun", c.Command)
	}
	nnodes, _ := flag(c, "nnodes")
	nproc, _ := flag(c, "nproc-per-node")
	if n, err := strconv.Atoi(nproc); err != nil || n < 2 {
		t.Errorf("--nproc-per-node %q: want several ranks per pod", nproc)
	}
	for what, n := range map[string]*int32{"completions": job.Spec.Completions, "parallelism": job.Spec.Parallelism} {
		if n == nil || strconv.Itoa(int(*n)) != nnodes {
			t.Errorf("%s %v, --nnodes %q: want one pod per torchrun node, all at once", what, n, nnodes)
		}
	}
	if rank, _ := flag(c, "node-rank"); rank != "$(JOB_COMPLETION_INDEX)" {
		t.Errorf("--node-rank %q: want $(JOB_COMPLETION_INDEX)", rank)
	}
	// Pod 0 is the rendezvous, by its name under a headless Service selecting the Job's pods.
	svc, ok := find[corev1.Service](m, ns, spec.Subdomain)
	if !ok || svc.Spec.ClusterIP != corev1.ClusterIPNone || !selects(svc.Spec.Selector, map[string]string{"batch.kubernetes.io/job-name": job.Name}) {
		t.Errorf("subdomain %q: want a headless Service of the manifests selecting the Job's pods", spec.Subdomain)
	}
	if addr, _ := flag(c, "master-addr"); addr != job.Name+"-0."+spec.Subdomain {
		t.Errorf("--master-addr %q: want pod 0, %s-0.%s", addr, job.Name, spec.Subdomain)
	}

	// What the ranks run: the command and every config map the pod mounts.
	text := strings.Join(slices.Concat(c.Command, c.Args), " ")
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			if cm, ok := find[corev1.ConfigMap](m, ns, v.ConfigMap.Name); ok {
				for _, s := range cm.Data {
					text += "\n" + s
				}
			}
		}
	}
	p := shardPath.FindStringSubmatch(text)
	if p == nil {
		t.Fatalf("the ranks do not read <split>/shard-{rank}-of-{world}/epoch-N/ (%s)", shardPath)
	}
	root, split := p[1], p[2]
	for i, env := range []string{"RANK", "WORLD_SIZE"} {
		if !regexp.MustCompile(`\b` + p[3+i] + `\s*=\s*int\(os\.environ\[["']` + env + `["']\]\)`).MatchString(text) {
			t.Errorf("the ranks' shard-{%s}-of-{%s}: %s is not int(os.environ[%q])", p[3], p[4], p[3+i], env)
		}
	}
	var pv *corev1.PersistentVolume
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		vol, vm, _ := volumeAt(spec, c, root)
		if vol == nil || vol.Name != v.Name || vm.MountPath != root || !vm.ReadOnly {
			continue
		}
		if pvc, ok := find[corev1.PersistentVolumeClaim](m, ns, v.PersistentVolumeClaim.ClaimName); ok {
			pv, _ = find[corev1.PersistentVolume](m, "", pvc.Spec.VolumeName)
		}
	}
	if pv == nil || pv.Spec.CSI == nil {
		t.Fatalf("%s is not where a claim of a cassfs volume is mounted read-only", root)
	}
	if splits := strings.Split(pv.Spec.CSI.VolumeAttributes["splits"], ","); split != "all" && !slices.Contains(splits, split) && !slices.Contains(splits, "*") {
		t.Errorf("the ranks read split %s, which volume %s does not show (splits %v)", split, pv.Name, splits)
	}
}

// TestContainerfile: the image the manifests name builds the command with a Go at least
// as new as go.mod asks, and its entry point is cassfs (the manifests pass subcommands).
func TestContainerfile(t *testing.T) {
	cf, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(mod)
	image := regexp.MustCompile(`(?m)^FROM \S*golang:(\d+)\.(\d+)\S* AS build$`).FindSubmatch(cf)
	if goLine == nil || image == nil {
		t.Fatalf("want a go directive in go.mod and a golang:X.Y build stage in the Containerfile")
	}
	version := func(m [][]byte) [2]int {
		var v [2]int
		for i := range v {
			n, err := strconv.Atoi(string(m[i+1]))
			if err != nil {
				t.Fatal(err)
			}
			v[i] = n
		}
		return v
	}
	if iv, gv := version(image), version(goLine); iv[0] < gv[0] || iv[0] == gv[0] && iv[1] < gv[1] {
		t.Errorf("the build stage has Go %s.%s, go.mod asks for %s.%s", image[1], image[2], goLine[1], goLine[2])
	}
	for _, want := range []string{"go build", "./cmd/cassfs", `ENTRYPOINT ["/usr/local/bin/cassfs"]`} {
		if !strings.Contains(string(cf), want) {
			t.Errorf("the Containerfile has no %q", want)
		}
	}
}
