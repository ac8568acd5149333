package metrics

import "sync"

// pageRender renders the /metrics page of src for the requests that ask
// for it, one render at a time: a request that arrives while a render
// runs waits for it and is served its page. However many scrapers, the
// agent holds at most one render in progress, whose cost grows with the
// plugins (about 280 bytes of page per socket; see BenchmarkExpose).
type pageRender struct {
	src     Sources
	mu      sync.Mutex
	running *renderCall // nil when no render runs
	last    int         // the length of the last page, which sizes the next one's buffer
}

// renderCall is one render and the requests waiting for it.
type renderCall struct {
	done chan struct{} // closed once body is set
	body []byte
}

// page returns the page of the render running when it is called, which
// may have read some sources a little before, or else of a new render.
func (p *pageRender) page() []byte {
	p.mu.Lock()
	if c := p.running; c != nil {
		p.mu.Unlock()
		<-c.done
		return c.body
	}
	c := &renderCall{done: make(chan struct{})}
	p.running = c
	last := p.last
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.running = nil
		p.last = len(c.body)
		p.mu.Unlock()
		close(c.done)
	}()
	c.body = expose(p.src, last)
	return c.body
}
