package jobs

import (
	"bufio"
	"io"
	"net/url"
	"runtime"
	"strings"

	"github.com/batoncrawl/baton/activities/crawl"
	"github.com/batoncrawl/baton/roles"
)

// seedBlockLines is how many lines of a seed file one goroutine of
// checkSeedLines checks at a time.
const seedBlockLines = 4096

// seedLine is one line of a seed file, checked: skipped (blank, a
// comment), bad (err) or a URL with its host name and origin.
type seedLine struct {
	skip   bool
	err    error
	url    string
	host   string
	origin string
	at     bool // the URL holds an @ (a user:password, maybe)
	query  bool // the URL holds a ? (parameters, maybe secret ones)
}

// checkSeedLine checks one line of a seed file.
func checkSeedLine(line string) seedLine {
	s := strings.TrimSpace(line)
	if s == "" || strings.HasPrefix(s, "#") {
		return seedLine{skip: true}
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		err = (roles.Request{URL: s}).Validate() // what is wrong, in a Request's words
	}
	if err != nil {
		return seedLine{err: err}
	}
	l := seedLine{url: s, host: u.Hostname(), origin: strings.ToLower(u.Scheme) + "://" + u.Host,
		at: strings.Contains(s, "@"), query: strings.Contains(s, "?")}
	if _, err = crawl.NormalizeParsedURL(s, u); err == nil { // u is the canonical URL from here
		err = CheckURLLength(s)
	}
	if err != nil {
		return seedLine{err: err}
	}
	return l
}

// seedBlock is a block of consecutive lines of a seed file and, once done
// is closed, what checkSeedLine made of each.
type seedBlock struct {
	first   int // the number of lines[0], from 1
	lines   []string
	checked []seedLine
	done    chan struct{}
}

// checkSeedLines reads r line by line and calls take with each line's
// number (from 1) and checkSeedLine's verdict, in the order of the lines;
// the lines are checked in blocks by a goroutine per core meanwhile. It
// returns how many lines it read, and the error that stopped the reading.
func checkSeedLines(r io.Reader, take func(n int, l seedLine)) (int, error) {
	workers := max(1, runtime.GOMAXPROCS(0))
	todo := make(chan *seedBlock, workers)
	inOrder := make(chan *seedBlock, 2*workers)
	for range workers {
		go func() {
			for b := range todo {
				b.checked = make([]seedLine, len(b.lines))
				for i, l := range b.lines {
					b.checked[i] = checkSeedLine(l)
				}
				close(b.done)
			}
		}()
	}
	read := make(chan error, 1)
	lines := 0
	go func() {
		defer close(inOrder)
		defer close(todo)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		b := &seedBlock{first: 1, done: make(chan struct{})}
		send := func() {
			inOrder <- b
			todo <- b
		}
		for sc.Scan() {
			lines++
			if b.lines = append(b.lines, sc.Text()); len(b.lines) == seedBlockLines {
				send()
				b = &seedBlock{first: lines + 1, done: make(chan struct{})}
			}
		}
		if len(b.lines) > 0 {
			send()
		}
		read <- sc.Err()
	}()
	for b := range inOrder {
		<-b.done
		for i, l := range b.checked {
			take(b.first+i, l)
		}
	}
	err := <-read
	return lines, err
}
