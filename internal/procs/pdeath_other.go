//go:build !linux

package procs

import "syscall"

// DieWithParent does nothing here: only Linux can tie a child's life to
// its parent's (Pdeathsig), so elsewhere a child outlives a killed program
// (a program that exits normally still stops its children).
func DieWithParent(*syscall.SysProcAttr) {}
