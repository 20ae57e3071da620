package a

import "strconv"

// Product code is not checked.
func f() int { n, _ := strconv.Atoi("1"); return n }
