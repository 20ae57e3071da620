package kubernetes

import (
	"bytes"
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"
)

// kinds are the objects the manifests may hold, by "apiVersion/kind". Anything else is
// an error: a kind the test cannot decode is a kind it does not check.
var kinds = map[string]func() named{
	"apps/v1/DaemonSet":                               func() named { return new(appsv1.DaemonSet) },
	"batch/v1/Job":                                    func() named { return new(batchv1.Job) },
	"storage.k8s.io/v1/CSIDriver":                     func() named { return new(storagev1.CSIDriver) },
	"v1/Namespace":                                    func() named { return new(corev1.Namespace) },
	"v1/ServiceAccount":                               func() named { return new(corev1.ServiceAccount) },
	"v1/Secret":                                       func() named { return new(corev1.Secret) },
	"v1/ConfigMap":                                    func() named { return new(corev1.ConfigMap) },
	"v1/Service":                                      func() named { return new(corev1.Service) },
	"v1/PersistentVolume":                             func() named { return new(corev1.PersistentVolume) },
	"v1/PersistentVolumeClaim":                        func() named { return new(corev1.PersistentVolumeClaim) },
	"rbac.authorization.k8s.io/v1/Role":               func() named { return new(rbacv1.Role) },
	"rbac.authorization.k8s.io/v1/RoleBinding":        func() named { return new(rbacv1.RoleBinding) },
	"rbac.authorization.k8s.io/v1/ClusterRole":        func() named { return new(rbacv1.ClusterRole) },
	"rbac.authorization.k8s.io/v1/ClusterRoleBinding": func() named { return new(rbacv1.ClusterRoleBinding) },
}

// clusterScoped are the kinds above that live in no namespace.
var clusterScoped = []string{"CSIDriver", "Namespace", "PersistentVolume", "ClusterRole", "ClusterRoleBinding"}

// named is what every decoded object is (through its embedded ObjectMeta).
type named interface {
	GetName() string
	GetNamespace() string
}

// object is one decoded manifest.
type object struct {
	file      string // relative to this directory, e.g. example/volume.yaml
	kind      string // Kind alone, e.g. DaemonSet
	namespace string // "" for cluster-scoped kinds, "default" when a namespaced one names none
	obj       named
}

func (o object) String() string {
	if o.namespace == "" {
		return fmt.Sprintf("%s %s (%s)", o.kind, o.obj.GetName(), o.file)
	}
	return fmt.Sprintf("%s %s/%s (%s)", o.kind, o.namespace, o.obj.GetName(), o.file)
}

// decode decodes one YAML document strictly into the type its apiVersion and kind name.
// A namespaced object that names no namespace is in "default" (where kubectl apply
// without -n puts it).
func decode(doc []byte) (object, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return object{}, err
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return object{}, fmt.Errorf("apiVersion %q kind %q: not a kind this test decodes", tm.APIVersion, tm.Kind)
	}
	o := object{kind: tm.Kind, obj: newObj()}
	if err := yaml.UnmarshalStrict(doc, o.obj); err != nil {
		return object{}, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	if o.obj.GetName() == "" {
		return object{}, fmt.Errorf("%s without a name", tm.Kind)
	}
	switch ns := o.obj.GetNamespace(); {
	case !slices.Contains(clusterScoped, tm.Kind):
		o.namespace = cmp.Or(ns, "default")
	case ns != "":
		return object{}, fmt.Errorf("%s %s: cluster-scoped, but names namespace %s", tm.Kind, o.obj.GetName(), ns)
	}
	return o, nil
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// documents splits a YAML stream at its "---" lines, dropping documents that hold only
// comments and blank lines.
func documents(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range separator.Split(string(data), -1) {
		for _, line := range strings.Split(d, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				docs = append(docs, []byte(d))
				break
			}
		}
	}
	return docs
}

// manifests is every object of every YAML file under this directory.
type manifests []object

// loaded is every manifest under this directory, decoded once for all the tests.
var loaded struct {
	once sync.Once
	m    manifests
	bad  []string // documents that did not decode, or repeat another object
	err  error    // the directory could not be read
}

// load returns every manifest, failing the test if any did not decode (TestManifestsDecode
// says which).
func load(t *testing.T) manifests {
	t.Helper()
	m, bad, err := loadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("%d manifest documents do not decode or repeat another (TestManifestsDecode lists them)", len(bad))
	}
	return m
}

func loadAll() (manifests, []string, error) {
	loaded.once.Do(func() { loaded.m, loaded.bad, loaded.err = read(".") })
	return loaded.m, loaded.bad, loaded.err
}

// read decodes every YAML document under dir. Documents that do not decode strictly, or
// repeat another's kind, namespace and name, are listed in bad.
func read(dir string) (all manifests, bad []string, err error) {
	seen := map[string]string{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		for i, doc := range documents(data) {
			o, err := decode(doc)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s, document %d: %v", rel, i+1, err))
				continue
			}
			o.file = rel
			if prev, dup := seen[o.key()]; dup {
				bad = append(bad, fmt.Sprintf("%v: again, after %s", o, prev))
			}
			seen[o.key()] = rel
			all = append(all, o)
		}
		return nil
	})
	if err == nil && len(all) == 0 {
		err = fmt.Errorf("no manifests under %s", dir)
	}
	return all, bad, err
}

