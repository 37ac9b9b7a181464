package bridge

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpqueue/mcpqueue/internal/procs"
)

// DefaultPath is the PATH a child process gets when its configuration
// names none.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// MaxMessage bounds one message a server writes on its standard output.
const MaxMessage = 64 << 20

// Command is an MCP server run as a child process that speaks MCP on its
// standard input and output (the stdio transport: one JSON-RPC message per
// line). Its standard error goes to the worker's log.
type Command struct {
	// Path is the program: a path, or a name looked up in the child's PATH.
	Path string
	Args []string
	// Env is the child's whole environment: nothing of the worker's own
	// environment (its secrets included) reaches the child. PATH, when
	// Env has none, is DefaultPath.
	Env map[string]string
	// Dir is the child's working directory ("": the worker's).
	Dir string
}

// environ is the child's environment, sorted.
func (c Command) environ() []string {
	out := make([]string, 0, len(c.Env)+1)
	for k, v := range c.Env {
		out = append(out, k+"="+v)
	}
	if _, ok := c.Env["PATH"]; !ok {
		out = append(out, "PATH="+DefaultPath)
	}
	sort.Strings(out)
	return out
}

// program resolves Path in the child's PATH (not the worker's).
func (c Command) program() (string, error) {
	if c.Path == "" {
		return "", errors.New("no command")
	}
	if strings.Contains(c.Path, "/") {
		return c.Path, nil
	}
	path, ok := c.Env["PATH"]
	if !ok {
		path = DefaultPath
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, c.Path)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in the child's PATH %s", c.Path, path)
}

// Dialer starts the command once per session.
func (c Command) Dialer(log zerolog.Logger) Dialer {
	return func(ctx context.Context) (Conn, error) { return c.start(log) }
}

// child is a running server process and its stdio.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	wmu   sync.Mutex

	exited  chan struct{}
	waitErr error
	stderr  *tail
	closing bool
	cmu     sync.Mutex
}

func (c Command) start(log zerolog.Logger) (*child, error) {
	prog, err := c.program()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(prog, c.Args...)
	cmd.Env = c.environ()
	cmd.Dir = c.Dir
	// Its own process group, so a terminal's ^C reaches the worker (which
	// drains, then stops its children) and not the children directly; and
	// killed with the worker if the worker is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	procs.DieWithParent(cmd.SysProcAttr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Pipes of our own rather than StdoutPipe: Wait closes those as soon as
	// the process exits, which could drop its last message unread.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, err
	}
	outW.Close()
	errW.Close()
	ch := &child{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(outR, 64<<10), exited: make(chan struct{}), stderr: &tail{}}
	log = log.With().Int("pid", cmd.Process.Pid).Logger()
	log.Info().Str("command", prog).Strs("args", c.Args).Msg("mcp server started")
	go func() {
		ch.waitErr = cmd.Wait()
		close(ch.exited)
		outR.Close()
	}()
	go func() {
		defer errR.Close()
		sc := bufio.NewScanner(errR)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			ch.stderr.add(line)
			log.Info().Str("stderr", line).Msg("server stderr")
		}
	}()
	return ch, nil
}

// Read returns the next line the server wrote.
func (c *child) Read() ([]byte, error) {
	for {
		var line []byte
		for {
			frag, err := c.out.ReadSlice('\n')
			line = append(line, frag...)
			if err == nil {
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				if len(line) > MaxMessage {
					return nil, fmt.Errorf("a message longer than %d bytes", MaxMessage)
				}
				continue
			}
			return nil, err
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return line, nil
		}
	}
}

// writeTimeout bounds one write to a child's standard input: a child that
// reads nothing for that long, with the pipe full, is taken for hung.
const writeTimeout = 30 * time.Second

func (c *child) Write(msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if f, ok := c.stdin.(interface{ SetWriteDeadline(time.Time) error }); ok {
		_ = f.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	_, err := c.stdin.Write(append(msg, '\n'))
	return err
}

// Close ends the child: its standard input closes (stdio servers exit on
// that), then SIGTERM to its process group after 2 s, SIGKILL after 2 more.
func (c *child) Close() error {
	c.cmu.Lock()
	c.closing = true
	c.cmu.Unlock()
	_ = c.stdin.Close()
	pgid := c.cmd.Process.Pid
	for _, sig := range []syscall.Signal{0, syscall.SIGTERM, syscall.SIGKILL} {
		if sig != 0 {
			_ = syscall.Kill(-pgid, sig)
		}
		t := time.NewTimer(2 * time.Second)
		select {
		case <-c.exited:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	<-c.exited
	return nil
}

// Exit waits (a little) for the process to end and says how it did.
func (c *child) Exit() error {
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	pid := c.cmd.Process.Pid
	select {
	case <-c.exited:
	case <-t.C:
		return fmt.Errorf("pid %d closed its standard output", pid)
	}
	c.cmu.Lock()
	closing := c.closing
	c.cmu.Unlock()
	how := "exited"
	if c.waitErr != nil {
		how = "exited: " + c.waitErr.Error()
	} else if st := c.cmd.ProcessState; st != nil {
		how = "exited: " + st.String()
	}
	if closing {
		how = "stopped by the bridge, " + how
	}
	if last := c.stderr.last(); last != "" {
		how += " (last stderr line: " + last + ")"
	}
	return fmt.Errorf("pid %d %s", pid, how)
}

// tail keeps the last lines a process wrote on standard error.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if line = strings.TrimSpace(line); line == "" {
		return
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > 10 {
		t.lines = t.lines[1:]
	}
}

func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return t.lines[len(t.lines)-1]
}
