package crawler

import "github.com/batoncrawl/baton/activities/selectors"

// A page's Find and XPath calls share a budget, as the built-in
// selectors do (package selectors), so that a hostile page and an
// expensive selector cannot hold a Runner's CPU. Past MaxSelectorSteps or
// MaxSelectorTime the call selects nothing and the page fails with
// ErrSelectorBudget, whatever its handler returns.
const (
	MaxSelectorSteps = selectors.MaxSteps
	MaxSelectorTime  = selectors.MaxTime
)

// ErrSelectorBudget is the error of a page whose Find and XPath calls ran
// past their budget.
var ErrSelectorBudget = selectors.ErrBudget
