package selectors

import (
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func page(t *testing.T, n int) *goquery.Document {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(strings.Repeat("<div><p>x</p></div>", n)))
	require.NoError(t, err)
	return doc
}

func TestZeroBudgetSelectsAsGoqueryDoes(t *testing.T) {
	doc := page(t, 50)
	var b Budget
	sel, err := b.Find(doc, "div > p")
	require.NoError(t, err)
	assert.Equal(t, doc.Find("div > p").Length(), sel.Length())

	ns, err := b.XPath(doc.Nodes[0], "//div/p/text()")
	require.NoError(t, err)
	assert.Len(t, ns, 50)
}

func TestCSSPastItsStepsFailsAndStaysFailed(t *testing.T) {
	doc := page(t, 1000)
	b := NewBudget(500, 0)
	_, err := b.Find(doc, "div:has(p) > p")
	require.ErrorIs(t, err, ErrBudget)
	assert.Contains(t, err.Error(), "more than 500 steps")

	_, err = b.Find(doc, "p") // cheap, but the page's budget is spent
	assert.ErrorIs(t, err, ErrBudget)
}

func TestXPathPastItsStepsFails(t *testing.T) {
	doc := page(t, 1000)
	b := NewBudget(500, 0)
	_, err := b.XPath(doc.Nodes[0], "//p[ancestor::div]")
	assert.ErrorIs(t, err, ErrBudget)
}

func TestOtherPanicsGoOn(t *testing.T) {
	var b Budget
	assert.PanicsWithValue(t, "boom", func() { _ = b.Run(func() { panic("boom") }) })
}
