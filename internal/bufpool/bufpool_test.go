package bufpool

import "testing"

// Buffers come out of the tier that holds them, at the length asked, and
// go back only to the tier of their capacity.
func TestPool(t *testing.T) {
	t.Parallel()
	p := New()
	for _, n := range []int{0, 1, 255, 256, 257, 16 << 10, 32<<10 + 9, 4 << 20, 4<<20 + 1} {
		b := p.Get(n)
		if len(*b) != n || cap(*b) < n {
			t.Fatalf("Get(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		if n <= 4<<20 && cap(*b)&(cap(*b)-1) != 0 {
			t.Errorf("Get(%d): capacity %d is not a tier's", n, cap(*b))
		}
		p.Put(b)
	}
	odd := make([]byte, 1000)
	p.Put(&odd) // dropped: not a tier's size
	if b := p.Get(1000); cap(*b) != 1024 {
		t.Errorf("Get(1000) after putting a 1000-byte buffer: cap %d, want 1024", cap(*b))
	}
}
