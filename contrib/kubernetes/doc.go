// Package kubernetes holds the manifests that run cassfs on Kubernetes and the test that
// checks them; it has no code of its own.
//
// The manifests: the node plugin (node.yaml: a DaemonSet of the privileged `cassfs csi`,
// the unprivileged `cassfs serve`, node-driver-registrar and livenessprobe, and its
// ServiceAccount), the CSIDriver object (csidriver.yaml), an example volume with its
// login (example/volume.yaml, example/secret.yaml) and a training Job reading it
// (example/job.yaml); the image they name is built from the Containerfile.
//
// The test decodes every manifest strictly into the k8s.io/api types (an unknown or
// duplicated field is an error, as it is to kubectl apply --validate=strict) and checks
// what a cluster would otherwise find out late: the serving process runs unprivileged,
// the plugin can mount, the sockets and paths the containers share agree, the driver's
// name is the same everywhere, and every reference resolves. What needs a cluster (kubelet
// registration, mount propagation into containers, upgrades of the DaemonSet) it cannot
// check.
package kubernetes
