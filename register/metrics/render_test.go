package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/plugreg/plugreg/register"
)

// TestMetricsSharedRender: scrapes that arrive while a render runs are
// served its page; a scrape after it renders anew.
func TestMetricsSharedRender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var renders atomic.Int64
		release := make(chan struct{})
		src := allSources()
		status := src.Agent
		src.Agent = func() register.Status {
			if renders.Add(1) == 1 {
				<-release // the first render holds until every scrape waits
			}
			return status()
		}
		h := Handler(src, 0, nil)
		type page struct {
			code int
			body []byte
		}
		scrape := func() page {
			code, _, body := h.Respond(http.MethodGet, "/metrics")
			return page{code, body}
		}
		const scrapers = 8
		var wg sync.WaitGroup
		got := make([]page, scrapers)
		for i := range scrapers {
			wg.Go(func() { got[i] = scrape() })
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		if n := renders.Load(); n != 1 {
			t.Errorf("%d concurrent scrapes rendered %d pages, want 1", scrapers, n)
		}
		for i, p := range got {
			if p.code != http.StatusOK || string(p.body) != string(got[0].body) || len(p.body) == 0 {
				t.Errorf("scrape %d: %d, %d bytes; want 200 and the page of scrape 0 (%d bytes)", i, p.code, len(p.body), len(got[0].body))
			}
		}
		scrape()
		if n := renders.Load(); n != 2 {
			t.Errorf("a scrape after the shared render: %d renders in all, want 2", n)
		}
	})
}
