package consumer

import "testing"

// shareOf rounds up, gives at least one slot, and below 1 never all of
// them (of two or more).
func TestShareOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		share float64
		n     int
		want  int
	}{
		{0.75, 4, 3}, {0.25, 3, 1}, {0.5, 4, 2}, {0.5, 3, 2}, {0.75, 8, 6}, {0.25, 6, 2},
		{0.01, 4, 1}, {0.99, 4, 3}, {0.9, 2, 1}, {0.5, 1, 1}, {1, 4, 4}, {2, 4, 4},
	} {
		if got := shareOf(c.share, c.n); got != c.want {
			t.Errorf("shareOf(%v, %d) = %d, want %d", c.share, c.n, got, c.want)
		}
	}
}
