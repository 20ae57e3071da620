package csi

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCheckRequest: every node request is refused with InvalidArgument, saying what is
// wrong, when its volume id, one of its paths or its capability is missing or malformed;
// a valid one gives its paths clean.
func TestCheckRequest(t *testing.T) {
	mount := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}
	block := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}
	for _, tc := range []struct {
		req  nodeRequest
		want string // in the error; "" for none
	}{
		{&csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s/", VolumeCapability: mount}, ""},
		{&csi.NodeStageVolumeRequest{StagingTargetPath: "/s", VolumeCapability: mount}, "no volume id"},
		{&csi.NodeStageVolumeRequest{VolumeId: "v", VolumeCapability: mount}, "no staging target path"},
		{&csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "s", VolumeCapability: mount}, `staging target path "s" is not an absolute path`},
		{&csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s"}, "no volume capability"},
		{&csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: block}, "not a block device"},
		{&csi.NodeUnstageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s"}, ""},
		{&csi.NodeUnstageVolumeRequest{StagingTargetPath: "/s"}, "no volume id"},
		{&csi.NodeUnstageVolumeRequest{VolumeId: "v"}, "no staging target path"},
		{&csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: "/s/", TargetPath: "/t/", VolumeCapability: mount}, ""},
		{&csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: mount}, "no target path"},
		{&csi.NodePublishVolumeRequest{VolumeId: "v", TargetPath: "/t", VolumeCapability: mount}, "no staging target path"},
		{&csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", TargetPath: "/t", VolumeCapability: &csi.VolumeCapability{}}, "no access type"},
		{&csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: "/t"}, ""},
		{&csi.NodeUnpublishVolumeRequest{TargetPath: "/t"}, "no volume id"},
		{&csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: "t"}, "not an absolute path"},
	} {
		staging, target, err := checkRequest(tc.req)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%T %v: %v, want no error", tc.req, tc.req, err)
		case tc.want == "" && (strings.HasSuffix(staging, "/") || strings.HasSuffix(target, "/")):
			t.Errorf("%T %v: got paths %q, %q, want them clean", tc.req, tc.req, staging, target)
		case tc.want != "" && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%T %v: %v, want InvalidArgument saying %q", tc.req, tc.req, err, tc.want)
		}
	}
}
