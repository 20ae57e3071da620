#!/bin/bash
# cold-ab-go.sh ROUNDS BIN_A BIN_B [mount flags]: one cold epoch (epoch-0 of ds4k) per pass,
# the two builds in turn (B first in even rounds), a fresh mount each pass, page cache
# dropped; 16 Go readers in file_list order. Prints files/s, the daemon's and Cassandra's
# CPU µs per file (/proc/PID/stat over the epoch).
R=$(mktemp -d)
cat > $R/main.go <<'GO'
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	dir := os.Args[1]
	f, _ := os.Open(filepath.Join(dir, "file_list.txt"))
	var paths []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var name string
		fmt.Sscan(sc.Text(), &name)
		paths = append(paths, filepath.Join(dir, name))
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	var bytes atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for {
				i := next.Add(1) - 1
				if int(i) >= len(paths) {
					return
				}
				fh, err := os.Open(paths[i])
				if err != nil {
					panic(err)
				}
				for {
					n, err := fh.Read(buf)
					bytes.Add(int64(n))
					if err != nil || n == 0 {
						break
					}
				}
				fh.Close()
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	fmt.Printf("%d files %.0f files/s %.1f MB\n", len(paths), float64(len(paths))/d.Seconds(), float64(bytes.Load())/1e6)
}
GO
printf 'module rd\ngo 1.26\n' > $R/go.mod
(cd $R && go build -o rd .)
rounds=$1; A=$2; B=$3; shift 3
cpid=$(pgrep -f CassandraDaemon | head -1)
one() {
  bin=$1; tag=$2; shift 2
  mkdir -p /tmp/abm
  $bin mount --dataset ds4k "$@" /tmp/abm > /tmp/abm.log 2>&1 &
  for i in $(seq 50); do [ -e /tmp/abm/all/epoch-0/file_list.txt ] && break; sleep 0.1; done
  pid=$(pgrep -f "mount --dataset ds4k.*/tmp/abm" | head -1)
  sleep 0.5
  sync; echo 3 > /proc/sys/vm/drop_caches
  c0=$(awk '{print $14+$15}' /proc/$pid/stat); d0=$(awk '{print $14+$15}' /proc/$cpid/stat)
  out=$($R/rd /tmp/abm/all/epoch-0)
  c1=$(awk '{print $14+$15}' /proc/$pid/stat); d1=$(awk '{print $14+$15}' /proc/$cpid/stat)
  echo "$tag $(echo $out | awk '{print $3}') files/s daemon $(( (c1-c0)*10000/4000 )) us/file db $(( (d1-d0)*10000/4000 )) us/file"
  kill -TERM $pid; wait
}
for r in $(seq $rounds); do
  if [ $((r%2)) = 1 ]; then one $A A "$@"; one $B B "$@"; else one $B B "$@"; one $A A "$@"; fi
done
