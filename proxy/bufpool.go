package proxy

import "sync"

// bufferPool recycles ReverseProxy copy buffers.
type bufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

// Get returns a 32 KiB buffer.
func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, copyBufferSize)
}

// Put recycles buf.
func (b *bufferPool) Put(buf []byte) {
	if cap(buf) != copyBufferSize {
		return
	}
	buf = buf[:copyBufferSize]
	b.p.Put(&buf)
}
