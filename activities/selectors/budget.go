// Package selectors runs CSS and XPath selectors under a step and time
// budget, so that a hostile page (huge, deeply nested) and an expensive
// selector (an XPath with ancestor:: over every node, a CSS :has) cannot
// hold a Runner's CPU. The built-in extraction (activities/crawl) and the
// crawler API's Find and XPath (activities/crawler) both select through it.
package selectors

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// The default budget of one page's selectors: every XPath navigation step
// and every CSS match of an element counts, and the clock is read every
// few hundred steps.
const (
	MaxSteps = 20_000_000
	MaxTime  = 5 * time.Second
)

// ErrBudget is the error of a page whose selectors ran past their budget.
var ErrBudget = errors.New("selectors ran past their budget")

// clockEvery is how many steps pass between two reads of the clock (a
// power of two).
const clockEvery = 256

// Budget counts one page's selector steps. Its zero value is the default
// budget (MaxSteps, MaxTime); its clock starts at the first Run. Runs are
// serialised: a handler may select from several goroutines.
type Budget struct {
	mu       sync.Mutex
	steps    int
	max      int
	limit    time.Duration
	deadline time.Time
	spent    error
}

// NewBudget is a budget of maxSteps steps and limit of time (zero or less:
// the default).
func NewBudget(maxSteps int, limit time.Duration) *Budget {
	return &Budget{max: maxSteps, limit: limit}
}

// exceeded unwinds an evaluation past the budget (the CSS and XPath
// evaluators have no cancellation of their own).
type exceeded struct{ err error }

// Run runs fn under the budget. Past it, fn is unwound and Run returns an
// error wrapping ErrBudget; every later Run returns it at once. What fn
// did before that stays done. Panics other than the budget's go on.
func (b *Budget) Run(fn func()) (err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent != nil {
		return b.spent
	}
	if b.max <= 0 {
		b.max = MaxSteps
	}
	if b.limit <= 0 {
		b.limit = MaxTime
	}
	if b.deadline.IsZero() {
		b.deadline = time.Now().Add(b.limit)
	}
	defer func() {
		if v := recover(); v != nil {
			e, ok := v.(exceeded)
			if !ok {
				panic(v)
			}
			b.spent = e.err
			err = e.err
		}
	}()
	fn()
	return nil
}

// tick counts one step, inside Run.
func (b *Budget) tick() {
	b.steps++
	if b.steps > b.max {
		panic(exceeded{fmt.Errorf("%w: more than %d steps", ErrBudget, b.max)})
	}
	if b.steps&(clockEvery-1) == 0 && time.Now().After(b.deadline) {
		panic(exceeded{fmt.Errorf("%w: more than %v", ErrBudget, b.limit)})
	}
}
