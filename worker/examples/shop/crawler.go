package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/batoncrawl/baton/activities/crawler"
)

// Version is the shop crawler's version, recorded with every job it runs.
var Version = "1.0.0"

// Product is the item the shop crawler pushes for each product page.
type Product struct {
	SKU        string `json:"sku"`
	Name       string `json:"name"`
	Category   string `json:"category"`
	Price      string `json:"-"` // as the page gives it ("1 234,50"); the pipeline makes PriceCents
	PriceCents int64  `json:"price_cents"`
	Currency   string `json:"currency"`
	InStock    bool   `json:"in_stock"`
	URL        string `json:"url"`
}

// Options are the shop crawler's --set options.
type Options struct {
	// KeepOutOfStock keeps products out of stock (dropped by default).
	KeepOutOfStock bool `json:"keep_out_of_stock"`
	// MaxListingPages bounds the listing pages followed per category
	// (0: all).
	MaxListingPages int `json:"max_listing_pages"`
}

// Validate checks the options at each Runner.
func (o *Options) Validate() error {
	if o.MaxListingPages < 0 {
		return errors.New("max_listing_pages: negative")
	}
	return nil
}

// listing is the user data a listing page is enqueued with.
type listing struct {
	Category string `json:"category"`
	Page     int    `json:"page"`
}

// NewCrawler returns the shop crawler: the start page's categories are
// listings, a listing's product cards are details and its "next" button
// the next listing; a detail's price is read from its JSON-LD script and
// cleaned by a pipeline, which also drops what is out of stock.
func NewCrawler() *crawler.Crawler {
	c := crawler.New("shop", Version)
	c.Options(&Options{})
	c.HandleFunc("", func(ctx context.Context, p *crawler.Page) error {
		var err error
		p.Find("a.category").Each(func(_ int, s *crawler.Selection) {
			href, _ := s.Attr("href")
			slug := strings.Trim(strings.TrimPrefix(href, "/shop/c/"), "/")
			if _, e := p.Enqueue(href, "listing", listing{Category: slug, Page: 1}); e != nil && err == nil {
				err = e
			}
		})
		return err
	})
	c.HandleFunc("listing", func(ctx context.Context, p *crawler.Page) error {
		var l listing
		if err := p.UserData(&l); err != nil {
			return err
		}
		if _, err := p.EnqueueLinks("a.product-link", "detail", map[string]string{"category": l.Category}); err != nil {
			return err
		}
		opts := crawler.OptionsOf[Options](p)
		if next := p.Attr("a.next", "href"); next != "" && (opts.MaxListingPages == 0 || l.Page < opts.MaxListingPages) {
			_, err := p.Enqueue(next, "listing", listing{Category: l.Category, Page: l.Page + 1})
			return err
		}
		return nil
	})
	c.HandleFunc("detail", func(ctx context.Context, p *crawler.Page) error {
		var ld struct {
			SKU    string `json:"sku"`
			Offers struct {
				Price    string `json:"price"`
				Currency string `json:"priceCurrency"`
			} `json:"offers"`
		}
		raw := p.Text(`script[type="application/ld+json"]`)
		if err := json.Unmarshal([]byte(raw), &ld); err != nil {
			return fmt.Errorf("product JSON-LD: %w", err)
		}
		var data struct {
			Category string `json:"category"`
		}
		if err := p.UserData(&data); err != nil {
			return err
		}
		prod := Product{SKU: ld.SKU, Name: p.Text("h1.name"), Category: data.Category, Price: ld.Offers.Price,
			Currency: ld.Offers.Currency, InStock: p.Text("span.stock") != "out of stock", URL: p.Request.URL}
		if !prod.InStock && !crawler.OptionsOf[Options](p).KeepOutOfStock {
			p.Skip("out of stock")
			return nil
		}
		return p.Push(prod)
	})
	c.Pipe(cleanPrice)
	return c
}

// cleanPrice is the item pipeline: it turns the page's European price
// ("1 234,50") into cents and drops a product without a valid price.
func cleanPrice(_ context.Context, it *crawler.Item) error {
	prod, ok := it.Value.(Product)
	if !ok {
		return nil
	}
	cents, err := ParseEuro(prod.Price)
	if err != nil {
		return crawler.ErrDrop
	}
	prod.PriceCents = cents
	it.Value = prod
	return nil
}

// ParseEuro reads a price written "1 234,50" (spaces, or non-breaking
// spaces, between thousands; a comma before the cents) as cents.
func ParseEuro(s string) (int64, error) {
	s = strings.NewReplacer(" ", "", "\u00a0", "", "\u202f", "").Replace(strings.TrimSpace(s))
	whole, frac, _ := strings.Cut(s, ",")
	if whole == "" || len(frac) > 2 {
		return 0, fmt.Errorf("price %q", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("price %q", s)
	}
	return n, nil
}
