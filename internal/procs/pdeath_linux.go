package procs

import "syscall"

// DieWithParent asks the kernel to kill (SIGKILL) the child started with a
// when the thread that started it ends, as when the program is killed.
func DieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