// TestManifestsDecode: every document of every manifest decodes strictly into its kind's
// type, and no two are the same object.
func TestManifestsDecode(t *testing.T) {
	_, bad, err := loadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

func (o object) key() string { return o.kind + "/" + o.namespace + "/" + o.obj.GetName() }

// all returns the objects of type T.
func all[T any](m manifests) []*T {
	var out []*T
	for _, o := range m {
		if v, ok := any(o.obj).(*T); ok {
			out = append(out, v)
		}
	}
	return out
}

// find returns the object of type T named name in namespace ns ("" for cluster-scoped).
func find[T any](m manifests, ns, name string) (*T, bool) {
	for _, o := range m {
		if v, ok := any(o.obj).(*T); ok && o.namespace == ns && o.obj.GetName() == name {
			return v, true
		}
	}
	return nil, false
}

// namespaceOf returns the namespace obj was loaded to ("default" for a namespaced object
// that names none).
func (m manifests) namespaceOf(obj named) string {
	for _, o := range m {
		if o.obj == obj {
			return o.namespace
		}
	}
	return ""
}

// TestDecodeIsStrict holds the decoder to what the manifests' test relies on: a mistake
// kubectl apply --validate=strict would refuse is an error here too.
func TestDecodeIsStrict(t *testing.T) {
	const pv = "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: p\nspec:\n  csi:\n    driver: d\n    volumeHandle: h\n"
	for _, c := range []struct {
		name, doc string
		ok        bool
	}{
		{"valid", pv, true},
		{"unknown field", pv + "    volumeAttribute:\n      dataset: tiles\n", false},
		{"duplicate field", pv + "    driver: e\n", false},
		{"number for a string", pv + "    volumeAttributes:\n      seed: 42\n", false},
		{"string for a number", "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\nspec:\n  completions: two\n", false},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n", false},
		{"unknown version", "apiVersion: storage.k8s.io/v1beta1\nkind: CSIDriver\nmetadata:\n  name: d\n", false},
		{"no name", "apiVersion: v1\nkind: Secret\nmetadata:\n  namespace: default\n", false},
		{"cluster-scoped in a namespace", "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: p\n  namespace: default\n", false},
	} {
		_, err := decode([]byte(c.doc))
		if (err == nil) != c.ok {
			t.Errorf("%s: got error %v, want error: %v", c.name, err, !c.ok)
		}
	}
	stream := []byte("# comments only\n---\napiVersion: v1\n---   \n\n---\n# again\nkind: x\n")
	if got := documents(stream); len(got) != 2 || !bytes.Contains(got[1], []byte("kind: x")) {
		t.Errorf("documents: got %q, want the two documents that hold more than comments", got)
	}
}

// TestReferencesResolve: every name one manifest gives of another's object (secrets,
// config maps, claims, volumes, service accounts, namespaces, roles) is an object of the
// manifests, or a namespace every cluster has.
func TestReferencesResolve(t *testing.T) {
	m := load(t)
	builtin := []string{"default", "kube-system"}
	for _, o := range m {
		if ns := o.namespace; ns != "" && !slices.Contains(builtin, ns) {
			if _, ok := find[corev1.Namespace](m, "", ns); !ok {
				t.Errorf("%v: namespace %s is neither in the manifests nor in every cluster", o, ns)
			}
		}
		var spec *corev1.PodSpec
		switch v := o.obj.(type) {
		case *appsv1.DaemonSet:
			spec = &v.Spec.Template.Spec
		case *batchv1.Job:
			spec = &v.Spec.Template.Spec
		case *corev1.PersistentVolume:
			if v.Spec.CSI == nil {
				continue
			}
			for what, ref := range map[string]*corev1.SecretReference{
				"nodeStageSecretRef": v.Spec.CSI.NodeStageSecretRef, "nodePublishSecretRef": v.Spec.CSI.NodePublishSecretRef,
				"controllerPublishSecretRef": v.Spec.CSI.ControllerPublishSecretRef, "nodeExpandSecretRef": v.Spec.CSI.NodeExpandSecretRef,
			} {
				if ref == nil {
					continue
				}
				if _, ok := find[corev1.Secret](m, ref.Namespace, ref.Name); !ok {
					t.Errorf("%v: %s names Secret %s/%s, which the manifests do not hold", o, what, ref.Namespace, ref.Name)
				}
			}
			if r := v.Spec.ClaimRef; r != nil {
				if c, ok := find[corev1.PersistentVolumeClaim](m, r.Namespace, r.Name); !ok || c.Spec.VolumeName != v.Name {
					t.Errorf("%v: claimRef %s/%s is no claim of the manifests naming this volume", o, r.Namespace, r.Name)
				}
			}
		case *corev1.PersistentVolumeClaim:
			if pv, ok := find[corev1.PersistentVolume](m, "", v.Spec.VolumeName); !ok {
				t.Errorf("%v: volumeName %q is no PersistentVolume of the manifests", o, v.Spec.VolumeName)
			} else if sc := v.Spec.StorageClassName; sc == nil || *sc != pv.Spec.StorageClassName {
				// Without one, the claim gets the cluster's default class, and never binds
				// to a volume of another.
				t.Errorf("%v: storageClassName is not volume %s's %q: they never bind", o, pv.Name, pv.Spec.StorageClassName)
			}
		case *rbacv1.RoleBinding, *rbacv1.ClusterRoleBinding:
			checkBinding(t, m, o)
		}
		if spec != nil {
			checkPodReferences(t, m, o, spec)
		}
	}
}

// checkPodReferences checks what a pod template names: its service account, the volumes
// its containers mount, the secrets, config maps and claims its volumes and environment
// name, and the variables $(VAR) its commands use.
func checkPodReferences(t *testing.T, m manifests, o object, spec *corev1.PodSpec) {
	t.Helper()
	if sa := spec.ServiceAccountName; sa != "" {
		if _, ok := find[corev1.ServiceAccount](m, o.namespace, sa); !ok {
			t.Errorf("%v: serviceAccountName %s is no ServiceAccount of the manifests", o, sa)
		}
	}
	for _, v := range spec.Volumes {
		switch {
		case v.Secret != nil:
			if _, ok := find[corev1.Secret](m, o.namespace, v.Secret.SecretName); !ok {
				t.Errorf("%v: volume %s names Secret %s, which the manifests do not hold", o, v.Name, v.Secret.SecretName)
			}
		case v.ConfigMap != nil:
			if _, ok := find[corev1.ConfigMap](m, o.namespace, v.ConfigMap.Name); !ok {
				t.Errorf("%v: volume %s names ConfigMap %s, which the manifests do not hold", o, v.Name, v.ConfigMap.Name)
			}
		case v.PersistentVolumeClaim != nil:
			if _, ok := find[corev1.PersistentVolumeClaim](m, o.namespace, v.PersistentVolumeClaim.ClaimName); !ok {
				t.Errorf("%v: volume %s names claim %s, which the manifests do not hold", o, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	job, _ := o.obj.(*batchv1.Job)
	indexed := job != nil && job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, vm := range c.VolumeMounts {
			if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name }) {
				t.Errorf("%v: container %s mounts volume %s, which the pod does not have", o, c.Name, vm.Name)
			}
		}
		env := map[string]bool{}
		if indexed {
			env["JOB_COMPLETION_INDEX"] = true // set by the Job controller in every container
		}
		for _, e := range c.Env {
			env[e.Name] = true
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				if s, ok := find[corev1.Secret](m, o.namespace, r.Name); (!ok || !hasKey(s, r.Key)) && (r.Optional == nil || !*r.Optional) {
					t.Errorf("%v: container %s: $%s from Secret %s key %s, which the manifests do not hold", o, c.Name, e.Name, r.Name, r.Key)
				}
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				if cm, ok := find[corev1.ConfigMap](m, o.namespace, r.Name); (!ok || cm.Data[r.Key] == "") && (r.Optional == nil || !*r.Optional) {
					t.Errorf("%v: container %s: $%s from ConfigMap %s key %s, which the manifests do not hold", o, c.Name, e.Name, r.Name, r.Key)
				}
			}
		}
		for _, arg := range slices.Concat(c.Command, c.Args) {
			for _, ref := range varRef.FindAllStringSubmatch(arg, -1) {
				if !env[ref[1]] {
					t.Errorf("%v: container %s: %q uses $(%s), which its environment does not set (Kubernetes would pass it as it is)", o, c.Name, arg, ref[1])
				}
			}
		}
	}
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func hasKey(s *corev1.Secret, key string) bool {
	_, inData := s.Data[key]
	_, inString := s.StringData[key]
	return inData || inString
}

// checkBinding checks that a role binding's role and service accounts are the manifests'.
func checkBinding(t *testing.T, m manifests, o object) {
	t.Helper()
	var ref rbacv1.RoleRef
	var subjects []rbacv1.Subject
	switch b := o.obj.(type) {
	case *rbacv1.RoleBinding:
		ref, subjects = b.RoleRef, b.Subjects
	case *rbacv1.ClusterRoleBinding:
		ref, subjects = b.RoleRef, b.Subjects
	}
	var ok bool
	switch ref.Kind {
	case "Role":
		_, ok = find[rbacv1.Role](m, o.namespace, ref.Name)
	case "ClusterRole":
		_, ok = find[rbacv1.ClusterRole](m, "", ref.Name)
	}
	if !ok {
		t.Errorf("%v: roleRef %s %s is not in the manifests", o, ref.Kind, ref.Name)
	}
	for _, s := range subjects {
		if s.Kind != "ServiceAccount" {
			continue
		}
		if _, ok := find[corev1.ServiceAccount](m, s.Namespace, s.Name); !ok {
			t.Errorf("%v: subject ServiceAccount %s/%s is not in the manifests", o, s.Namespace, s.Name)
		}
	}
}
