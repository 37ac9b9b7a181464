package procs

import (
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is a running child process in its own process group, so that a
// Ctrl-C at the terminal reaches only the program that started it, which
// then stops its children in order.
type Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs bin with args and this process's environment plus env, its
// stdout and stderr both written to out. With dieWithParent the kernel kills
// it (SIGKILL) when the thread that started it ends, as when the program
// dies (Linux only: see DieWithParent).
func Start(bin string, env []string, out io.Writer, dieWithParent bool, args ...string) (*Proc, error) {
	return StartIn("", bin, env, out, dieWithParent, args...)
}

// StartIn is Start in working directory dir ("": this process's).
func StartIn(dir, bin string, env []string, out io.Writer, dieWithParent bool, args ...string) (*Proc, error) {
	p := &Proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if dieWithParent {
		DieWithParent(p.cmd.SysProcAttr)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process (SIGSTOP and SIGCONT freeze and thaw it).
func (p *Proc) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Done is closed when the process has ended.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (nil: exit status 0); it is meaningful once
// Exited.
func (p *Proc) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Kill sends SIGKILL (kill -9) and waits for the process to go.
func (p *Proc) Kill() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to grace for the process to end; then it
// kills it. It reports whether the process ended within grace (or had
// already ended).
func (p *Proc) Stop(grace time.Duration) bool {
	if p.Exited() {
		return true
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.Kill()
		return false
	}
}
