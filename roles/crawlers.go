package roles

import "fmt"

// BuiltinCrawler is the name of Baton's built-in crawler, which every
// worker carries.
const BuiltinCrawler = "builtin"

// CrawlerOption is one typed option a crawler accepts (--set key=value).
type CrawlerOption struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"`
	Default string `json:"default,omitempty"`
	// Secret: the value is sealed with the job's secrets (crawl --set).
	Secret bool `json:"secret,omitempty"`
}

// CrawlerInfo is one crawler a worker carries: its name, version, the
// labels it has handlers for, and its options.
type CrawlerInfo struct {
	Name    string          `json:"name"`
	Version string          `json:"version"`
	Labels  []string        `json:"labels,omitempty"`
	Options []CrawlerOption `json:"options,omitempty"`
}

// Crawlers is what a worker advertises in its znode
// <root>/node/<name>/crawlers (a Baton addition), written at every start:
// the crawlers its binary carries. A job's batches go only to Runners that
// carry the job's crawler at the job's version. An instance without the
// znode (an older worker) carries the built-in crawler only.
type Crawlers struct {
	List []CrawlerInfo `json:"crawlers"`
}

// Carries reports whether c carries crawler name at version ("" for the
// built-in crawler, which every worker carries; version "" matches any).
func (c Crawlers) Carries(name, version string) bool {
	if name == "" || name == BuiltinCrawler {
		return true
	}
	for _, ci := range c.List {
		if ci.Name == name && (version == "" || ci.Version == version) {
			return true
		}
	}
	return false
}

// DecodeCrawlers parses and validates a Crawlers document.
func DecodeCrawlers(data []byte) (Crawlers, error) {
	var c Crawlers
	if err := decode("Crawlers", data, &c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate names the first bad field.
func (c Crawlers) Validate() error {
	for i, ci := range c.List {
		if ci.Name == "" {
			return fieldErr("Crawlers", fmt.Sprintf("crawlers[%d].name", i), "is empty")
		}
	}
	return nil
}
