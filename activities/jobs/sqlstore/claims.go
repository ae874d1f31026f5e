package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/batoncrawl/baton/activities/jobs"
)

// This file holds the deduplication of pages by body hash: the first
// page of a job recorded with a body owns its hash (baton_results.claim,
// unique per job: claimIndex), and the pages recorded after it with the
// same body point to it (DuplicateOf). A group commit looks up the owners
// of its pages' hashes (one read, no lock), and its result rows claim the
// hashes nobody owns. Two commits claiming one hash at once: the second's
// insert waits for the first and, once the first commits, fails on the
// index; the commit is tried again (a transient error: postgres.go) and
// finds the owner. The claims of a result statement come first, in hash
// order, so two commits never wait for each other's claims in a cycle.

// claimHashes returns the body hashes of rs's pages fetched without error
// whose URL is in, each once, in hash order: the hashes whose owners a
// group commit looks up.
func claimHashes(rs []jobs.Record, in func(url string) bool) []any {
	seen := map[string]bool{}
	var out []any
	for _, r := range rs {
		if !claims(r) || !in(r.URL) || seen[r.Page.BodyHash] {
			continue
		}
		seen[r.Page.BodyHash] = true
		out = append(out, r.Page.BodyHash)
	}
	slices.SortFunc(out, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	return out
}

// claims reports whether r's page takes part in deduplication: fetched
// without error, with a body hash.
func claims(r jobs.Record) bool {
	return r.Page != nil && r.Page.Error == "" && r.Page.BodyHash != ""
}

// ownersQuery reads the owners of hashes (before s.q): rows (hash, URL),
// from the result rows, and from baton_hashes, where a store of version
// 6 or older kept them.
func ownersQuery(job string, hashes []any) (string, []any) {
	in := `(?` + strings.Repeat(", ?", len(hashes)-1) + `)`
	args := make([]any, 0, 2*len(hashes)+2)
	args = append(append(append(append(args, job), hashes...), job), hashes...)
	return `SELECT claim, url FROM baton_results WHERE job = ? AND claim IN ` + in + `
		UNION ALL SELECT hash, url FROM baton_hashes WHERE job = ? AND hash IN ` + in, args
}

// scanOwner scans a row of ownersQuery.
func scanOwner(row scanner) ([2]string, error) {
	var hu [2]string
	return hu, row.Scan(&hu[0], &hu[1])
}

// owners returns the owners of hashes by hash, read on tx.
func (s *resultStore) owners(ctx context.Context, tx dbtx, job string, hashes []any) (map[string]string, error) {
	if len(hashes) == 0 {
		return map[string]string{}, nil
	}
	q, args := ownersQuery(job, hashes)
	rows, err := queryTx(ctx, s.core, tx, q, args, func(rows *sql.Rows) ([2]string, error) { return scanOwner(rows) })
	if err != nil {
		return nil, err
	}
	return ownerMap(rows), nil
}

// ownerMap is rows of ownersQuery by hash (a result row's claim first).
func ownerMap(rows [][2]string) map[string]string {
	out := make(map[string]string, len(rows))
	for _, hu := range rows {
		if _, ok := out[hu[0]]; !ok {
			out[hu[0]] = hu[1]
		}
	}
	return out
}

// assignClaims returns, by index in rs, the hashes the pages finished by
// this commit claim (the first of the group with a hash nobody owns) and
// the URL each duplicate duplicates, from the owners found (by hash).
func assignClaims(rs []jobs.Record, finished map[string]bool, owners map[string]string) (claimed, dups map[int]string) {
	claimed, dups = map[int]string{}, map[int]string{}
	mine := map[string]string{}
	for i, r := range rs {
		if !claims(r) || !finished[r.URL] {
			continue
		}
		h := r.Page.BodyHash
		o := owners[h]
		if o == "" {
			o = mine[h]
		}
		switch {
		case o == "":
			mine[h] = r.URL
			claimed[i] = h
		case o != r.URL:
			dups[i] = o
		}
	}
	return claimed, dups
}

// sortResults orders result rows (resultRows'): those claiming a hash
// first, in hash order, then the others in URL order.
func sortResults(rows [][]any) { sortByClaim(rows, 5, 1) }

// sortByClaim orders rows whose column claim holds a claimed body hash
// (a string) or nothing: those claiming first, in hash order, then the
// others in the order of their URL, column url.
func sortByClaim(rows [][]any, claim, url int) {
	slices.SortFunc(rows, func(a, b []any) int {
		ca, oka := a[claim].(string)
		cb, okb := b[claim].(string)
		switch {
		case oka && okb:
			return strings.Compare(ca, cb)
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		}
		return cmp.Compare(a[url].(string), b[url].(string))
	})
}
