package loopback

import "testing"

func TestHostAndAddr(t *testing.T) {
	for _, c := range []struct {
		in         string
		host, addr bool
	}{
		{"localhost", true, true},
		{"127.0.0.1", true, true},
		{"127.8.9.10", true, true},
		{"::1", true, true},
		{"[::1]", true, true},
		{"127.0.0.1:8080", false, true},
		{"[::1]:8080", false, true},
		{"localhost:4222", false, true},
		{"0.0.0.0", false, false},
		{":8080", false, false},
		{"10.0.0.1:80", false, false},
		{"example.com", false, false},
		{"localhost.example.com:80", false, false},
		{"", false, false},
	} {
		if got := Host(c.in); got != c.host {
			t.Errorf("Host(%q) = %v, want %v", c.in, got, c.host)
		}
		if got := Addr(c.in); got != c.addr {
			t.Errorf("Addr(%q) = %v, want %v", c.in, got, c.addr)
		}
	}
}
