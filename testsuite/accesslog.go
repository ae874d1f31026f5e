package testsuite

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Hit is one line of an access log in the format "$msec $status
// $request_uri" (nginx's, and `baton demo-site --access-log`'s).
type Hit struct {
	At     time.Time
	Status int
	URI    string
}

// ReadAccessLog reads the hits logged after offset bytes of the log at
// path, and the offset after them (pass it to the next call to read only
// newer hits).
func ReadAccessLog(path string, offset int64) ([]Hit, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, offset, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, offset, err
	}
	var hits []Hit
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil { // a line not yet ended is read next time
			break
		}
		offset += int64(len(line))
		f := bytes.Fields(line)
		if len(f) != 3 {
			return hits, offset, fmt.Errorf("access log %s: bad line %q", path, line)
		}
		sec, err := strconv.ParseFloat(string(f[0]), 64)
		if err != nil {
			return hits, offset, fmt.Errorf("access log %s: bad time in %q", path, line)
		}
		status, _ := strconv.Atoi(string(f[1]))
		hits = append(hits, Hit{At: time.UnixMilli(int64(sec*1000 + 0.5)), Status: status, URI: string(f[2])})
	}
	return hits, offset, nil
}

// LogSize is the size of the file at path (0 when it does not exist): the
// offset from which ReadAccessLog reads what is logged next.
func LogSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
