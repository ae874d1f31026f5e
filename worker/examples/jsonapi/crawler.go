package main

import (
	"context"

	"github.com/batoncrawl/baton/activities/crawler"
)

// Version is the API crawler's version.
var Version = "1.0.0"

// Item is one record of the API, pushed as it comes.
type Item struct {
	ID         int      `json:"id"`
	Name       string   `json:"name"`
	PriceCents int64    `json:"price_cents"`
	Tags       []string `json:"tags"`
}

// Options are the API crawler's --set options.
type Options struct {
	// Tag keeps only the items with this tag ("" keeps all).
	Tag string `json:"tag"`
}

// NewCrawler returns a crawler of a JSON API paginated by cursors: each
// page's items are pushed (many per page) and its "next" URL is followed,
// until a page has none.
func NewCrawler() *crawler.Crawler {
	c := crawler.New("jsonapi", Version)
	c.Options(&Options{})
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		var page struct {
			Items []Item `json:"items"`
			Next  string `json:"next"`
		}
		if err := p.DecodeJSON(&page); err != nil {
			return err
		}
		tag := crawler.OptionsOf[Options](p).Tag
		for _, it := range page.Items {
			if tag != "" && !contains(it.Tags, tag) {
				continue
			}
			if err := p.Push(it); err != nil {
				return err
			}
		}
		if page.Next != "" {
			if _, err := p.Enqueue(page.Next, "", nil); err != nil {
				return err
			}
		}
		return nil
	})
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
