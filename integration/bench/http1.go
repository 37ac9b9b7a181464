package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"time"
)

// conns is a minimal HTTP/1.1 keep-alive client for one server: each
// request borrows an idle connection (or dials one), writes the request in
// one write, reads the response and hands the connection back. It speaks
// only what the api answers (Content-Length or chunked bodies) and exists so
// that the load generator, which shares the machine's cores with the system
// it measures, costs as little CPU per request as possible: net/http's
// client (a reader and a writer goroutine per connection, channels between
// them) cost more than a third of the bench process's CPU per task.
type conns struct {
	addr, host string
	idle       chan *conn
}

type conn struct {
	c   net.Conn
	br  *bufio.Reader
	buf []byte // request being written, then the response body
}

func newConns(addr string, max int) *conns {
	return &conns{addr: addr, host: addr, idle: make(chan *conn, max)}
}

func (p *conns) get(ctx context.Context) (*conn, error) {
	select {
	case c := <-p.idle:
		return c, nil
	default:
	}
	d := net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	return &conn{c: c, br: bufio.NewReaderSize(c, 16<<10), buf: make([]byte, 0, 1024)}, nil
}

func (p *conns) put(c *conn) {
	select {
	case p.idle <- c:
	default:
		_ = c.c.Close()
	}
}

// response is a read reply; body is valid until the connection's next use
// (post copies it out).
type response struct {
	status int
	sse    bool
	body   []byte
}

// post sends body to path with the given extra header lines ("Name: value\r\n"
// each) and returns the reply with its own copy of the body.
func (p *conns) post(ctx context.Context, path string, headers []byte, body []byte) (response, error) {
	c, err := p.get(ctx)
	if err != nil {
		return response{}, err
	}
	deadline := time.Now().Add(3 * time.Minute)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	r, keep, err := c.roundTrip(p.host, path, headers, body)
	if !stop() {
		err, keep = errors.Join(err, ctx.Err()), false
	}
	if err != nil || !keep {
		_ = c.c.Close()
		return r, err
	}
	r.body = bytes.Clone(r.body)
	p.put(c)
	return r, nil
}

func (c *conn) roundTrip(host, path string, headers, body []byte) (r response, keep bool, err error) {
	b := c.buf[:0]
	b = append(b, "POST "...)
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"...)
	b = append(b, headers...)
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	c.buf = b
	if _, err := c.c.Write(b); err != nil {
		return r, false, err
	}

	line, err := c.line()
	if err != nil {
		return r, false, err
	}
	// HTTP/1.1 200 OK
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return r, false, fmt.Errorf("bad status line %q", line)
	}
	if r.status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return r, false, fmt.Errorf("bad status line %q", line)
	}
	length, chunked, keep := -1, false, true
	for {
		h, err := c.line()
		if err != nil {
			return r, false, err
		}
		if len(h) == 0 {
			break
		}
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return r, false, fmt.Errorf("bad header line %q", h)
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil {
				return r, false, fmt.Errorf("bad Content-Length %q", v)
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			keep = !bytes.EqualFold(v, []byte("close"))
		case bytes.EqualFold(k, []byte("Content-Type")):
			r.sse = bytes.HasPrefix(v, []byte("text/event-stream"))
		}
	}
	in := c.buf[:0]
	switch {
	case chunked:
		for {
			sz, err := c.line()
			if err != nil {
				return r, false, err
			}
			if i := bytes.IndexByte(sz, ';'); i >= 0 {
				sz = sz[:i]
			}
			n, err := strconv.ParseUint(string(bytes.TrimSpace(sz)), 16, 31)
			if err != nil {
				return r, false, fmt.Errorf("bad chunk size %q", sz)
			}
			if n == 0 {
				for { // trailers
					t, err := c.line()
					if err != nil {
						return r, false, err
					}
					if len(t) == 0 {
						break
					}
				}
				break
			}
			if in, err = readN(c.br, in, int(n)); err != nil {
				return r, false, err
			}
			crlf, err := c.line()
			if err != nil {
				return r, false, fmt.Errorf("chunk not followed by CRLF: %w", err)
			}
			if len(crlf) != 0 {
				return r, false, fmt.Errorf("chunk not followed by CRLF: %q", crlf)
			}
		}
	case length >= 0:
		if in, err = readN(c.br, in, length); err != nil {
			return r, false, err
		}
	default: // body until close
		rest, err := io.ReadAll(c.br)
		if err != nil {
			return r, false, err
		}
		in, keep = append(in, rest...), false
	}
	c.buf = in
	r.body = in
	return r, keep, nil
}

// line reads one CRLF-terminated line without its terminator. The slice is
// valid until the next read.
func (c *conn) line() ([]byte, error) {
	l, err := c.br.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("header line too long")
		}
		return nil, err
	}
	return bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r")), nil
}

func readN(r *bufio.Reader, dst []byte, n int) ([]byte, error) {
	off := len(dst)
	dst = slices.Grow(dst, n)[:off+n]
	_, err := io.ReadFull(r, dst[off:])
	return dst, err
}
