//go:build !unix

package distill

import "os/exec"

// killGroup: outside unix the default (kill the process) applies.
func killGroup(cmd *exec.Cmd) {}
