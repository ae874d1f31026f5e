package crawl

import (
	"time"

	"github.com/batoncrawl/baton/activities/selectors"
)

// The selectors of one page share a budget (package selectors), so that a
// hostile page and an expensive selector cannot hold a Runner's CPU. Past
// MaxSelectorSteps or MaxSelectorTime the page fails (not retried: the
// next fetch would cost the same) with the fields extracted so far.
const (
	MaxSelectorSteps = selectors.MaxSteps
	MaxSelectorTime  = selectors.MaxTime
)

// ErrSelectorBudget is the error of a page whose selectors ran past their
// budget.
var ErrSelectorBudget = selectors.ErrBudget

// selectorSteps and selectorTime are the budget in force (tests lower
// them).
var selectorSteps, selectorTime = MaxSelectorSteps, time.Duration(MaxSelectorTime)

func newStepBudget() *selectors.Budget {
	return selectors.NewBudget(selectorSteps, selectorTime)
}
