package main

import (
	"context"
	"strings"
	"testing"
)

// TestCSINeedsNodeID: the plugin does not start without knowing its node.
func TestCSINeedsNodeID(t *testing.T) {
	c := newCSICmd()
	c.SetArgs([]string{"--endpoint", t.TempDir() + "/csi.sock"})
	c.SetOut(new(strings.Builder))
	c.SetErr(new(strings.Builder))
	if err := c.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "node-id") {
		t.Errorf("cassfs csi without --node-id: %v, want an error naming it", err)
	}
}
