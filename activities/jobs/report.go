package jobs

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Report is the end-of-job summary of a job's results.
type Report struct {
	Pages    int `json:"pages"`    // pages recorded (sitemaps apart)
	Failed   int `json:"failed"`   // pages recorded with an error
	Sitemaps int `json:"sitemaps"` // sitemaps (and robots.txt) read for URLs
	// StatusCodes counts the pages by HTTP status; 0: no status (a
	// connection error, a timeout…).
	StatusCodes map[int]int `json:"status_codes"`
	Bytes       int64       `json:"bytes"`      // body bytes of the pages
	Retries     int         `json:"retries"`    // attempts beyond the first, over all pages
	Refused     int         `json:"refused"`    // pages robots.txt refused (not fetched)
	Duplicates  int         `json:"duplicates"` // pages whose body an earlier page had
	Bodies      int         `json:"bodies"`     // pages whose body was stored
	// MaxPages is the job's cap on pages (0: none); MaxPagesReached says
	// whether the job took as many URLs as it allows (MaxPagesReached).
	MaxPages        int  `json:"max_pages,omitempty"`
	MaxPagesReached bool `json:"max_pages_reached,omitempty"`
	// Render counts the pages rendered in headless Chromium, by reason,
	// and their renders' crashes and time-outs (the job's counters).
	Render RenderStats `json:"render,omitzero"`
	// Baseline is the job's baseline (Spec.Baseline) and Changes its
	// pages' changes against it; nil without a baseline.
	Baseline string       `json:"baseline,omitempty"`
	Changes  *ChangeStats `json:"changes,omitempty"`
}

// Add counts one record.
func (r *Report) Add(p PageRecord) {
	if r.StatusCodes == nil {
		r.StatusCodes = map[int]int{}
	}
	if p.Sitemap {
		r.Sitemaps++
		return
	}
	r.Pages++
	if p.Error != "" {
		r.Failed++
	}
	r.StatusCodes[p.StatusCode]++
	r.Bytes += p.Bytes
	r.Retries += max(p.Attempts-1, 0)
	if p.DuplicateOf != "" {
		r.Duplicates++
	}
	if p.BodyRef != "" && !strings.HasPrefix(p.BodyRef, "not stored") {
		r.Bodies++
	}
}

// BuildReport reads a job's results and refused pages from the store.
func BuildReport(ctx context.Context, s ReaderStore, job string) (Report, error) {
	r := Report{StatusCodes: map[int]int{}}
	if err := s.Results(ctx, job, func(p PageRecord) error { r.Add(p); return nil }); err != nil {
		return r, err
	}
	n, err := s.Refused(ctx, job)
	if err != nil {
		return r, err
	}
	r.Refused = n
	spec, err := s.Spec(ctx, job)
	if err != nil {
		return r, err
	}
	st, err := s.Stats(ctx, job)
	if err != nil {
		return r, err
	}
	r.MaxPages, r.MaxPagesReached = spec.MaxPages, MaxPagesReached(spec, st)
	r.Render = st.Render
	if spec.Baseline != "" {
		ch, err := s.Changes(ctx, job, spec.Baseline)
		if err != nil {
			return r, err
		}
		r.Baseline, r.Changes = spec.Baseline, &ch
	}
	return r, nil
}

// Write prints the report as an aligned block, status codes in order.
func (r Report) Write(w io.Writer) error {
	codes := make([]int, 0, len(r.StatusCodes))
	for c := range r.StatusCodes {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var parts []string
	for _, c := range codes {
		name := fmt.Sprint(c)
		if c == 0 {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s: %d", name, r.StatusCodes[c]))
	}
	status := strings.Join(parts, ", ")
	if status == "" {
		status = "-"
	}
	_, err := fmt.Fprintf(w, `  pages        %d (%d failed)
  status codes %s
  bytes        %d
  retries      %d
  robots.txt   %d refused
  duplicates   %d
  sitemaps     %d
  bodies kept  %d
`, r.Pages, r.Failed, status, r.Bytes, r.Retries, r.Refused, r.Duplicates, r.Sitemaps, r.Bodies)
	if err == nil && r.Render != (RenderStats{}) {
		_, err = fmt.Fprintf(w, "  rendered     %s\n", r.Render.Summary())
	}
	if err == nil && r.MaxPagesReached {
		_, err = fmt.Fprintf(w, "  max pages    %d reached: links beyond it were not crawled\n", r.MaxPages)
	}
	if err == nil && r.Changes != nil {
		_, err = fmt.Fprintf(w, "  changes      %s\n", r.Changes.Line(r.Baseline))
	}
	return err
}
